"""Take-up over beta, mean against sum: the shift factor k and whether sum changes the curve's shape.

A larger reconstruction scale is, for Adam, very nearly a smaller beta. So if sum acts through its scale alone, its
take-up curve over log beta is mean's shifted: sum at beta takes up as mean does at k x beta. Per (family, term,
alpha), over the main family's mean and sum runs at every beta, three binomial GLMs of the take-up event (one row per
run; reference blocks as fixed effects, s = 1 for sum):

    shift    logit P(took up) = a_block + b (log beta + s log k)        the curves differ by a shift alone
    shape    logit P(took up) = a_block + b log beta + c s + d s log beta   and in slope
    cells    logit P(took up) = a_block + g_(beta, mode)                 any curve at all (the goodness of fit)

k's 95% interval is the profile-likelihood one (the shift model refitted with log k held, within chi2_1(0.95) of the
best); an end not reached within a factor of 1,000 is open. These fits read the blocks that ran; the reading over the
population of blocks is population_curves.py's, with the same reading rules (below). Parallelism: Rao's score test
of shape against shift (1 df; the likelihood ratio rejects too often at these sizes); goodness of fit: the likelihood
ratio of cells against shift (cells - 2 df).

Readings, first that applies to an interval and a parallelism p (docs/methods.md, "Take-up curves over beta"):
    beyond scale        parallelism p < 0.05: sum changes the curve's shape, not only its place
    no shift            k's interval lies inside [1/1.5, 1.5]
    a shift             k's interval excludes 1
    cannot be resolved  anything else; with the runs per beta that would resolve it (the interval narrows as 1/sqrt(n))
A predicted k (raw: 1 / the train split's mean token count) is read against too: as the scale predicts (a bounded
interval holds it, not 1), cannot tell a shift of 1 from the scale's (holds both), a smaller or a larger shift (the
interval on one side), or cannot be resolved (an open interval). statsmodels fits; scipy finds the interval's ends.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.arms import TOOK_UP

MARGIN = 1.5  # "no shift": k's interval inside [1/MARGIN, MARGIN]
NEITHER = "cannot tell a shift of 1 from the scale's"  # an interval that holds both k = 1 and the predicted k
LOG_K_LIMIT = math.log(1000.0)  # the profile is searched this far each way; an end not reached is open


@dataclass(frozen=True)
class Curves:
    """One (family, term, alpha)'s runs as the fits read them: took up (0/1), log beta, sum (0/1), block index."""

    took_up: np.ndarray
    log_beta: np.ndarray
    sums: np.ndarray
    block: np.ndarray

    @classmethod
    def of(cls, runs: pd.DataFrame) -> Curves:
        blocks = {reference: index for index, reference in enumerate(sorted(runs.reference.unique()))}
        return cls(
            runs[TOOK_UP].to_numpy(dtype=float),
            np.log(runs.beta.to_numpy(dtype=float)),
            (runs["mode"] == "sum").to_numpy(dtype=float),
            runs.reference.map(blocks).to_numpy(dtype=int),
        )

    def blocks(self) -> np.ndarray:
        """The block fixed effects, one indicator column per block (no intercept)."""
        return np.eye(int(self.block.max()) + 1)[self.block]


def fit(took_up: np.ndarray, design: np.ndarray):
    """A binomial GLM's fit; separation (a curve from all to none between two betas) is expected, not warned about."""
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfectSeparationWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # exp overflow on the way to a separated fit
        result = sm.GLM(took_up, design, family=sm.families.Binomial()).fit(maxiter=100)
        _ = result.llf, result.fittedvalues  # computed on first use: here, where the warnings are expected
        return result


def shift_loglik(curves: Curves, log_k: float) -> float:
    """The shift model's log likelihood with log k held: the profile at log k."""
    return float(fit(curves.took_up, np.column_stack([curves.blocks(), curves.log_beta + curves.sums * log_k])).llf)


def additive(curves: Curves):
    """a_block + b log beta + c s: the shift model, free (log k = c / b)."""
    return fit(curves.took_up, np.column_stack([curves.blocks(), curves.log_beta, curves.sums]))


def free_log_k(free) -> float:
    """log k = c / b of the free fit (additive); nan where it has no slope (take-up does not change with beta)."""
    slope, offset = float(free.params[-2]), float(free.params[-1])
    return offset / slope if abs(slope) >= 1e-8 else math.nan


def parallelism_p(curves: Curves, free) -> float:
    """Rao's score test of the shape model's extra slope (s log beta) at the free shift model's fit `free`. At a
    pilot's size the likelihood ratio rejects a true shift 8% of the time at 5% (a steep curve separates the shape
    model); the score test, which fits the shift model only, 5.2% (600 simulated pilots, se 0.9%)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _, p = free.score_test(exog_extra=(curves.sums * curves.log_beta)[:, None])[:2]
    return float(np.ravel(p)[0])


def cells_loglik(curves: Curves) -> tuple[float, int]:
    """The cells model's log likelihood and its number of (beta, mode) cells."""
    cells = pd.factorize(pd.Series(list(zip(curves.log_beta, curves.sums, strict=True))))[0]
    indicators = np.eye(int(cells.max()) + 1)[cells]
    return float(fit(curves.took_up, np.column_stack([curves.blocks(), indicators[:, 1:]])).llf), int(cells.max()) + 1


def profile_interval(profile: Callable[[float], float], log_k: float, best: float, level: float = 1 - ALPHA) -> tuple[float, float]:
    """The ends of log k's profile-likelihood interval around `log_k` (log likelihood `best`; `profile(value)`, that
    with log k held); an end the profile does not reach within LOG_K_LIMIT is -inf or inf."""
    from scipy import optimize, stats

    def excess(value: float, cut: float = stats.chi2.ppf(level, 1) / 2) -> float:
        return best - profile(value) - cut

    start = min(max(log_k, -LOG_K_LIMIT), LOG_K_LIMIT)  # a separated fit's estimate may lie beyond the search
    ends = []
    for direction in (-1.0, 1.0):
        inside, step = start, 0.25
        while True:
            outside = min(max(inside + direction * step, -LOG_K_LIMIT), LOG_K_LIMIT)
            if excess(outside) > 0:
                ends.append(optimize.brentq(excess, min(inside, outside), max(inside, outside), xtol=1e-4))
                break
            if direction * outside >= LOG_K_LIMIT:
                ends.append(direction * math.inf)
                break
            inside, step = outside, step * 2
    return ends[0], ends[1]


def reading(log_low: float, log_high: float, parallel_p: float, alpha: float = ALPHA) -> str:
    """The curve's reading (module docstring), from log k's interval and the parallelism p, tested at `alpha`."""
    if parallel_p < alpha:
        return "beyond scale"
    if -math.log(MARGIN) <= log_low and log_high <= math.log(MARGIN):
        return "no shift"
    if log_low > 0 or log_high < 0:
        return "a shift"
    return "cannot be resolved"


def against_prediction(log_low: float, log_high: float, predicted: float) -> str:
    """k's interval against a predicted k, as the module docstring reads it (nearer 1 on one side: a smaller shift)."""
    log_predicted = math.log(predicted)
    if log_low <= log_predicted <= log_high:
        bounded, holds_one = math.isfinite(log_low) and math.isfinite(log_high), log_predicted != 0 and log_low <= 0 <= log_high
        return "cannot be resolved" if not bounded else NEITHER if holds_one else "as the scale predicts"
    # the interval lies between the prediction and 1 (no shift): sum moves the curve less far than the scale would
    between = log_low > log_predicted if log_predicted < 0 else log_predicted > 0 and log_high < log_predicted
    return "a smaller shift than the scale predicts" if between else "a larger shift than the scale predicts"


def runs_to_resolve(log_k: float, log_low: float, log_high: float, runs_per_beta: float) -> float:
    """Runs per (beta, mode) that would resolve an unresolved k, its interval narrowing as 1/sqrt(n): to exclude 1
    at the estimate, or to fit inside the margin, whichever needs fewer; nan for an open interval."""
    if not (math.isfinite(log_low) and math.isfinite(log_high)):
        return math.nan
    needed = max(abs(log_k), math.log(MARGIN) - abs(log_k))
    return math.ceil(runs_per_beta * ((log_high - log_low) / 2 / needed) ** 2)


@dataclass(frozen=True)
class Shift:
    """log k with its profile interval, the curves' slope and the parallelism p of one (family, term, alpha)."""

    log_k: float
    log_low: float
    log_high: float
    slope: float
    loglik: float
    parallel_p: float

    @property
    def reading(self) -> str:
        return reading(self.log_low, self.log_high, self.parallel_p)


def read_shift(curves: Curves) -> Shift:
    """The shift model fitted free, k's profile interval and the parallelism test; with no slope (take-up does not
    change with beta) no shift can be read and the interval is open."""
    free = additive(curves)
    log_k, slope, best = free_log_k(free), float(free.params[-2]), float(free.llf)
    parallel_p = parallelism_p(curves, free)
    if not math.isfinite(log_k):
        return Shift(math.nan, -math.inf, math.inf, slope, best, parallel_p)
    return Shift(log_k, *profile_interval(lambda value: shift_loglik(curves, value), log_k, best), slope, best, parallel_p)
