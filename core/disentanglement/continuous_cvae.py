"""Continuous CVAE: diagonal Gaussian q(z|x,y), reparameterised samples.

The encoder reads <bos> x <sep> y into (mu, log sigma^2); the prior is N(0, I)
(`fixed`) or a learned diagonal Gaussian p(z|x) over <bos> x <sep>; the decoder gets z
added to every input embedding. S samples per example give token_nll [S, B, T].
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn

from core.disentanglement import auxiliary_losses
from core.disentanglement.batching import SequenceBatch
from core.disentanglement.cvae_output import CVAEOutput
from core.disentanglement.decoder import Decoder, DecoderConfig, decode_latents, token_nll
from core.disentanglement.encoder import SequenceEncoder
from core.disentanglement.latent_configs import ContinuousCVAEConfig


class ContinuousCVAE(nn.Module):
    def __init__(self, decoder_config: DecoderConfig, config: ContinuousCVAEConfig):
        super().__init__()
        self.config = config
        self.decoder = Decoder(replace(decoder_config, latent_dim=config.latent_dim))
        self.encoder = SequenceEncoder(decoder_config, 2 * config.latent_dim, config.encoder_layers)
        self.prior_encoder = (
            SequenceEncoder(decoder_config, 2 * config.latent_dim, config.encoder_layers) if config.prior == "learned" else None
        )

    def posterior(self, batch: SequenceBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(mu, logvar) of q(z|x,y), each [B, D]."""
        mu, logvar = self.encoder(batch.tokens, batch.sequence_mask()).chunk(2, dim=-1)
        return mu, logvar.clamp(-10.0, 10.0)

    def prior(self, batch: SequenceBatch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if self.prior_encoder is None:
            return None, None
        mu, logvar = self.prior_encoder(batch.tokens, batch.prompt_mask()).chunk(2, dim=-1)
        return mu, logvar.clamp(-10.0, 10.0)

    def noise(self, size: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
        """The reparameterisation noise of a batch of `size`, N(0, I) draws [S, B, D]; drawn apart from the forward
        pass, so that lockstep seeds each draw their own."""
        return torch.randn((self.config.latent_samples, size, self.config.latent_dim), generator=generator, device=device)

    def forward(self, batch: SequenceBatch, generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> CVAEOutput:
        """`noise` (from `noise()`) replaces draws from `generator` when given."""
        mu, logvar = self.posterior(batch)
        if noise is None:
            noise = self.noise(len(mu), generator, mu.device)
        latents = mu + (0.5 * logvar).exp() * noise  # [S, B, D]
        logits = decode_latents(self.decoder, batch, latents, self.config.length_groups)
        nll = token_nll(logits, batch.y.expand(logits.shape[0], -1, -1))
        return CVAEOutput(
            token_nll=nll,
            sample_weights=None,
            kl=auxiliary_losses.gaussian_kl(mu, logvar, *self.prior(batch)),
            auxiliary={
                "posterior_variance": auxiliary_losses.posterior_variance(logvar),
                "inter_latent_divergence": auxiliary_losses.inter_latent_divergence(logits, batch.mask),
            },
            posterior=mu.detach(),
            mode_latent=mu.detach(),
            posterior_logvar=logvar.detach(),
        )
