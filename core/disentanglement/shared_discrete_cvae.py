"""Shared discrete CVAE: K codes shared across tasks.

A router q(z|x,y) (categorical over K codes) reads <bos> x <sep> y; the prior
p(z|x) is uniform (`fixed`) or a learned router over <bos> x <sep>; the decoder p(y|x,z)
gets the code as a one-hot latent. The expectation over q either enumerates
all K codes exactly (token_nll [K, B, T] with sample_weights = q^T) or draws S
straight-through Gumbel-softmax samples (sample_weights None).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.disentanglement import auxiliary_losses
from core.disentanglement.batching import SequenceBatch
from core.disentanglement.cvae_output import CVAEOutput
from core.disentanglement.decoder import Decoder, DecoderConfig, decode_latents, token_nll
from core.disentanglement.encoder import SequenceEncoder
from core.disentanglement.latent_configs import DiscreteCVAEConfig


class SharedDiscreteCVAE(nn.Module):
    def __init__(self, decoder_config: DecoderConfig, config: DiscreteCVAEConfig):
        super().__init__()
        self.config = config
        self.decoder = Decoder(replace(decoder_config, latent_dim=config.num_codes))
        self.router = SequenceEncoder(decoder_config, config.num_codes, config.encoder_layers)
        self.prior_router = SequenceEncoder(decoder_config, config.num_codes, config.encoder_layers) if config.prior == "learned" else None

    def posterior_logits(self, batch: SequenceBatch) -> torch.Tensor:
        """q(z|x,y) as logits [B, K]."""
        return self.router(batch.tokens, batch.sequence_mask())

    def prior_logits(self, batch: SequenceBatch) -> torch.Tensor | None:
        """p(z|x) as logits [B, K], or None for the uniform prior."""
        return None if self.prior_router is None else self.prior_router(batch.tokens, batch.prompt_mask())

    def codes(self, index: torch.Tensor) -> torch.Tensor:
        """One-hot latents for code indices, [...] -> [..., K]."""
        return F.one_hot(index, self.config.num_codes).float()

    def noise(self, size: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor | None:
        """The sampling noise of a batch of `size`: Gumbel(0, 1) draws [S, B, K] for the gumbel estimator, None when
        the K codes are enumerated. Drawn apart from the forward pass, so that lockstep seeds each draw their own."""
        if self.config.estimator == "enumerate":
            return None
        shape = (self.config.gumbel_samples, size, self.config.num_codes)
        return -torch.empty(shape, device=device).exponential_(generator=generator).log()

    def forward(self, batch: SequenceBatch, generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> CVAEOutput:
        """`noise` (from `noise()`) replaces draws from `generator` when given."""
        q_logits = self.posterior_logits(batch)  # [B, K]
        size, num_codes = q_logits.shape
        if self.config.estimator == "enumerate":
            latents = self.codes(torch.arange(num_codes, device=q_logits.device))[:, None, :].expand(num_codes, size, num_codes)
            sample_weights = F.softmax(q_logits, dim=-1).T  # [K, B]
        else:
            gumbels = self.noise(size, generator, q_logits.device) if noise is None else noise
            soft = F.softmax((q_logits + gumbels) / self.config.gumbel_temperature, dim=-1)
            latents = self.codes(soft.argmax(dim=-1)) - soft.detach() + soft  # straight-through, [S, B, K]
            sample_weights = None
        logits = decode_latents(self.decoder, batch, latents, self.config.length_groups)  # [S, B, T, V]
        nll = token_nll(logits, batch.y.expand(logits.shape[0], -1, -1))
        return CVAEOutput(
            token_nll=nll,
            sample_weights=sample_weights,
            kl=auxiliary_losses.categorical_kl(q_logits, self.prior_logits(batch)),
            auxiliary={
                "posterior_entropy": auxiliary_losses.posterior_entropy(q_logits),
                "router_support": auxiliary_losses.router_support(q_logits),
                "router_marginal_kl": auxiliary_losses.router_marginal_kl(q_logits),
                "inter_latent_divergence": auxiliary_losses.inter_latent_divergence(logits, batch.mask),
            },
            posterior=F.softmax(q_logits, dim=-1).detach(),
            mode_latent=self.codes(q_logits.detach().argmax(dim=-1)),
        )
