"""Take-up over beta with random block effects: the shift factor k over the population of blocks.

The fixed-block shift model (beta_curves.py) reads k for the blocks that ran. Here each block draws its own offset
and its own effect of sum, so that k's interval speaks of the loss over blocks and data draws (s = 1 for sum):

    logit P(took up) = a + u_b + b (log beta + s log k) + s v_b,   u_b ~ N(0, sd_block^2),  v_b ~ N(0, sd_mode^2)

that is lme4's `took_up ~ log_beta + sum + (1 + sum || block)` with log k = (sum's effect) / (log beta's slope). It is
fitted by maximum likelihood with each block's integral over (u_b, v_b) taken by the Laplace approximation, as lme4's
glmer does (nAGQ = 1). statsmodels' BinomialBayesMixedGLM, the library tried first, read the slope's standard error
a third of lme4's (variational Bayes) or every block SD as 0 (its posterior mode): docs/findings.md, 2026-12-06.

sd_mode, the between-block SD of sum's effect on the logit scale, is tested against 0 by the likelihood ratio, whose
null distribution on the boundary is half chi2_0, half chi2_1 (Self and Liang 1987). k's interval and sd_mode's are
profile-likelihood ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves, profile_interval
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA

EFFECT_LIMIT = 100.0  # |a|, |b|, |b log k| are held inside this: a separated curve's slope stops here, not at infinity
SD_LIMIT = 10.0  # a block SD is searched up to this on the logit scale
NEWTON_STEPS = 100


@dataclass(frozen=True)
class PopulationFit:
    """The random-block shift model's maximum-likelihood fit: intercept a, slope b over log beta, sum's effect c = b log k,
    the block SDs and the Laplace log likelihood."""

    intercept: float
    slope: float
    mode_effect: float
    sd_block: float
    sd_mode: float
    loglik: float

    @property
    def log_k(self) -> float:
        """log k = c / b; nan where take-up does not change with beta."""
        return self.mode_effect / self.slope if abs(self.slope) >= 1e-8 else math.nan


def laplace_loglik(fixed: np.ndarray, curves: Curves, sd_block: float, sd_mode: float) -> float:
    """The model's log likelihood at the fixed part `fixed` (a + b log beta + c s, one value per run), each block's
    integral over its (u_b, v_b) by the Laplace approximation: with (u_b, v_b) = (sd_block xi_1, sd_mode xi_2) and
    xi ~ N(0, I), log L_b = max_xi [loglik_b(xi) - |xi|^2 / 2] - log det(H_b) / 2, H_b the negative Hessian there."""
    blocks = int(curves.block.max()) + 1
    y, s, block = curves.took_up, curves.sums, curves.block

    def per_block(values: np.ndarray) -> np.ndarray:
        return np.bincount(block, weights=values, minlength=blocks)

    def penalised(xi: np.ndarray) -> tuple[float, np.ndarray]:
        eta = fixed + sd_block * xi[block, 0] + sd_mode * s * xi[block, 1]
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)) - 0.5 * np.sum(xi**2)), eta

    xi = np.zeros((blocks, 2))
    value, eta = penalised(xi)
    for _ in range(NEWTON_STEPS):
        mu = special.expit(eta)
        weight, residual = mu * (1.0 - mu), y - mu
        gradient = np.column_stack([sd_block * per_block(residual), sd_mode * per_block(s * residual)]) - xi
        h11 = sd_block**2 * per_block(weight) + 1.0
        h12 = sd_block * sd_mode * per_block(s * weight)
        h22 = sd_mode**2 * per_block(s * s * weight) + 1.0
        determinant = h11 * h22 - h12**2
        step = np.column_stack([h22 * gradient[:, 0] - h12 * gradient[:, 1], h11 * gradient[:, 1] - h12 * gradient[:, 0]])
        step /= determinant[:, None]
        for _ in range(30):  # halve a step that overshoots: the penalised log likelihood is concave in xi
            candidate, candidate_eta = penalised(xi + step)
            if candidate >= value - 1e-12:
                break
            step /= 2
        xi, value, eta = xi + step, candidate, candidate_eta
        if np.max(np.abs(step)) < 1e-10:
            break
    mu = special.expit(eta)
    weight = mu * (1.0 - mu)
    h11 = sd_block**2 * per_block(weight) + 1.0
    h12 = sd_block * sd_mode * per_block(s * weight)
    h22 = sd_mode**2 * per_block(s * s * weight) + 1.0
    return value - 0.5 * float(np.sum(np.log(h11 * h22 - h12**2)))


def fit_population(
    curves: Curves, log_k: float | None = None, sd_mode: float | None = None, near: PopulationFit | None = None
) -> PopulationFit:
    """The maximum-likelihood fit, free or with log k held (the shift's profile) or sd_mode held (its profile and its
    test at 0): scipy's L-BFGS-B over (a, b, c unless log k is held, sd_block, sd_mode unless held). A free fit starts
    from 0 with both SDs at 1 and again at 0.1, as the likelihood over the SDs may have two maxima; a profile's fit
    starts once, from the fit `near` it."""
    from scipy import optimize

    free_shift, free_sd = log_k is None, sd_mode is None

    def unpack(x: np.ndarray) -> tuple[float, float, float, float, float]:
        a, b = x[0], x[1]
        c = x[2] if free_shift else b * log_k
        sds = x[3:] if free_shift else x[2:]
        return a, b, c, sds[0], sds[1] if free_sd else sd_mode

    def negative(x: np.ndarray) -> float:
        a, b, c, sd_u, sd_v = unpack(x)
        return -laplace_loglik(a + b * curves.log_beta + c * curves.sums, curves, sd_u, sd_v)

    effects = [(-EFFECT_LIMIT, EFFECT_LIMIT)] * (3 if free_shift else 2)
    bounds = effects + [(0.0, SD_LIMIT)] * (2 if free_sd else 1)
    if near is None:
        starts = [np.r_[np.zeros(len(effects)), np.full(len(bounds) - len(effects), sd)] for sd in (1.0, 0.1)]
    else:
        shift = [near.mode_effect] if free_shift else []
        starts = [np.r_[near.intercept, near.slope, shift, near.sd_block, [near.sd_mode] if free_sd else []]]
    best = None
    for start in starts:
        result = optimize.minimize(negative, np.clip(start, *np.transpose(bounds)), method="L-BFGS-B", bounds=bounds)
        if best is None or result.fun < best.fun:
            best = result
    a, b, c, sd_u, sd_v = unpack(best.x)
    return PopulationFit(float(a), float(b), float(c), float(sd_u), float(sd_v), -float(best.fun))


def log_k_interval(curves: Curves, fit: PopulationFit) -> tuple[float, float]:
    """log k's profile-likelihood interval over the population of blocks (the SDs refitted at each log k held); open
    ends as beta_curves.profile_interval gives them."""
    if not math.isfinite(fit.log_k):
        return -math.inf, math.inf
    return profile_interval(lambda log_k: fit_population(curves, log_k=log_k, near=fit).loglik, fit.log_k, fit.loglik)


def mode_sd_p(curves: Curves, fit: PopulationFit) -> float:
    """The likelihood-ratio p of sd_mode = 0 (every block's sum shifts alike): half chi2_0, half chi2_1 on the boundary."""
    from scipy import stats

    ratio = 2.0 * (fit.loglik - fit_population(curves, sd_mode=0.0, near=fit).loglik)
    return 1.0 if ratio <= 1e-9 else 0.5 * float(stats.chi2.sf(ratio, 1))


def mode_sd_interval(curves: Curves, fit: PopulationFit, level: float = 1 - ALPHA) -> tuple[float, float]:
    """sd_mode's profile-likelihood interval: its lower end 0 where the profile at 0 lies within chi2_1(level) / 2 of
    the best; its upper end inf where the profile does not fall that far by SD_LIMIT."""
    from scipy import optimize, stats

    cut = stats.chi2.ppf(level, 1) / 2

    def excess(sd: float) -> float:
        return fit.loglik - fit_population(curves, sd_mode=sd, near=fit).loglik - cut

    low = 0.0 if excess(0.0) <= 0 else optimize.brentq(excess, 0.0, fit.sd_mode, xtol=1e-4)
    high = math.inf if excess(SD_LIMIT) <= 0 else optimize.brentq(excess, fit.sd_mode, SD_LIMIT, xtol=1e-4)
    return low, high
