"""The statistics behind the contrasts: intervals, exact tests, multiplicity and the seeds a contrast needs.

Every test is scipy's or statsmodels'; this module only fixes the choices and the edge cases:
  take-up (k of n runs)    Clopper-Pearson per arm; difference of proportions with Newcombe's interval and
                           Boschloo's exact p; runs needed from the power of the test the verdict runs at the observed
                           rates (at alpha / the planned contrasts, the level Holm holds the smallest p to)
  onset (censored steps)   Kaplan-Meier per arm (median and its interval where reached), log-rank p (stratified
                           by reference block where there are several)
  continuous, by seed      paired t interval; exact paired sign-flip p (all 2^n sign patterns up to n = 16,
                           Monte Carlo beyond) for the endpoints, the paired t p for the secondary readings; TOST
                           equivalence p within +-margin
scipy and statsmodels are imported inside the functions that use them: a look's job (sequential/look_files.py) imports
this module, and scipy.stats alone would add half a second to it.
"""

from __future__ import annotations

import logging
import math
import warnings
from functools import cache

import numpy as np

from experiments.synthetic_sequences.analysis.statistics.multiplicity import rejects

ALPHA = 0.05
POWER = 0.8
EXACT_SIGN_FLIPS = 16  # up to 2^16 patterns enumerated; beyond, SIGN_FLIP_DRAWS random ones
SIGN_FLIP_DRAWS = 4_999  # a Monte Carlo p resolves to 1 / (draws + 1) = 2e-4; its error near 0.05 is 0.003
MAX_SEEDS = 100  # seeds-needed searches stop here ("more than 100")
NAN = math.nan


# --- take-up: proportions -------------------------------------------------------------------------------------------


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return NAN, NAN
    low, high = proportion_confint(k, n, alpha=1 - level, method="beta")
    return float(low), float(high)


def newcombe(k_a: int, n_a: int, k_b: int, n_b: int, level: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p_a - p_b."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    if n_a == 0 or n_b == 0:
        return NAN, NAN
    low, high = confint_proportions_2indep(k_a, n_a, k_b, n_b, method="newcomb", compare="diff", alpha=1 - level)
    return float(low), float(high)


def boschloo_p(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Boschloo's exact two-sided p for p_a = p_b; 1 when both arms are all events or all non-events."""
    from scipy import stats

    if n_a == 0 or n_b == 0:
        return NAN
    if k_a + k_b in (0, n_a + n_b):
        return 1.0
    # boschloo_exact's optimiser logs through the root logger, which with no handler would install one on stderr
    # (logging.basicConfig) that prefixes every later line of the process, snakemake's included
    logging.getLogger().addHandler(quiet := logging.NullHandler())
    try:
        return float(stats.boschloo_exact([[k_a, k_b], [n_a - k_a, n_b - k_b]], alternative="two-sided").pvalue)
    finally:
        logging.getLogger().removeHandler(quiet)


def smallest_boschloo_p(n_a: int, n_b: int) -> float:
    """The smallest p any outcome can give at these arm sizes: every run of one arm takes up, none of the other."""
    return boschloo_p(n_a, n_a, 0, n_b)


@cache
def boschloo_rejections(n: int, alpha: float = ALPHA) -> frozenset[tuple[int, int]]:
    """The tables (k_a, k_b) of n runs per arm that Boschloo's test rejects at `alpha`.

    For each k_b the rejected k_a > k_b form an upper run (a larger k_a only makes the table more extreme) whose first
    k_a does not fall as k_b rises, so one walk up k_a finds every run's start; once no k_a is rejected, none is for a
    larger k_b. The test's symmetry gives the k_a < k_b half. (The walk's region is that of testing every table and
    of a bisection over k_a for each k_b where they were compared: docs/findings.md, 2026-12-06.)
    """
    rejected, first = set(), 1
    for k_b in range(n):
        first = max(first, k_b + 1)
        while first <= n and not rejects(boschloo_p(first, n, k_b, n), alpha):
            first += 1
        if first > n:
            break
        rejected.update((k_a, k_b) for k_a in range(first, n + 1))
    return frozenset(rejected | {(k_b, k_a) for k_a, k_b in rejected})


def boschloo_power(n: int, p_a: float, p_b: float, alpha: float = ALPHA) -> float:
    from scipy import stats

    k = np.arange(n + 1)
    mass_a, mass_b = stats.binom.pmf(k, n, p_a), stats.binom.pmf(k, n, p_b)
    return float(sum(mass_a[k_a] * mass_b[k_b] for k_a, k_b in boschloo_rejections(n, alpha)))


def newcombe_fits(n: int, p_a: float, p_b: float, margin: float) -> bool:
    low, high = newcombe(round(p_a * n), n, round(p_b * n), n)
    return -margin <= low and high <= margin


def takeup_seeds_needed(p_a: float, p_b: float, margin: float, alpha: float = ALPHA, blocks: int = 1) -> float:
    """Runs per arm for the observed take-up rates to resolve, in whole blocks (`blocks` x seeds per block), sized by
    the test the verdict runs: when the rates differ by at least `margin`, 80% power at `alpha` of Boschloo's test
    (one block) or of the exact test stratified by block (several, simulated: stratified.exact_stratified_power);
    else a Newcombe interval inside +-margin. inf past MAX_SEEDS."""
    if not (math.isfinite(p_a) and math.isfinite(p_b)):
        return NAN
    sizes = range(blocks, MAX_SEEDS + 1, blocks) if blocks > 1 else range(2, MAX_SEEDS + 1)
    if abs(p_a - p_b) < margin:
        return next((float(n) for n in sizes if newcombe_fits(n, p_a, p_b, margin)), math.inf)
    if blocks > 1:
        from experiments.synthetic_sequences.analysis.statistics.stratified import exact_stratified_power

        powerful = (n for n in sizes if exact_stratified_power(blocks, n // blocks, p_a, p_b, alpha) >= POWER)
        return float(next(powerful, math.inf))
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    with warnings.catch_warnings():  # the normal approximation's solver fails to converge for very large effects
        warnings.simplefilter("ignore")
        guess = NormalIndPower().solve_power(effect_size=abs(proportion_effectsize(p_a, p_b)), alpha=alpha, power=POWER)
    n = int(min(max(math.ceil(guess), 2), MAX_SEEDS)) if np.isfinite(guess) else 2
    while n > 2 and boschloo_power(n - 1, p_a, p_b, alpha) >= POWER:  # the normal guess is a start, the exact power decides
        n -= 1
    while n <= MAX_SEEDS and boschloo_power(n, p_a, p_b, alpha) < POWER:
        n += 1
    return float(n) if n <= MAX_SEEDS else math.inf


# --- onset: censored times ------------------------------------------------------------------------------------------


def kaplan_meier(times: np.ndarray, observed: np.ndarray) -> dict:
    """The Kaplan-Meier estimate of 'not yet taken up' over steps: its steps and survival, the median onset and its
    95% interval (nan where the curve never reaches 0.5 or the bound is not reached)."""
    from statsmodels.duration.survfunc import SurvfuncRight

    times, observed = np.asarray(times, dtype=float), np.asarray(observed, dtype=int)
    if not observed.any():
        return {"steps": np.array([]), "survival": np.array([]), "median": NAN, "median_low": NAN, "median_high": NAN}
    fit = SurvfuncRight(times, observed)
    with warnings.catch_warnings():  # the interval's log-log transform meets log(0) where the curve reaches 0 or 1
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = fit.quantile_ci(0.5)
    median = fit.quantile(0.5)

    def finite(value) -> float:
        return float(value) if value is not None and np.isfinite(value) else NAN

    return {
        "steps": np.asarray(fit.surv_times, dtype=float),
        "survival": np.asarray(fit.surv_prob, dtype=float),
        "median": finite(median),
        "median_low": finite(low),
        "median_high": finite(high),
    }


def logrank_p(times_a, observed_a, times_b, observed_b, strata_a=None, strata_b=None) -> float:
    """The log-rank p for equal onset curves, stratified by block where each run's block is given (strata_a,
    strata_b) and there are two or more; nan when neither arm has an onset (nothing to compare)."""
    from statsmodels.duration.survfunc import survdiff

    observed = np.concatenate([observed_a, observed_b]).astype(int)
    if not observed.any():
        return NAN
    times = np.concatenate([times_a, times_b]).astype(float)
    groups = np.repeat([0, 1], [len(times_a), len(times_b)])
    strata = None if strata_a is None else np.concatenate([strata_a, strata_b])
    try:
        return float(survdiff(times, observed, groups, strata=strata if strata is not None and len(set(strata)) > 1 else None)[1])
    except np.linalg.LinAlgError:
        # zero variance: at every onset step every run still at risk took up, so each arm's observed count equals
        # its expected count and the curves agree
        return 1.0


# --- continuous metrics, paired by seed -----------------------------------------------------------------------------


def t_interval(differences: np.ndarray, level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, sd, low, high) of paired differences; the interval is mean +- t(1 - (1-level)/2, n-1) sd / sqrt(n), nan for n < 2."""
    from scipy import stats

    n = len(differences)
    if n == 0:
        return NAN, NAN, NAN, NAN
    mean = float(np.mean(differences))
    if n < 2:
        return mean, NAN, NAN, NAN
    sd = float(np.std(differences, ddof=1))
    half = float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def sign_flip_p(differences: np.ndarray, seed: int = 0) -> tuple[float, int]:
    """(two-sided p, the sign patterns drawn: 0 when all 2^n were enumerated) of the paired sign-flip test of mean 0."""
    from scipy import stats

    n = len(differences)
    if n == 0:
        return NAN, 0
    if n == 1 or not np.any(differences):  # one pair: its two sign patterns have the same |mean|
        return 1.0, 0
    exact = n <= EXACT_SIGN_FLIPS
    result = stats.permutation_test(
        (np.asarray(differences, dtype=float),),
        np.mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf if exact else SIGN_FLIP_DRAWS,
        batch=2**EXACT_SIGN_FLIPS if exact else 1000,  # every pattern in one pass; draws in thousands (the fastest: bench/README.md)
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue), 0 if exact else SIGN_FLIP_DRAWS


def paired_t_p(differences: np.ndarray) -> float:
    """The two-sided paired t p for mean 0; with no spread, 1 for a zero mean and 0 otherwise (the mean is known exactly)."""
    from scipy import stats

    if len(differences) < 2:
        return NAN
    if np.all(differences == differences[0]):
        return 1.0 if differences[0] == 0 else 0.0
    with warnings.catch_warnings():  # float residue around equal values: scipy warns of cancellation, the p is still right
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_1samp(differences, 0.0).pvalue)


def smallest_sign_flip_p(n: int) -> float:
    """The smallest p the sign-flip test can give with n pairs: the observed signs are 2 of the 2^n patterns."""
    if n == 0:
        return NAN
    exact = 2.0 / 2**n
    return exact if n <= EXACT_SIGN_FLIPS else max(exact, 1.0 / (SIGN_FLIP_DRAWS + 1))


def tost_p(differences: np.ndarray, margin: float) -> float:
    """The TOST p for 'the mean difference lies within +-margin' (paired t, two one-sided tests)."""
    from statsmodels.stats.weightstats import ttost_paired

    n = len(differences)
    if n < 2:
        return NAN
    differences = np.asarray(differences, dtype=float)
    if np.all(differences == differences[0]):  # no spread: the mean is known exactly
        return 0.0 if abs(differences[0]) < margin else 1.0
    return float(ttost_paired(differences, np.zeros(n), -margin, margin)[0])


def t_power(effect_size: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample (paired) t test with n pairs, from the noncentral t (statsmodels' TTestPower
    returns nan for large effects)."""
    from scipy import stats

    df, shift = n - 1, effect_size * math.sqrt(n)
    critical = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))


def paired_seeds_needed(delta: float, sd: float, margin: float) -> float:
    """Seeds for the observed paired difference to resolve: 80% power of the paired t test at alpha 0.05 (and at least
    the pairs the sign-flip test needs to reach it) when |delta| >= margin, else a t interval inside +-margin."""
    if not (math.isfinite(delta) and math.isfinite(sd)):
        return NAN
    fewest_exact = next(n for n in range(1, 64) if smallest_sign_flip_p(n) < ALPHA)
    if abs(delta) >= margin:
        if sd == 0:
            return float(fewest_exact)
        return next((float(n) for n in range(max(2, fewest_exact), MAX_SEEDS + 1) if t_power(abs(delta) / sd, n) >= POWER), math.inf)
    from scipy import stats

    target = margin - abs(delta)
    return next((float(n) for n in range(2, MAX_SEEDS + 1) if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) < target), math.inf)
