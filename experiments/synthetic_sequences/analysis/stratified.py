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

import numpy as np

NAN = math.nan
BOOTSTRAP_DRAWS = 2_000
RELATIVE_TOLERANCE = 1 + 1e-7  # outcomes as likely as the observed one, up to float error, count as no likelier


def exact_stratified_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """Two-sided exact conditional p of no arm effect, blocks fixed. tables: (k_a, n_a, k_b, n_b) per block."""
    from scipy import stats

    distribution, low = np.ones(1), 0  # P(T = low + i) of T = sum of k_a over the blocks so far
    observed = 0
    for k_a, n_a, k_b, n_b in tables:
        events = k_a + k_b
        first, last = max(0, events - n_b), min(events, n_a)  # the k_a these margins allow
        mass = stats.hypergeom.pmf(np.arange(first, last + 1), n_a + n_b, events, n_a)
        distribution, low, observed = np.convolve(distribution, mass), low + first, observed + k_a
    p_observed = distribution[observed - low]
    return float(min(1.0, distribution[distribution <= p_observed * RELATIVE_TOLERANCE].sum()))


def smallest_exact_stratified_p(sizes: Sequence[tuple[int, int]]) -> float:
    """The smallest p exact_stratified_p can give at these arm sizes: every run of a takes up in every block, none of b."""
    return exact_stratified_p([(n_a, n_a, 0, n_b) for n_a, n_b in sizes])


def stratified_table(tables: Sequence[tuple[int, int, int, int]]):
    from statsmodels.stats.contingency_tables import StratifiedTable

    return StratifiedTable([np.array([[k_a, n_a - k_a], [k_b, n_b - k_b]], dtype=float) for k_a, n_a, k_b, n_b in tables])


def cmh_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """The Cochran-Mantel-Haenszel p (continuity-corrected) of a common odds ratio of 1; nan where no block varies."""
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        value = stratified_table(tables).test_null_odds(correction=True).pvalue
    return float(value) if np.isfinite(value) else NAN


def breslow_day_p(tables: Sequence[tuple[int, int, int, int]]) -> float:
    """Breslow-Day's p that every block has the same odds ratio (Tarone-adjusted); nan for one block or an odds ratio
    of 0 or infinity (a zero cell in every block)."""
    if len(tables) < 2:
        return NAN
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        table = stratified_table(tables)
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
