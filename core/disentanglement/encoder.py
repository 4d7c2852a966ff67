"""A bidirectional Transformer that reads a (masked) sequence into one vector per example.

Used for the posterior q(z|x,y) (reading <bos> x <sep> y) and a learned prior
p(z|x) (reading <bos> x <sep> only). It shares the decoder's block, without the
causal mask, and mean-pools the states of the positions it may read.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from core.disentanglement.decoder import Block, DecoderConfig, init_weights


class SequenceEncoder(nn.Module):
    def __init__(self, config: DecoderConfig, out_dim: int, n_layer: int = 1):
        super().__init__()
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(Block(config, causal=False) for _ in range(n_layer))
        self.ln_final = nn.LayerNorm(config.d_model)
        self.out = nn.Linear(config.d_model, out_dim)
        self.apply(init_weights)

    def forward(self, tokens: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        """tokens [B, L], key_mask [B, L] bool (positions to read) -> [B, out_dim]."""
        h = self.token_embedding(tokens) + self.position_embedding.weight[: tokens.shape[1]]
        for block in self.blocks:
            h = block(h, key_mask)
        weights = key_mask.to(h.dtype)[..., None]
        pooled = (self.ln_final(h) * weights).sum(dim=1) / weights.sum(dim=1)
        return self.out(pooled)
