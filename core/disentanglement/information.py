"""How much the posterior itself says about a label: I(z; s) with z ~ q(z|x,y), normalised by H(s).

Soft, not argmax: the discrete family aggregates q per label; the continuous family estimates it by Monte
Carlo over the aggregate posteriors (the split's examples as mixture components), as I(x;z) is estimated.

    I(z; s) = sum_s p(s) KL(q_s || q_bar),   q_s = mean of q(.|x_i) over the examples of label s,
    strategy_information = I(z; s) / H(s)  in [0, 1]

It is exactly 0 when q is the same for every example, whatever the argmax of that q says (a uniform
posterior carries nothing to the decoder), and 1 when q identifies the label. Undefined (None) for one label.
"""

from __future__ import annotations

import math

import numpy as np


def label_entropy(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(index of each example's label, p(s), H(s) in nats)."""
    _, index = np.unique(labels, return_inverse=True)
    p = np.bincount(index) / len(index)
    return index, p, float(-(p * np.log(p)).sum())


def discrete_information(q: np.ndarray, labels: np.ndarray) -> float | None:
    """I(z; s) / H(s) for a discrete posterior q [N, K] (rows sum to 1)."""
    index, p, entropy = label_entropy(labels)
    if entropy == 0:
        return None
    # the aggregates are offsets from one example's q, so identical posteriors aggregate to that q bit for bit
    offset = q[0]
    centred = q - offset
    q_bar = offset + centred.mean(axis=0)
    info = 0.0
    for s, weight in enumerate(p):
        q_s = offset + centred[index == s].mean(axis=0)
        support = q_s > 0
        info += weight * float((q_s[support] * np.log(q_s[support] / q_bar[support])).sum())
    return min(max(info / entropy, 0.0), 1.0)


def log_mean_exp(values: np.ndarray, axis: int) -> np.ndarray:
    """log mean exp along `axis`, shifted by the maximum: n equal values give that value exactly."""
    top = values.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.exp(values - top).mean(axis=axis))


def gaussian_log_density(z: np.ndarray, mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """log N(z | mu, diag exp(logvar)), summed over the last axis, broadcast over the leading ones."""
    return -0.5 * (((z - mu) ** 2) / np.exp(logvar) + logvar + math.log(2 * math.pi)).sum(-1)


# how gaussian_cross_log_density rounds, recorded in a run's numerics (training/numerics.py): runs before it computed
# the difference of squares with exp(logvar) in the posteriors' float32, whose I(x;z) and strategy information differ
# from these by up to about 3e-8 nats (docs/methods.md; bench/README.md has the measurement)
GAUSSIAN_CROSS_DENSITY = "expanded square"


def gaussian_cross_log_density(z: np.ndarray, mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """cross[i, j] = log N(z_i | mu_j, diag exp(logvar_j)) for z [N, D] and posteriors [M, D]: [N, M].

    The square is expanded, sum_d (z_id - mu_jd)^2 / var_jd = z_i^2 . p_j - 2 z_i . (mu_j p_j) + mu_j^2 . p_j with
    p = 1 / var, so the [N, M] array comes from three [N, D] x [D, M] matrix products and no [N, M, D] one is made.
    It rounds differently from gaussian_log_density's difference of squares: an error about 1e-16 of the expanded
    terms, (|z| + |mu|)^2 / var, against Monte Carlo errors of 1e-3 and more (tests/test_information.py).
    """
    mu, logvar = np.asarray(mu, dtype=np.float64), np.asarray(logvar, dtype=np.float64)  # a model's float32 posteriors
    precision = np.exp(-logvar)  # [M, D]
    quadratic = np.square(z) @ precision.T - 2.0 * (z @ (mu * precision).T) + (np.square(mu) * precision).sum(-1)
    return -0.5 * (quadratic + logvar.sum(-1) + z.shape[-1] * math.log(2 * math.pi))


def continuous_information(mu: np.ndarray, logvar: np.ndarray, labels: np.ndarray, seed: int) -> float | None:
    """I(z; s) / H(s) for diagonal Gaussian posteriors N(mu_i, exp(logvar_i)) [N, D], one draw z_i per example:

        I ~ mean_i [log q_{s_i}(z_i) - log q_bar(z_i)],  q_s(z) = mean_{j in s} q(z|x_j),  q_bar(z) = mean_j q(z|x_j)

    Clipped to [0, 1]: a Monte Carlo estimate near 0 can fall a little below it.
    """
    index, _, entropy = label_entropy(labels)
    if entropy == 0:
        return None
    rng = np.random.default_rng([seed, 4])
    z = mu + np.exp(0.5 * logvar) * rng.standard_normal(mu.shape)  # [N, D]
    cross = gaussian_cross_log_density(z, mu, logvar)  # [N, N]: log q(z_i | x_j)
    log_aggregate = log_mean_exp(cross, axis=1)
    log_own_label = np.empty(len(z))
    for s in np.unique(index):
        rows = index == s
        log_own_label[rows] = log_mean_exp(cross[np.ix_(rows, rows)], axis=1)
    info = float((log_own_label - log_aggregate).mean())
    return min(max(info / entropy, 0.0), 1.0)
