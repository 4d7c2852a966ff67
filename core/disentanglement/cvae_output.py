"""What both CVAEs return for a batch: the inputs of the reconstruction family and the auxiliary terms."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CVAEOutput:
    token_nll: torch.Tensor  # [S, B, T] l_{i,t}(z) for S latents per example (padding holds junk)
    sample_weights: torch.Tensor | None  # [S, B] q(z_s|x_i,y_i) for an enumerated posterior, else None (plain mean over S)
    kl: torch.Tensor  # scalar E_i KL(q(z|x_i,y_i) || p(z|x_i))
    auxiliary: dict[str, torch.Tensor]  # scalar auxiliary terms by name, unweighted
    posterior: torch.Tensor  # [B, K] code probabilities or [B, D] posterior means, detached: for evaluation
    mode_latent: torch.Tensor  # [B, K] one-hot of each example's most probable code or [B, D] posterior means, detached
    posterior_logvar: torch.Tensor | None = None  # [B, D] log-variances of a Gaussian q, detached; None for codes
