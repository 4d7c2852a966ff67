"""The statistics of arms compared within reference blocks and pooled across them.

Each reference block (one z-free model: its warm start, scores and c_base) is a stratum. Every arm of a contrast has
the same seeds in every block, so the blocks are balanced, and:

  take-up      the exact conditional test of no arm effect given the blocks: in each block the number of a's runs
               that took up is hypergeometric given its margins, the blocks' sum is their convolution, and the
               two-sided p sums the outcomes no likelier than the one observed (Fisher's test when there is one
               block; R's mantelhaen.test(exact = TRUE)). Beside it, from statsmodels' StratifiedTable, the
               Cochran-Mantel-Haenszel test and Breslow-Day's test that the blocks share one odds ratio.
  onset        the log-rank test stratified by block (inference.logrank_p with strata: statsmodels' survdiff)
  continuous   a two-level bootstrap of the mean paired difference: blocks resampled, then the pairs within each
               drawn block (the Multi-Bootstrap of Sellam et al. 2022)

scipy and statsmodels are imported inside the functions, as in inference.py.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import cache

import numpy as np

from experiments.synthetic_sequences.analysis.statistics.multiplicity import rejects

NAN = math.nan
BOOTSTRAP_DRAWS = 2_000
RELATIVE_TOLERANCE = 1 + 1e-7  # outcomes as likely as the observed one, up to float error, count as no likelier
POWER_DRAWS = 4_000  # simulated pilots per power (exact_stratified_power)
POWER_SEED = 0


def conditional_distribution(margins: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, int]:
    """P(T = low + i) of T, the sum over blocks of a's runs that took up, given each block's margins (n_a, n_b,
    events): the convolution of the blocks' hypergeometric distributions; and low, the smallest T they allow."""
    distribution, low = np.ones(1), 0
    for n_a, n_b, events in margins:
        mass, first = block_distribution(n_a, n_b, events)
        distribution, low = np.convolve(distribution, mass), low + first
    return distribution, low


@cache
def block_distribution(n_a: int, n_b: int, events: int) -> tuple[np.ndarray, int]:
    """One block's hypergeometric P(k_a = first + i) given its margins, and first, the smallest k_a they allow."""
    from scipy import stats

    first, last = max(0, events - n_b), min(events, n_a)
    return stats.hypergeom.pmf(np.arange(first, last + 1), n_a + n_b, events, n_a), first


def two_sided_p(distribution: np.ndarray, low: int, observed: int) -> float:
    """The mass of the outcomes no likelier than the observed T (up to float error)."""
    p_observed = distribution[observed - low]
    return float(min(1.0, distribution[distribution <= p_observed * RELATIVE_TOLERANCE].sum()))


def exact_stratified_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """Two-sided exact conditional p of no arm effect, blocks fixed. tables: (k_a, n_a, k_b, n_b) per block."""
    distribution, low = conditional_distribution([(n_a, n_b, k_a + k_b) for k_a, n_a, k_b, n_b in tables])
    return two_sided_p(distribution, low, sum(table[0] for table in tables))


def smallest_exact_stratified_p(sizes: Sequence[tuple[int, int]]) -> float:
    """The smallest p exact_stratified_p can give at these arm sizes: every run of a takes up in every block, none of b."""
    return exact_stratified_p([(n_a, n_a, 0, n_b) for n_a, n_b in sizes])


@cache
def exact_stratified_power(blocks: int, seeds: int, p_a: float, p_b: float, alpha: float, draws: int = POWER_DRAWS) -> float:
    """The power of exact_stratified_p at `alpha` (p <= alpha rejects, multiplicity.rejects) with `seeds` runs per arm in
    each of `blocks` blocks and take-up rates p_a and p_b in every block, simulated: `draws` pilots from a fixed seed,
    each tested as the verdict tests it. Its Monte Carlo error is at most 0.5 / sqrt(draws) (0.008 at 4,000)."""
    rng = np.random.default_rng(POWER_SEED)
    took_a, took_b = rng.binomial(seeds, p_a, size=(draws, blocks)), rng.binomial(seeds, p_b, size=(draws, blocks))
    margins = np.sort(took_a + took_b, axis=1)  # the test is the same whatever order the blocks come in
    totals = took_a.sum(axis=1)
    p_of: dict[tuple, float] = {}
    rejected = 0
    for events, total in zip(map(tuple, margins), totals, strict=True):
        key = (events, int(total))
        if key not in p_of:
            distribution, low = conditional_distribution([(seeds, seeds, int(m)) for m in events])
            p_of[key] = two_sided_p(distribution, low, int(total))
        rejected += rejects(p_of[key], alpha)
    return rejected / draws


def stratified_table(tables: Sequence[tuple[int, int, int, int]]):
    from statsmodels.stats.contingency_tables import StratifiedTable

    return StratifiedTable([np.array([[k_a, n_a - k_a], [k_b, n_b - k_b]], dtype=float) for k_a, n_a, k_b, n_b in tables])


def varies(table: tuple[int, int, int, int]) -> bool:
    """A block that says something about the arms: both arms have runs, and some but not all of them took up."""
    k_a, n_a, k_b, n_b = table
    return n_a > 0 and n_b > 0 and 0 < k_a + k_b < n_a + n_b


def cmh_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """The Cochran-Mantel-Haenszel p of a common odds ratio of 1, continuity-corrected as R's mantelhaen.test corrects
    it: by 0.5 only where |sum(a - E[a])| >= 0.5 (statsmodels subtracts 0.5 always, which overshoots a deviation
    below 0.5, and gives p = 0 where no block varies). nan where no block varies."""
    informative = [table for table in tables if varies(table)]
    if not informative:
        return NAN
    deviation = sum(k_a - n_a * (k_a + k_b) / (n_a + n_b) for k_a, n_a, k_b, n_b in informative)
    return float(stratified_table(informative).test_null_odds(correction=abs(deviation) >= 0.5).pvalue)


def breslow_day_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """Breslow-Day's p that every block has the same odds ratio (Tarone-adjusted), over the blocks that vary (a block
    all-0 or all-1 in both arms says nothing about its odds ratio, and statsmodels divides 0 by 0 on it); nan when
    fewer than two blocks vary, or for an odds ratio of 0 or infinity (a zero cell in every block)."""
    informative = [table for table in tables if varies(table)]
    if len(informative) < 2:
        return NAN
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        table = stratified_table(informative)
        if table.oddsratio_pooled == 1.0:
            # statsmodels solves a quadratic whose leading coefficient is 1 - OR, so at an OR of exactly 1 (blocks that
            # mirror each other) it divides by 0; the statistic is continuous there, and a hair above 1 gives its limit
            table._cache["oddsratio_pooled"] = 1.0 + 1e-9
        try:
            value = table.test_equal_odds(adjust=True).pvalue
        except (ZeroDivisionError, ValueError, np.linalg.LinAlgError):
            return NAN
    return float(value) if np.isfinite(value) else NAN


def two_level_bootstrap(differences: np.ndarray, blocks: np.ndarray, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the mean paired difference: draw as many blocks as there are, with replacement, then
    within each drawn block as many of its pairs as it has, with replacement. nan for fewer than two pairs."""
    differences, blocks = np.asarray(differences, dtype=float), np.asarray(blocks)
    if len(differences) < 2:
        return NAN, NAN
    rng = np.random.default_rng(seed)
    groups = [differences[blocks == block] for block in np.unique(blocks)]
    sizes = {len(group) for group in groups}
    if len(sizes) == 1:  # balanced blocks (every arm has the same seeds in every block): all draws at once
        size = sizes.pop()
        chosen = rng.integers(len(groups), size=(BOOTSTRAP_DRAWS, len(groups), 1))
        within = rng.integers(size, size=(BOOTSTRAP_DRAWS, len(groups), size))
        means = np.stack(groups)[chosen, within].mean(axis=(1, 2))
    else:
        means = np.empty(BOOTSTRAP_DRAWS)
        for draw in range(BOOTSTRAP_DRAWS):
            chosen = rng.integers(len(groups), size=len(groups))
            means[draw] = np.concatenate([rng.choice(groups[i], size=len(groups[i])) for i in chosen]).mean()
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)
