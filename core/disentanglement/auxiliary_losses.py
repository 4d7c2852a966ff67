"""Auxiliary CVAE terms. None of them takes an aggregation mode: the spec keeps
them unchanged when the reconstruction mode flips. Each returns a scalar batch
mean (example mean), so its scale does not depend on sequence length.

Shapes: B examples, K discrete codes, D latent dims, S samples, T tokens, V vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from core.disentanglement.config import AggregationMode
from core.disentanglement.losses import aggregate_tokens


def categorical_kl(q_logits: torch.Tensor, prior_logits: torch.Tensor | None = None) -> torch.Tensor:
    """E_i KL(q(z|x_i,y_i) || p(z|x_i)); a uniform prior when prior_logits is None. q_logits [B, K]."""
    log_q = F.log_softmax(q_logits, dim=-1)
    if prior_logits is None:
        log_p = torch.full_like(log_q, -math.log(q_logits.shape[-1]))
    else:
        log_p = F.log_softmax(prior_logits, dim=-1)
    return (log_q.exp() * (log_q - log_p)).sum(dim=-1).mean()


def posterior_entropy(q_logits: torch.Tensor) -> torch.Tensor:
    """E_i H(q(z|x_i,y_i)), in nats. q_logits [B, K]."""
    log_q = F.log_softmax(q_logits, dim=-1)
    return -(log_q.exp() * log_q).sum(dim=-1).mean()


def batch_marginal(q_logits: torch.Tensor) -> torch.Tensor:
    """q_bar(z) = (1/B) sum_i q(z|x_i,y_i), [K]."""
    return F.softmax(q_logits, dim=-1).mean(dim=0)


def router_marginal_kl(q_logits: torch.Tensor) -> torch.Tensor:
    """KL(q_bar || uniform) = sum_k q_bar_k log(K q_bar_k); 0 when the batch uses every code equally."""
    q_bar = batch_marginal(q_logits)
    return torch.special.xlogy(q_bar, q_bar * q_bar.numel()).sum()


def router_support(q_logits: torch.Tensor, min_share: float | None = None) -> torch.Tensor:
    """sum_k max(0, min_share - q_bar_k): how far codes fall below a floor of batch mass.

    0 when every code carries at least min_share (default 1 / (2K)) of the batch's
    posterior mass, so it penalises dead codes without pushing toward exact balance
    the way router_marginal_kl does.
    """
    num_codes = q_logits.shape[-1]
    floor = 0.5 / num_codes if min_share is None else min_share
    if not 0 <= floor <= 1 / num_codes:
        raise ValueError(f"min_share must be in [0, 1/K] = [0, {1 / num_codes:.4g}], got {floor!r}")
    return F.relu(floor - batch_marginal(q_logits)).sum()


def gaussian_kl(
    mu: torch.Tensor,
    logvar: torch.Tensor,
    prior_mu: torch.Tensor | None = None,
    prior_logvar: torch.Tensor | None = None,
) -> torch.Tensor:
    """E_i KL(N(mu_i, diag exp(logvar_i)) || prior), summed over D; prior N(0, I) when not given. [B, D]."""
    if prior_mu is None:
        prior_mu = torch.zeros_like(mu)
    if prior_logvar is None:
        prior_logvar = torch.zeros_like(logvar)
    kl = 0.5 * (prior_logvar - logvar + (logvar.exp() + (mu - prior_mu) ** 2) / prior_logvar.exp() - 1.0)
    return kl.sum(dim=-1).mean()


def posterior_variance(logvar: torch.Tensor) -> torch.Tensor:
    """E_i mean_d sigma^2_{i,d}: the average posterior variance. logvar [B, D]."""
    return logvar.exp().mean()


def inter_latent_divergence(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """How differently the decoder predicts under different latents, in nats.

    Per supervised token, the generalised Jensen-Shannon divergence across the S
    latents, H(mean_s p_s) - mean_s H(p_s); then the token mean within each
    example and the example mean. The token mean here is fixed (not the
    reconstruction mode), so this term does not change when the mode flips.
    logits [S, B, T, V]; 0 when every latent gives the same prediction.
    """
    log_p = F.log_softmax(logits, dim=-1)
    entropy_each = -(log_p.exp() * log_p).sum(dim=-1).mean(dim=0)  # [B, T]
    log_mix = torch.logsumexp(log_p, dim=0) - math.log(logits.shape[0])
    entropy_mix = -(log_mix.exp() * log_mix).sum(dim=-1)  # [B, T]
    per_token = entropy_mix - entropy_each
    return aggregate_tokens(per_token, mask, AggregationMode.MEAN).mean()
