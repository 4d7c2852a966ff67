"""A small causal Transformer over [<bos>] + x + [<sep>] + y, optionally conditioned on a latent z.

Without a latent (latent_dim = 0) it is the z-free reference p(y|x). With one,
a linear map of z is added to every position's input embedding, so each
supervised prediction sees z. Sequences are right-padded; causal attention
means padding after a token never influences it, so no key mask is needed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.disentanglement.batching import SequenceBatch


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    max_len: int = 96
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    latent_dim: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class SelfAttention(nn.Module):
    def __init__(self, config: DecoderConfig, causal: bool):
        super().__init__()
        self.n_head, self.causal = config.n_head, causal
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, h: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """key_mask [B, L] bool (True = attend) for the bidirectional encoder; causal attention needs none."""
        batch, length, width = h.shape
        q, k, v = self.qkv(h).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2) for t in (q, k, v))
        attn_mask = None if key_mask is None else key_mask[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=self.causal)  # [B, heads, L, width/heads]
        return self.proj(out.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, config: DecoderConfig, causal: bool = True):
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = SelfAttention(config, causal)
        self.ln_mlp = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(), nn.Linear(4 * config.d_model, config.d_model))

    def forward(self, h: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = h + self.attn(self.ln_attn(h), key_mask)
        return h + self.mlp(self.ln_mlp(h))


def init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class Decoder(nn.Module):
    def __init__(self, config: DecoderConfig):
        super().__init__()
        if config.d_model % config.n_head:
            raise ValueError(f"d_model ({config.d_model}) must be divisible by n_head ({config.n_head})")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.max_len, config.d_model)
        self.latent_projection = nn.Linear(config.latent_dim, config.d_model) if config.latent_dim else None
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_final = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)
        self.apply(init_weights)

    def logits_at(self, tokens: torch.Tensor, columns: torch.Tensor, latent: torch.Tensor | None = None) -> torch.Tensor:
        """Next-token logits read at `columns` [B, C] of `tokens` [B, L]: [B, C, V]."""
        length = tokens.shape[1]
        if length > self.config.max_len:
            raise ValueError(f"sequence length {length} exceeds the decoder's max_len {self.config.max_len}")
        if (latent is None) != (self.latent_projection is None):
            raise ValueError(
                f"decoder built with latent_dim={self.config.latent_dim} got latent={'None' if latent is None else 'a tensor'}"
            )
        h = self.token_embedding(tokens) + self.position_embedding.weight[:length]
        if latent is not None:
            h = h + self.latent_projection(latent)[:, None, :]
        for block in self.blocks:
            h = block(h)
        h = torch.gather(h, 1, columns.clamp_max(length - 1)[..., None].expand(-1, -1, h.shape[-1]))
        return self.head(self.ln_final(h))

    def forward(self, batch: SequenceBatch, latent: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for every y position, [B, T, V]; the prediction of y_t is read at the token before it.

        latent [B, latent_dim] or None; to score several latents per example, repeat the batch.
        """
        steps = torch.arange(batch.y.shape[1], device=batch.tokens.device)
        return self.logits_at(batch.tokens, batch.y_start[:, None] - 1 + steps, latent)  # padded columns are clamped

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


@torch.no_grad()
def warm_start(decoder: Decoder, zfree: Decoder, source: str = "the z-free decoder") -> None:
    """Copy a z-free decoder's weights into a latent-conditioned one of the same width, depth and vocabulary.

    The latent projection has no z-free counterpart and keeps its small random initialisation: at zero every
    code would get the same gradient and the codes could never tell themselves apart. Position embeddings are
    copied for the positions both have.
    """
    for name in ("vocab_size", "d_model", "n_layer", "n_head"):
        if getattr(decoder.config, name) != getattr(zfree.config, name):
            raise ValueError(
                f"init_decoder: {source} has {name} {getattr(zfree.config, name)}, the CVAE decoder {getattr(decoder.config, name)}; "
                "they must match for a warm start"
            )
    source_state = zfree.state_dict()
    for name, tensor in decoder.state_dict().items():
        if name.startswith("latent_projection."):
            continue
        if name == "position_embedding.weight":
            rows = min(len(tensor), len(source_state[name]))
            tensor[:rows] = source_state[name][:rows]
        else:
            tensor.copy_(source_state[name])


def token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-token NLL -log p(y_t | ...), [..., T]; padding positions hold junk the mask must drop."""
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), reduction="none").view(targets.shape)


def uniform_nll(vocab_size: int) -> float:
    """log V: the per-token NLL of a model that knows nothing."""
    return math.log(vocab_size)


def decode_latents(decoder: Decoder, batch: SequenceBatch, latents: torch.Tensor, length_groups: int = 1) -> torch.Tensor:
    """Logits of every y position under each of S latents per example: latents [S, B, D] -> [S, B, T, V].

    With length_groups > 1 the examples are decoded in length-sorted groups, each padded only to its own
    longest sequence: a random batch of mixed lengths then costs about what a length-bucketed one does.
    Causal attention makes a position's logits independent of the padding after it, so the result is the
    one-group result up to float rounding; the positions past each example's y hold zeros.
    """
    samples, size = latents.shape[:2]
    if length_groups <= 1:
        logits = decoder(batch.repeat(samples), latents.reshape(samples * size, -1))
        return logits.view(samples, size, *logits.shape[1:])
    steps = batch.y.shape[1]
    pieces, order = [], []
    for rows in batch.length_groups(length_groups):
        group = batch.select(rows)
        logits = decoder(group.repeat(samples), latents[:, rows].reshape(samples * len(rows), -1))
        logits = logits.view(samples, len(rows), *logits.shape[1:])  # [S, g, T_g, V]
        pieces.append(F.pad(logits, (0, 0, 0, steps - logits.shape[2])))
        order.append(rows)
    return torch.cat(pieces, dim=1)[:, torch.argsort(torch.cat(order))]
