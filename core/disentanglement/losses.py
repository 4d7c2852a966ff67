"""The reconstruction family under the token-aggregation contract.

Symbols follow the methodology note (docs/methods.md: the aggregation contract). Shapes: B examples, T
token positions (padding included), S posterior samples (or K enumerated codes).
`mask` is a bool [B, T] marking the supervised y-region S_i; n_i = |S_i|.

Batch reduction is always the example mean (1/B) sum_i R_i. `sum` is the
per-example supervised-token sum followed by that example mean; a global token
mean over the batch never appears here.

The reconstruction terms, a in {mean, sum}, R_i^a = E_{z~q(z|x_i,y_i)}[A_a(l_i(z))]:
    raw     E_i[R_i^a]
    dist    E_i[R_i^a] / c_base^a,                 c_base^a = E_{i in val}[A_a(b_i)]
    ex      E_i[R_i^a / (A_a(b_i) + eps_a)]
    tok     E_i E_q[W_a(l_i; pi_i)]                 (pi_i: high-surprisal weights of b_i, alpha)
    tokcc   E_i E_q[W_a(l_i; pi_i) / kappa_i^a] / c_base^a,   kappa_i^a = W_a(b_i; pi_i) / A_a(b_i)
    tokinv  E_i E_q[W_a(l_i; rho_i) / eta_i^a] / c_base^a,    eta_i^a = W_a(b_i; rho_i) / A_a(b_i)
    hybrid  sum_k c_k L_k over configured coefficients (hybrid_term)
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from core.disentanglement.config import (
    AggregationMode,
    check_aggregation_mode,
    check_alpha,
    check_hybrid_coefficients,
)
from core.disentanglement.masking import check_mask, inspectable, supervised_counts, zero_padding
from core.disentanglement.token_weighting import SURPRISAL_FLOOR, power_weights


def aggregate_tokens(values: torch.Tensor, mask: torch.Tensor, mode: AggregationMode) -> torch.Tensor:
    """A_a(v_i): A_mean = (1/n_i) sum_{t in S_i} v_{i,t}, A_sum = sum_{t in S_i} v_{i,t}.

    values [..., B, T] -> [..., B].
    """
    mode = check_aggregation_mode(mode)
    check_mask(mask, values.shape)
    total = zero_padding(values, mask).sum(dim=-1)
    return total / supervised_counts(mask, values.dtype) if mode is AggregationMode.MEAN else total


def weighted_aggregate_tokens(values: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, mode: AggregationMode) -> torch.Tensor:
    """W_a(v_i; pi_i): W_mean = sum_{t in S_i} pi_{i,t} v_{i,t}, W_sum = n_i * W_mean.

    The n_i factor keeps token-weighted terms on the same scale as A_a, so uniform
    weights (alpha = 0) give back A_a exactly. values [..., B, T], weights
    broadcastable to values -> [..., B].
    """
    mode = check_aggregation_mode(mode)
    check_mask(mask, values.shape)
    weighted = zero_padding(values * weights, mask).sum(dim=-1)
    return weighted if mode is AggregationMode.MEAN else supervised_counts(mask, values.dtype) * weighted


def reference_scale(base_nll: torch.Tensor, mask: torch.Tensor, mode: AggregationMode) -> torch.Tensor:
    """c_base^a = E_{i in val}[A_a(b_i)], a 0-d tensor. Call it on validation records only."""
    return aggregate_tokens(base_nll.detach(), mask, mode).mean()


def concentration_factor(base_nll: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, mode: AggregationMode) -> torch.Tensor:
    """kappa_i^a = W_a(b_i; pi_i) / A_a(b_i) (eta_i^a with rho_i), detached, [B].

    The n_i factor appears in numerator and denominator under sum, so the value is
    the same in both modes. b is floored at SURPRISAL_FLOOR, as in the weights, so
    an example whose z-free NLL is exactly 0 on every token gives kappa = 1, not 0/0.
    """
    mode = check_aggregation_mode(mode)
    check_mask(mask, base_nll.shape, "base_nll")
    floored = base_nll.detach().clamp_min(SURPRISAL_FLOOR)
    return weighted_aggregate_tokens(floored, weights, mask, mode) / aggregate_tokens(floored, mask, mode)


def posterior_expectation(per_sample: torch.Tensor, sample_weights: torch.Tensor | None = None) -> torch.Tensor:
    """E_{z ~ q(z|x_i,y_i)}: [S, B] -> [B].

    Without sample_weights, the mean over S reparameterised or Gumbel samples.
    With sample_weights [S, B] (q itself for an exactly enumerated discrete
    posterior, each column summing to 1), the weighted sum; gradients reach q.
    """
    if per_sample.dim() != 2:
        raise ValueError(f"per-sample values must be [S, B], got shape {tuple(per_sample.shape)}")
    if sample_weights is None:
        return per_sample.mean(dim=0)
    if sample_weights.shape != per_sample.shape:
        raise ValueError(f"sample_weights must be [S, B] = {tuple(per_sample.shape)}, got {tuple(sample_weights.shape)}")
    # Non-finite weights pass through: they come from a diverged model, and the loss they make non-finite stops the run
    # with its step named (training.non_finite_loss), as it does inside torch.vmap, where nothing here can branch.
    column_sums = sample_weights.detach().sum(dim=0)
    finite = column_sums[torch.isfinite(column_sums)] if inspectable(column_sums) else None
    if finite is not None and not torch.allclose(finite, torch.ones_like(finite), atol=1e-4):
        low, high = finite.min().item(), finite.max().item()
        raise ValueError(f"sample_weights must sum to 1 over S for every example; got sums in [{low:.6g}, {high:.6g}]")
    return (sample_weights * per_sample).sum(dim=0)


def _checked_term_inputs(
    token_nll: torch.Tensor, base_nll: torch.Tensor, mask: torch.Tensor, c_base, epsilon: float, mode: AggregationMode
) -> torch.Tensor:
    """Refuse ill-shaped inputs, a c_base that is not a finite scalar > 0 and a negative epsilon; c_base as a 0-d tensor."""
    if token_nll.dim() != 3:
        raise ValueError(f"token_nll must be [S, B, T], got shape {tuple(token_nll.shape)}")
    check_mask(mask, token_nll.shape, "token_nll")
    if base_nll.shape != mask.shape:
        raise ValueError(f"base_nll must be the mask's [B, T] = {tuple(mask.shape)}, got shape {tuple(base_nll.shape)}")
    c_base = torch.as_tensor(c_base, dtype=token_nll.dtype, device=token_nll.device).detach()
    if c_base.dim() != 0 or not bool(torch.isfinite(c_base)) or float(c_base) <= 0:
        raise ValueError(f"c_base must be a finite scalar > 0, got {c_base.tolist()!r}")
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0 (in {mode} units), got {epsilon!r}")
    return c_base


def reconstruction_terms(
    token_nll: torch.Tensor,
    base_nll: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: AggregationMode,
    alpha: float,
    c_base: float | torch.Tensor,
    epsilon: float,
    sample_weights: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Every term of the reconstruction family as a scalar batch loss, in the selected mode.

    token_nll  [S, B, T]  l_{i,t}(z) for S posterior samples
    base_nll   [B, T]     frozen z-free b_{i,t}; never receives a gradient
    c_base                c_base^a from reference_scale on validation records, same mode
    epsilon               in the selected mode's units: nats/token under mean, nats/example under sum

    Returns raw, dist, ex, tok, tokcc, tokinv (spec L^a_raw ... L^a_tokinv) and the diagnostics
    base_aggregate_min = min_i A_a(b_i), the smallest ex denominator before epsilon, and the batch's
    smallest and largest kappa_i^a and eta_i^a (kappa_min ... eta_max): 1 at alpha = 0.
    """
    mode = check_aggregation_mode(mode)
    alpha = check_alpha(alpha, "alpha")
    c_base = _checked_term_inputs(token_nll, base_nll, mask, c_base, epsilon, mode)

    b = base_nll.detach().to(token_nll.dtype)
    pi = power_weights(b, mask, alpha)  # [B, T]
    rho = power_weights(b, mask, -alpha)

    base_aggregate = aggregate_tokens(b, mask, mode)  # B_i^a = A_a(b_i)
    kappa = concentration_factor(b, pi, mask, mode)
    eta = concentration_factor(b, rho, mask, mode)

    def expect(per_sample: torch.Tensor) -> torch.Tensor:
        return posterior_expectation(per_sample, sample_weights)

    recon = expect(aggregate_tokens(token_nll, mask, mode))  # R_i^a, [B]
    tok = expect(weighted_aggregate_tokens(token_nll, pi, mask, mode))  # E_q W_a(l_i; pi_i)
    tokinv = expect(weighted_aggregate_tokens(token_nll, rho, mask, mode))

    raw = recon.mean()
    return {
        "raw": raw,
        "dist": raw / c_base,
        "ex": (recon / (base_aggregate + epsilon)).mean(),
        "tok": tok.mean(),
        "tokcc": (tok / kappa).mean() / c_base,
        "tokinv": (tokinv / eta).mean() / c_base,
        "base_aggregate_min": base_aggregate.min(),
        "kappa_min": kappa.min(),
        "kappa_max": kappa.max(),
        "eta_min": eta.min(),
        "eta_max": eta.max(),
    }


def hybrid_term(terms: Mapping[str, torch.Tensor], coefficients: Mapping[str, float]) -> torch.Tensor:
    """A configured weighted sum of named reconstruction terms, e.g. {"tokcc": 0.5, "dist": 0.5}."""
    coefficients = check_hybrid_coefficients(coefficients)
    return sum(weight * terms[name] for name, weight in coefficients.items())
