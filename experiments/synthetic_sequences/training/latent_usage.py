"""How much the latent is used: I(x;z) with the split as aggregate posterior, codes used or active units.

Discrete: exact over the enumerated codes. Continuous: a Monte Carlo estimate, reported with its standard error
(mutual_information_se), which extraction holds the estimate's range to.
"""

from __future__ import annotations

import math

import numpy as np

from core.disentanglement.information import gaussian_cross_log_density, gaussian_log_density, log_mean_exp

MI_DRAWS = 16  # Monte Carlo draws per example of a continuous I(x;z): its standard error at the take-up threshold (docs/methods.md)


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    return -(p * np.log(np.clip(p, 1e-12, None))).sum(axis=axis)


def discrete_usage(q: np.ndarray) -> dict:
    """Codes used (argmax of >= 1% of examples), perplexity exp H(q_bar), and I(x;z) = H(q_bar) - E H(q), exact over
    the enumerated codes (its Monte Carlo standard error is 0)."""
    q_bar = q.mean(axis=0)
    shares = np.bincount(q.argmax(axis=1), minlength=q.shape[1]) / len(q)
    return {
        "codes_used": int((shares >= 0.01).sum()),
        "code_perplexity": float(np.exp(entropy(q_bar))),
        "mutual_information": float(entropy(q_bar) - entropy(q).mean()),
        "mutual_information_se": 0.0,
        "code_shares": shares.round(4).tolist(),
    }


def continuous_usage(mu: np.ndarray, logvar: np.ndarray, seed: int, draws: int = MI_DRAWS) -> dict:
    """Active units (Cov_x(E_q[z]) diagonal > 0.01) and I(x;z) with the split as aggregate posterior, by Monte Carlo:

        I = (1/N) sum_i KL(q_i || q_bar) >= 0,   q_bar(z) = (1/N) sum_j q(z|x_j),
        estimated by (1/N) sum_i (1/M) sum_m [log q_i(z_im) - log q_bar(z_im)],  z_im ~ q_i, M = `draws`.

    Given the posteriors (fixed numbers of the run), example i's terms depend on its own draws alone, so they are
    independent, and mutual_information_se = sqrt(sum_i Var_m / M) / N, from each example's variance over its draws,
    is the estimate's Monte Carlo standard error. An unused latent (every q_i the same) has I = 0, and its estimate
    falls either side of 0 by about that error.
    """
    if draws < 2:
        raise ValueError(f"draws: {draws}; the standard error needs at least 2 draws per example")
    rng = np.random.default_rng(seed)
    terms = np.empty((draws, len(mu)))  # [M, N]
    for draw in range(draws):
        z = mu + np.exp(0.5 * logvar) * rng.standard_normal(mu.shape)  # [N, D]
        log_aggregate = log_mean_exp(gaussian_cross_log_density(z, mu, logvar), axis=1)  # log q_bar(z_i), [N]
        terms[draw] = gaussian_log_density(z, mu, logvar) - log_aggregate
    return {
        "active_units": int((mu.var(axis=0) > 0.01).sum()),
        "mutual_information": float(terms.mean()),
        "mutual_information_se": float(math.sqrt(terms.var(axis=0, ddof=1).sum() / draws) / len(mu)),
    }
