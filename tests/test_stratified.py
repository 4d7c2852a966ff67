"""The statistics of arms compared within reference blocks, against independent computations and by simulation."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments.synthetic_sequences.analysis import inference, stratified
from experiments.synthetic_sequences.analysis.contrasts import takeup_row

# (k_a, n_a, k_b, n_b) per reference block
TABLES = [(1, 4, 3, 4), (0, 4, 2, 4), (2, 5, 4, 5)]


def hypergeometric(k: int, n_a: int, n_b: int, events: int) -> float:
    return math.comb(n_a, k) * math.comb(n_b, events - k) / math.comb(n_a + n_b, events)


@pytest.mark.parametrize("table", [(3, 10, 8, 10), (0, 6, 5, 6), (2, 7, 2, 9), (4, 4, 0, 4)])
def test_one_block_is_fishers_exact_test(table):
    k_a, n_a, k_b, n_b = table
    fisher = stats.fisher_exact([[k_a, n_a - k_a], [k_b, n_b - k_b]]).pvalue
    assert stratified.exact_stratified_p([table]) == pytest.approx(fisher, rel=1e-9)


def test_the_stratified_exact_p_is_the_sum_over_every_outcome_no_likelier_than_the_observed():
    """By enumeration in plain Python: every joint outcome of the blocks with their margins fixed."""
    ranges, observed = [], 1.0
    for k_a, n_a, k_b, n_b in TABLES:
        events = k_a + k_b
        ranges.append([(k, hypergeometric(k, n_a, n_b, events)) for k in range(max(0, events - n_b), min(events, n_a) + 1)])
    by_total: dict[int, float] = {}
    for outcome in itertools.product(*ranges):
        total = sum(k for k, _ in outcome)
        by_total[total] = by_total.get(total, 0.0) + math.prod(p for _, p in outcome)
    observed = by_total[sum(t[0] for t in TABLES)]
    expected = sum(p for p in by_total.values() if p <= observed * (1 + 1e-7))
    assert stratified.exact_stratified_p(TABLES) == pytest.approx(expected, rel=1e-9)
    every_a_takes_up = [(n_a, n_a, 0, n_b) for _, n_a, _, n_b in TABLES]
    assert stratified.smallest_exact_stratified_p([(t[1], t[3]) for t in TABLES]) == stratified.exact_stratified_p(every_a_takes_up)


def test_cmh_against_its_formula():
    """sum over blocks of (a - E[a]) with the continuity correction, squared, over the summed hypergeometric variances."""
    deviation, variance = 0.0, 0.0
    for k_a, n_a, k_b, n_b in TABLES:
        n, events = n_a + n_b, k_a + k_b
        deviation += k_a - n_a * events / n
        variance += n_a * n_b * events * (n - events) / (n**2 * (n - 1))
    statistic = (abs(deviation) - 0.5) ** 2 / variance
    assert stratified.cmh_p(TABLES) == pytest.approx(stats.chi2.sf(statistic, 1), rel=1e-9)


def test_breslow_day_reads_blocks_that_disagree():
    same = [(2, 10, 6, 10)] * 3
    opposite = [(1, 10, 9, 10), (9, 10, 1, 10), (5, 10, 5, 10)]
    assert stratified.breslow_day_p(same) == pytest.approx(1.0)
    assert stratified.breslow_day_p(opposite) < 0.001
    assert math.isnan(stratified.breslow_day_p(TABLES[:1]))  # one block: nothing to compare


def logrank_by_hand(times, observed, groups, strata):
    """Observed minus expected onsets of group 0 and their hypergeometric variance, summed over the blocks' event times."""
    deviation, variance = 0.0, 0.0
    for block in np.unique(strata):
        t, d, g = times[strata == block], observed[strata == block], groups[strata == block]
        for step in np.unique(t[d == 1]):
            at_risk = t >= step
            n, n0 = at_risk.sum(), (at_risk & (g == 0)).sum()
            events, events0 = ((t == step) & (d == 1)).sum(), ((t == step) & (d == 1) & (g == 0)).sum()
            deviation += events0 - events * n0 / n
            if n > 1:
                variance += events * (n0 / n) * (1 - n0 / n) * (n - events) / (n - 1)
    return stats.chi2.sf(deviation**2 / variance, 1)


def test_the_stratified_logrank_against_a_hand_computation():
    rng = np.random.default_rng(3)
    times = rng.choice([100.0, 150, 200, 250, 300, 400], size=24)
    observed = (times < 400).astype(int)
    groups, strata = np.tile(np.repeat([0, 1], 4), 3), np.repeat([0, 1, 2], 8)
    p = inference.logrank_p(
        times[groups == 0], observed[groups == 0], times[groups == 1], observed[groups == 1], strata[groups == 0], strata[groups == 1]
    )
    order = np.r_[np.flatnonzero(groups == 0), np.flatnonzero(groups == 1)]
    assert p == pytest.approx(logrank_by_hand(times[order], observed[order], groups[order], strata[order]), rel=1e-6)


def test_the_two_level_bootstrap_on_cases_whose_answer_is_known():
    blocks = np.repeat(np.arange(3), 4)
    assert stratified.two_level_bootstrap(np.full(12, 0.25), blocks) == pytest.approx((0.25, 0.25))
    # blocks that differ and seeds that do not: the interval is that of the mean of the block values, resampled, whose
    # sd is their population sd / sqrt(R)
    values = np.linspace(-1.0, 1.0, 40)
    low, high = stratified.two_level_bootstrap(np.repeat(values, 3), np.repeat(np.arange(40), 3))
    sd = values.std() / math.sqrt(40)
    assert (high - low) / (2 * 1.96 * sd) == pytest.approx(1.0, abs=0.1)
    # one block: an ordinary bootstrap of the pairs
    pairs = np.random.default_rng(0).normal(size=200)
    low, high = stratified.two_level_bootstrap(pairs, np.zeros(200))
    assert (high - low) / (2 * 1.96 * pairs.std() / math.sqrt(200)) == pytest.approx(1.0, abs=0.1)


def simulated_arm(rng, rates, seeds):
    """took_up of an arm's runs: `seeds` runs in each reference block, each block at its own rate."""
    blocks = np.repeat(np.arange(len(rates)), seeds)
    return pd.DataFrame(
        {"reference": blocks, "took_up": (rng.random(len(blocks)) < np.repeat(rates, seeds)).astype(float), "converged": 1.0}
    )


def test_the_stratified_takeup_test_holds_its_size_when_references_differ():
    """Blocks whose take-up rates differ (0.1, 0.5, 0.9) and arms that do not: over 2,000 simulated pilots the
    contrast's own test rejects at most 5% + 2 Monte Carlo se. The unstratified Boschloo test of the pooled runs is
    counted beside it (conservative here: pooling adds the blocks' spread to both arms)."""
    rng, rates, seeds, pilots = np.random.default_rng(2026), [0.1, 0.5, 0.9], 4, 2000
    pooled_rejections = inference.boschloo_rejections(len(rates) * seeds)
    stratified_rejects = pooled_rejects = 0
    for _ in range(pilots):
        a, b = simulated_arm(rng, rates, seeds), simulated_arm(rng, rates, seeds)
        stratified_rejects += takeup_row(a, b)["p"] < inference.ALPHA
        pooled_rejects += (int(a.took_up.sum()), int(b.took_up.sum())) in pooled_rejections
    size, bound = stratified_rejects / pilots, 0.05 + 2 * math.sqrt(0.05 * 0.95 / pilots)
    print(
        f"size under heterogeneity: stratified {size:.4f}, unstratified pooled Boschloo {pooled_rejects / pilots:.4f} (bound {bound:.4f})"
    )
    assert size <= bound
    assert takeup_row(a, b)["test"] == "exact stratified by reference"
