"""The random-block shift model's log likelihood, each block's integral over its effects taken by quadrature on a grid.

A block's runs share an offset u ~ N(0, sd_block^2) and, for its sum runs, an effect v ~ N(0, sd_mode^2) of sum:

    L_b = E[ prod_{mean runs} p_i(u) prod_{sum runs} p_j(u + v) ],   p_i(t) = P(y_i | eta = fixed_i + t)

On a grid of spacing h in logit units, with u's and v's normal weights normalised on it (K_u, K_v), the mean runs'
product M(u_k) and the sum runs' S(w_n) at w = u + v:

    L_b = sum_k K_u(k) M(u_k) sum_m K_v(m) S(u_k + v_m) = sum_n A(n) S(w_n),   A = (K_u M) * K_v (a convolution)

so a block costs two products over the grid and one FFT convolution whatever the SDs. The grid's spacing h is 0.05 logit
units, or a quarter of the smaller SD where that is finer (down to 0.0125); a normal reaches 8 SDs out. An SD under h
is three points, at 0 and +-h, weighted to the SD's variance, so that the likelihood stays smooth down to an SD of 0.

The Laplace approximation (lme4's glmer, nAGQ = 1) is exact for a Gaussian integrand; where a block's runs are a step
over beta, its integrand is a box, and the approximation overstates the likelihood by more the steeper the fitted
curve: docs/findings.md, 2026-12-07.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal, special

from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves

SPACING = 0.05  # the grid's spacing in logit units: the runs' probabilities turn over about 1 unit
FINEST = 0.0125  # the finest spacing, where an SD is small
REACH = 8.0  # each normal is cut this many SDs out


def spacing(sd_block: float, sd_mode: float) -> float:
    """The grid's spacing h: fine enough to resolve both normals (a quarter of the smaller SD) and the runs' turn."""
    return max(min([SPACING, *(sd / 4 for sd in (sd_block, sd_mode) if sd > 0)]), FINEST)


def normal_weights(sd: float, h: float) -> tuple[np.ndarray, np.ndarray]:
    """N(0, sd^2) on the grid m h, m = -K..K (K = ceil(REACH sd / h)), normalised to sum 1; with d(weights)/d(sd).
    Under h, the three points -h, 0, h weighted (w, 1 - 2w, w) with w = sd^2 / 2h^2: the normal's mean and variance,
    its higher moments off by terms of order h^4 (the grid's own error at sd = h is of order exp(-2 pi^2))."""
    if sd == 0:
        return np.ones(1), np.zeros(1)
    if sd <= h:
        side = sd**2 / (2 * h**2)
        return np.array([side, 1 - 2 * side, side]), np.array([1.0, -2.0, 1.0]) * sd / h**2
    half = math.ceil(REACH * sd / h)
    squares = (np.arange(-half, half + 1) * h) ** 2
    weights = np.exp(-0.5 * squares / sd**2)
    weights /= weights.sum()
    return weights, weights * (squares - weights @ squares) / sd**3


def marginal_loglik(design: np.ndarray, effects: np.ndarray, curves: Curves, sd_block: float, sd_mode: float) -> tuple[float, np.ndarray]:
    """The model's log likelihood, sum_b log L_b, with the fixed part design @ effects (runs x effects), and its
    gradient in (effects, sd_block, sd_mode). The likelihood is even in each SD; its derivative carries the SD's sign.

    Each run's score is y_i less its p_i averaged over its offset's posterior on the grid: u's for a mean run
    (K_u M C / L_b, with C = S * K_v), w's for a sum run (A S / L_b). An SD's derivative is that of its normalised
    weights: d log L_b / d sd_block = E_post[(u^2 - E_K[u^2]) / sd_block^3], and for sd_mode the convolution of K_u M
    with d K_v / d sd_mode read against S."""
    signs = (math.copysign(1.0, sd_block), math.copysign(1.0, sd_mode))
    sd_block, sd_mode = abs(sd_block), abs(sd_mode)
    h = spacing(sd_block, sd_mode)
    k_u, dk_u = normal_weights(sd_block, h)
    k_v, dk_v = normal_weights(sd_mode, h)
    reach_u, reach_v = len(k_u) // 2, len(k_v) // 2
    offsets = np.arange(-reach_u, reach_u + 1) * h  # u: a block's offset
    sum_offsets = np.arange(-(reach_u + reach_v), reach_u + reach_v + 1) * h  # w = u + v: its sum runs' offset
    y, is_sum, block = curves.took_up, curves.sums.astype(bool), curves.block
    blocks = int(block.max()) + 1
    fixed = design @ effects

    def side(rows: np.ndarray, grid: np.ndarray):
        """The runs `rows` (a mode's): each block's log likelihood over the grid (blocks x grid), and a function of a
        posterior over the grid (blocks x grid) giving each run's y - E[p]. Runs of one (beta, mode) share their
        fixed part: the grid is evaluated once per distinct one."""
        if len(rows) == 0:
            return np.zeros((blocks, len(grid))), lambda posterior: np.zeros(0)
        distinct, which = np.unique(fixed[rows], return_inverse=True)
        eta = distinct[:, None] + grid[None, :]  # distinct x grid
        took, ran = np.zeros((blocks, len(distinct))), np.zeros((blocks, len(distinct)))
        np.add.at(took, (block[rows], which), y[rows])
        np.add.at(ran, (block[rows], which), 1.0)
        log_lik = took @ -np.logaddexp(0.0, -eta) + (ran - took) @ -np.logaddexp(0.0, eta)
        p = special.expit(eta)
        return log_lik, lambda posterior: y[rows] - (posterior @ p.T)[block[rows], which]

    mean_rows, sum_rows = np.flatnonzero(~is_sum), np.flatnonzero(is_sum)
    log_m, residual_mean = side(mean_rows, offsets)
    log_s, residual_sum = side(sum_rows, sum_offsets)
    log_weighted = np.log(k_u) + log_m  # blocks x U: log K_u M
    top_m, top_s = log_weighted.max(axis=1), log_s.max(axis=1)
    weighted, s = np.exp(log_weighted - top_m[:, None]), np.exp(log_s - top_s[:, None])
    # FFT round-off can leave a hair under 0 where the products are negligible
    a = np.maximum(signal.fftconvolve(weighted, k_v[None, :], mode="full", axes=1), 0.0)  # blocks x W
    c = np.maximum(signal.fftconvolve(s, k_v[None, :], mode="valid", axes=1), 0.0)  # blocks x U
    scaled = np.maximum(np.sum(a * s, axis=1), np.finfo(float).tiny)  # L_b / exp(top_m + top_s)
    value = float(np.sum(np.log(scaled) + top_m + top_s))

    posterior_u, posterior_w = weighted * c / scaled[:, None], a * s / scaled[:, None]
    score = np.zeros(len(y))
    score[mean_rows], score[sum_rows] = residual_mean(posterior_u), residual_sum(posterior_w)
    d_sd_block = float(np.sum(posterior_u @ (dk_u / k_u)))
    moved = signal.fftconvolve(weighted, dk_v[None, :], mode="full", axes=1) if len(k_v) > 1 else np.zeros_like(a)
    d_sd_mode = float(np.sum(np.sum(moved * s, axis=1) / scaled))
    return value, np.r_[score @ design, signs[0] * d_sd_block, signs[1] * d_sd_mode]
