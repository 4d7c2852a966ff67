"""Detached per-example token weights derived from the frozen z-free token NLL b.

Formula (power weighting, normalised over the supervised tokens S_i of example i):

    pi_{i,t}  = b_{i,t}^alpha      / sum_{s in S_i} b_{i,s}^alpha      (high surprisal)
    rho_{i,t} = b_{i,t}^(-alpha)   / sum_{s in S_i} b_{i,s}^(-alpha)   (low surprisal)

and 0 on padding. alpha = 0 gives the uniform 1/n_i; for alpha > 0, pi is
non-decreasing and rho non-increasing in b. Because the weights are a ratio of
powers, scaling b by a constant c > 0 leaves them unchanged, so the
concentration factors kappa_i = W(b_i; pi_i) / A(b_i) and eta_i are
scale-invariant too. b is floored at SURPRISAL_FLOOR before the power so an
exact-zero NLL gives a finite weight. Computed in log space (a masked softmax)
so large alpha neither overflows nor underflows.
"""

from __future__ import annotations

import torch

from core.disentanglement.config import check_alpha
from core.disentanglement.masking import check_mask, supervised_counts

SURPRISAL_FLOOR = 1e-12


def power_weights(base_nll: torch.Tensor, mask: torch.Tensor, exponent: float) -> torch.Tensor:
    """b_{i,t}^exponent normalised over S_i, detached, [B, T]; unchecked: the caller has checked mask and exponent."""
    log_b = base_nll.detach().clamp_min(SURPRISAL_FLOOR).log()
    logits = (exponent * log_b).masked_fill(~mask, float("-inf"))  # [B, T]
    return torch.softmax(logits, dim=-1)


def _checked_power_weights(base_nll: torch.Tensor, mask: torch.Tensor, exponent: float) -> torch.Tensor:
    check_mask(mask, base_nll.shape, "base_nll")
    supervised_counts(mask)
    return power_weights(base_nll, mask, exponent)


def high_surprisal_weights(base_nll: torch.Tensor, mask: torch.Tensor, alpha: float) -> torch.Tensor:
    """pi_i: weights proportional to b_{i,t}^alpha over S_i; rows sum to 1, detached, [B, T]."""
    return _checked_power_weights(base_nll, mask, check_alpha(alpha))


def low_surprisal_weights(base_nll: torch.Tensor, mask: torch.Tensor, alpha: float) -> torch.Tensor:
    """rho_i: weights proportional to b_{i,t}^(-alpha) over S_i; rows sum to 1, detached, [B, T]."""
    return _checked_power_weights(base_nll, mask, -check_alpha(alpha))
