"""Take-up over beta with random block effects: the shift factor k over the population of blocks.

The fixed-block shift model (beta_curves.py) reads k for the blocks that ran. Here each block draws its own offset
and its own effect of sum, so that k's interval speaks of the loss over blocks and data draws (s = 1 for sum):

    logit P(took up) = a + u_b + b (log beta + s log k) + s v_b,   u_b ~ N(0, sd_block^2),  v_b ~ N(0, sd_mode^2)

that is lme4's `took_up ~ log_beta + sum + (1 + sum || block)` with log k = (sum's effect) / (log beta's slope). It is
fitted by maximum likelihood with each block's integral over (u_b, v_b) taken by quadrature on a grid
(block_quadrature.py). lme4's glmer takes it by the Laplace approximation (nAGQ = 1), which agrees to about 0.01 where
blocks' curves are gentle and overstates the likelihood by up to 4 log units where each block's runs are a step over
beta, as the curve design's are: there it drove the SDs to their search bound and moved k's interval with that bound
(docs/findings.md, 2026-12-07). statsmodels' BinomialBayesMixedGLM, the library tried first, read the slope's standard
error a third of lme4's (variational Bayes) or every block SD as 0 (its posterior mode): docs/findings.md, 2026-12-06.

sd_mode, the between-block SD of sum's effect on the logit scale, is tested against 0 by the likelihood ratio, whose
null distribution on the boundary is half chi2_0, half chi2_1 (Self and Liang 1987). k's interval and sd_mode's are
profile-likelihood ones. Parallelism is Rao's score test of a mode x log beta slope d (adding d s log beta) at the shift
model's fit, the block SDs held at their estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves, profile_interval
from experiments.synthetic_sequences.analysis.statistics.block_quadrature import marginal_loglik
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA

EFFECT_LIMIT = 100.0  # |a|, |b|, |b log k| are held inside this: a separated curve's slope stops here, not at infinity
SD_LIMIT = 10.0  # a block SD is searched up to this on the logit scale
AT_ZERO = 1e-6  # a fitted SD this near 0 is 0
MOVED_OFF = 0.05  # where a profile's fit starts an SD that its neighbour fitted as 0
TOLERANCES = {"ftol": 1e-13, "gtol": 1e-7, "maxiter": 1000}  # L-BFGS-B stops where lme4 does or nearer the maximum


@dataclass(frozen=True)
class PopulationFit:
    """The random-block shift model's maximum-likelihood fit: intercept a, slope b over log beta, sum's effect c = b log k,
    the block SDs and the log likelihood."""

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


def shift_design(curves: Curves) -> np.ndarray:
    """The free shift model's fixed part, runs x (1, log beta, s): its effects are (a, b, c)."""
    return np.column_stack([np.ones(len(curves.took_up)), curves.log_beta, curves.sums])


def fit_population(
    curves: Curves, log_k: float | None = None, sd_mode: float | None = None, near: PopulationFit | None = None
) -> PopulationFit:
    """The maximum-likelihood fit, free or with log k held (the shift's profile) or sd_mode held (its profile and its
    test at 0): scipy's L-BFGS-B over (a, b, c unless log k is held, sd_block, sd_mode unless held) with the
    likelihood's own gradient. The likelihood is even in each SD, so an SD of 0 is a stationary point: the SDs range
    over [-SD_LIMIT, SD_LIMIT] and are read as their size (bounded at 0, the search stopped there where the maximum lay
    beyond). A free fit starts from 0 with both SDs at 1 and again at 0.1, as the likelihood over the SDs may have two
    maxima; a profile's fit starts from the fit `near` it (an SD of 0 moved to MOVED_OFF) and again from 0 with the SDs
    at 1: where `near` is a step fitted on the effects' bound, the search from it alone can stop on a ridge 150 log
    units below the profile's maximum, at a k that depends on the CPU's float path (bench/look_float_drift.py). Where
    every run took up, or none did, the likelihood has no maximum, only its supremum 1 as the intercept runs off: the
    fit is that limit, a flat curve at EFFECT_LIMIT with no slope and no spread."""
    from scipy import optimize

    if np.ptp(curves.took_up) == 0:
        intercept = EFFECT_LIMIT if curves.took_up[0] else -EFFECT_LIMIT
        held = 0.0 if sd_mode is None else sd_mode
        return PopulationFit(intercept, 0.0, 0.0, 0.0, held, float(-np.sum(np.logaddexp(0.0, -abs(intercept)))))

    free_shift, free_sd = log_k is None, sd_mode is None
    if free_shift:
        design = shift_design(curves)
    else:  # a + b (log beta + s log k)
        design = np.column_stack([np.ones(len(curves.took_up)), curves.log_beta + curves.sums * log_k])
    effects = design.shape[1]

    def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
        sd_v = x[effects + 1] if free_sd else sd_mode
        loglik, gradient = marginal_loglik(design, x[:effects], curves, x[effects], sd_v)
        return -loglik, -(gradient if free_sd else gradient[:-1])

    bounds = [(-EFFECT_LIMIT, EFFECT_LIMIT)] * effects + [(-SD_LIMIT, SD_LIMIT)] * (2 if free_sd else 1)
    if near is None:
        starts = [np.r_[np.zeros(effects), np.full(len(bounds) - effects, sd)] for sd in (1.0, 0.1)]
    else:
        shift = [near.mode_effect] if free_shift else []
        sds = [max(near.sd_block, MOVED_OFF), *([max(near.sd_mode, MOVED_OFF)] if free_sd else [])]
        cold = np.r_[np.zeros(effects), np.ones(len(bounds) - effects)]
        starts = [np.r_[near.intercept, near.slope, shift, sds], cold]
    best = None
    for start in starts:
        result = optimize.minimize(
            negative, np.clip(start, *np.transpose(bounds)), jac=True, method="L-BFGS-B", bounds=bounds, options=TOLERANCES
        )
        if best is None or result.fun < best.fun:
            best = result
    a, b = best.x[:2]
    c = best.x[2] if free_shift else b * log_k
    sd_v = size(best.x[effects + 1]) if free_sd else sd_mode
    return PopulationFit(float(a), float(b), float(c), size(best.x[effects]), sd_v, -float(best.fun))


def at_search_bound(sd: float) -> bool:
    """Whether a fitted SD stopped at SD_LIMIT: there each block's runs are a step over beta, the likelihood nearly flat
    along the ridge where the slope and the SDs grow together, and the runs identify only the SD's ratio to the slope."""
    return sd >= SD_LIMIT * (1 - 1e-6)


def size(sd: float) -> float:
    """A fitted SD as its size, 0 within AT_ZERO of it: the search stops within its tolerance of a maximum at 0."""
    return 0.0 if abs(sd) < AT_ZERO else abs(float(sd))


def log_k_interval(curves: Curves, fit: PopulationFit, factor: float = 1.0, level: float = 1 - ALPHA) -> tuple[float, float]:
    """log k's profile-likelihood interval at `level` over the population of blocks (the SDs refitted at each log k
    held), the likelihood ratio divided by `factor` (bartlett_factor); open ends as beta_curves.profile_interval gives
    them."""
    if not math.isfinite(fit.log_k):
        return -math.inf, math.inf
    best = fit.loglik / factor
    return profile_interval(lambda log_k: fit_population(curves, log_k=log_k, near=fit).loglik / factor, fit.log_k, best, level)


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


def parallelism_p(curves: Curves, fit: PopulationFit, step: float = 1e-5) -> float:
    """Rao's score test of d in a + u_b + b log beta + c s + d s log beta + s v_b at the shift model's fit (d = 0), the
    block SDs held at the fit's: U = dlogL/dd there, T = U^2 [I^-1]_dd with I the observed information over a, b, c, d
    (central differences of the likelihood's own gradient), against chi2_1; nan where the fit lies on the effects'
    bound EFFECT_LIMIT (each block's runs a step: the score of a bounded effect is not 0 there, so the test does not
    apply, and its p moved from 0.63 to 0.44 with the CPU's float path) or I is not positive definite. Holding the
    SDs keeps the test at its level where the information over them too lets it reject a true shift 6.5-7.2% of the
    time at 5% (bench/population_coverage.py, docs/findings.md)."""
    from scipy import stats

    at = np.array([fit.intercept, fit.slope, fit.mode_effect, 0.0])
    if np.any(np.abs(at) >= EFFECT_LIMIT * (1 - 1e-9)):
        return math.nan
    design = np.column_stack([shift_design(curves), curves.sums * curves.log_beta])

    def gradient(effects: np.ndarray) -> np.ndarray:
        return marginal_loglik(design, effects, curves, fit.sd_block, fit.sd_mode)[1][:4]

    information = np.empty((4, 4))
    for column in range(4):
        nudge = np.zeros(4)
        nudge[column] = step
        information[:, column] = (gradient(at - nudge) - gradient(at + nudge)) / (2 * step)
    information = (information + information.T) / 2
    if np.any(np.linalg.eigvalsh(information) <= 0):
        return math.nan
    statistic = gradient(at)[3] ** 2 * np.linalg.inv(information)[3, 3]
    return float(stats.chi2.sf(statistic, 1))


def block_curve(fit: PopulationFit, log_beta: np.ndarray, is_sum: float, quantile: float = 0.5) -> np.ndarray:
    """Take-up over log beta of the block at `quantile` of the population (0.5: the typical block, u = v = 0, on whose
    curve sum's is mean's at k x beta): expit(a + b log beta + c s + z_q sqrt(sd_block^2 + s sd_mode^2)), the logit
    being monotone in a block's combined effect."""
    from scipy import stats

    spread = math.sqrt(fit.sd_block**2 + is_sum * fit.sd_mode**2)
    return special.expit(fit.intercept + fit.slope * log_beta + fit.mode_effect * is_sum + stats.norm.ppf(quantile) * spread)


def simulate_runs(curves: Curves, fit: PopulationFit, rng: np.random.Generator) -> Curves:
    """The same runs (blocks, betas, modes) with take-up drawn from the fitted model: new block effects, new outcomes."""
    blocks = int(curves.block.max()) + 1
    u, v = rng.normal(0.0, fit.sd_block, blocks), rng.normal(0.0, fit.sd_mode, blocks)
    eta = fit.intercept + fit.slope * curves.log_beta + fit.mode_effect * curves.sums + u[curves.block] + curves.sums * v[curves.block]
    return Curves((rng.random(len(eta)) < special.expit(eta)).astype(float), curves.log_beta, curves.sums, curves.block)


def bartlett_factor(curves: Curves, fit: PopulationFit, draws: int, seed: int = 0) -> float:
    """The mean likelihood ratio of log k held at its value against free, over `draws` datasets simulated from the fit:
    chi2_1's mean is 1, so dividing the ratio by this factor (a Bartlett correction by parametric bootstrap, as
    R's pbkrtest::PBmodcomp does for mixed models) calibrates it where few blocks leave chi2_1 too narrow."""
    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(draws):
        simulated = simulate_runs(curves, fit, rng)
        free = fit_population(simulated, near=fit)
        held = fit_population(simulated, log_k=fit.log_k, near=fit)
        ratios.append(max(2.0 * (free.loglik - held.loglik), 0.0))
    return float(np.mean(ratios))
