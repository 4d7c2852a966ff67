"""The statistics of arms compared within reference blocks, against independent computations and by simulation."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments.synthetic_sequences.analysis.comparisons.contrasts import takeup_row
from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity, stratified

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


@pytest.mark.parametrize(
    "tables",
    [
        [(0, 2, 0, 2)] * 3,  # nothing took up
        [(2, 2, 2, 2)] * 3,  # everything took up
        [(0, 2, 0, 2), (2, 2, 2, 2)],  # blocks all-0 and all-1
        [(0, 2, 0, 2)],  # one block
    ],
)
def test_where_no_block_varies_cmh_and_breslow_day_say_nothing(tables):
    """statsmodels' CMH divides by a zero variance here and returns p = 0, a number that reads as evidence."""
    assert math.isnan(stratified.cmh_p(tables))
    assert math.isnan(stratified.breslow_day_p(tables))
    assert stratified.exact_stratified_p(tables) == 1.0


def cmh_as_r_computes_it(tables):
    """R's mantelhaen.test(correct = TRUE) for 2 x 2 x K, in plain Python: YATES = 0.5 only where |DELTA| >= 0.5."""
    delta = sum(k_a - n_a * (k_a + k_b) / (n_a + n_b) for k_a, n_a, k_b, n_b in tables)
    variance = sum(
        n_a * n_b * (k_a + k_b) * (n_a + n_b - k_a - k_b) / ((n_a + n_b) ** 2 * (n_a + n_b - 1)) for k_a, n_a, k_b, n_b in tables
    )
    yates = 0.5 if abs(delta) >= 0.5 else 0.0
    return stats.chi2.sf((abs(delta) - yates) ** 2 / variance, 1)


@pytest.mark.parametrize(
    "tables",
    [
        [(1, 2, 1, 2), (1, 2, 1, 2)],  # equal totals: DELTA = 0, R's p = 1, statsmodels' 0.665
        [(1, 3, 1, 2), (2, 4, 1, 3)],  # 0 < |DELTA| < 0.5: R does not correct
        TABLES,  # |DELTA| >= 0.5: the usual correction, as statsmodels has it
    ],
)
def test_cmh_is_corrected_as_r_corrects_it(tables):
    assert stratified.cmh_p(tables) == pytest.approx(cmh_as_r_computes_it(tables), rel=1e-9)
    assert stratified.cmh_p([(1, 2, 1, 2), (1, 2, 1, 2)]) == 1.0


def test_breslow_day_reads_the_blocks_that_vary():
    """The default pilot's sum - scale: ref2 and ref4 are 2/2 against 2/2. Leaving them out, R's BreslowDayTest gives
    p = 0.498 on 2 df (the issue's independent computation); with them statsmodels divides 0 by 0."""
    counts = [(1, 2, 2, 2), (1, 2, 2, 2), (2, 2, 2, 2), (1, 2, 1, 2), (2, 2, 2, 2)]
    assert stratified.breslow_day_p(counts) == pytest.approx(0.498, abs=5e-4)
    assert stratified.breslow_day_p(counts) == stratified.breslow_day_p([counts[0], counts[1], counts[3]])
    assert math.isnan(stratified.breslow_day_p([counts[0], counts[2], counts[4]]))  # one block varies


def enumerated_power(blocks, seeds, p_a, p_b, alpha):
    """Every outcome of every block, (k_a, k_b) each, with its binomial probability: the exact power."""
    per_block = [
        ((k_a, k_b), stats.binom.pmf(k_a, seeds, p_a) * stats.binom.pmf(k_b, seeds, p_b))
        for k_a in range(seeds + 1)
        for k_b in range(seeds + 1)
    ]
    power = 0.0
    for outcome in itertools.product(per_block, repeat=blocks):
        tables = [(k_a, seeds, k_b, seeds) for (k_a, k_b), _ in outcome]
        if multiplicity.rejects(stratified.exact_stratified_p(tables), alpha):
            power += math.prod(probability for _, probability in outcome)
    return power


@pytest.mark.parametrize(("blocks", "seeds", "p_a", "p_b", "alpha"), [(3, 2, 0.8, 0.1, 0.05), (2, 3, 0.7, 0.1, 0.01)])
def test_the_stratified_power_matches_an_enumeration_of_every_outcome(blocks, seeds, p_a, p_b, alpha):
    simulated = stratified.exact_stratified_power(blocks, seeds, p_a, p_b, alpha)
    se = math.sqrt(0.25 / stratified.POWER_DRAWS)
    assert simulated == pytest.approx(enumerated_power(blocks, seeds, p_a, p_b, alpha), abs=4 * se)


def test_seeds_needed_are_sized_by_the_stratified_test_the_verdict_runs():
    """At 0.7 against 0.1 and alpha 0.01 (Holm's first step over 5 contrasts), 5 blocks: the stratified test's power is
    0.724 at 5 x 3 and 0.904 at 5 x 4 (the issue's full enumeration). Boschloo's pooled power would say 15."""
    assert stratified.exact_stratified_power(5, 3, 0.7, 0.1, 0.01) == pytest.approx(0.724, abs=0.02)
    assert stratified.exact_stratified_power(5, 4, 0.7, 0.1, 0.01) == pytest.approx(0.904, abs=0.02)
    assert inference.takeup_seeds_needed(0.7, 0.1, 0.3, 0.01, blocks=5) == 20
    assert inference.takeup_seeds_needed(0.7, 0.1, 0.3, 0.01, blocks=1) == 15
    assert inference.takeup_seeds_needed(0.1, 0.1, 0.3, 0.01, blocks=5) % 5 == 0  # equivalence, in whole blocks too


def arm_of_blocks(counts):
    """An arm's runs from (took up, runs) per block."""
    rows = [(block, float(i < k)) for block, (k, n) in enumerate(counts) if n for i in range(n)]
    return pd.DataFrame({"reference": [b for b, _ in rows], "took_up": [t for _, t in rows], "converged": 1.0})


@pytest.mark.parametrize(
    ("a", "b", "references", "p", "cmh", "homogeneity"),
    [
        ([(0, 2), (0, 2)], [(0, 2), (0, 2)], 2, 1.0, "nan", "nan"),  # all 0
        ([(2, 2), (2, 2)], [(2, 2), (2, 2)], 2, 1.0, "nan", "nan"),  # all 1
        ([(3, 4)], [(1, 4)], 1, "finite", "finite", "nan"),  # one block: Boschloo, nothing to compare
        ([(1, 1), (0, 1), (1, 1)], [(0, 1), (0, 1), (1, 1)], 3, 1.0, "finite", "nan"),  # one seed per block; one varies
        ([(2, 2), (1, 2)], [(0, 2), (0, 0)], 1, "finite", "finite", "nan"),  # b has no runs in block 1
    ],
)
def test_every_takeup_column_is_nan_or_a_documented_value_in_degenerate_cases(a, b, references, p, cmh, homogeneity):
    row = takeup_row(arm_of_blocks(a), arm_of_blocks(b))
    assert row["references"] == references
    for column, expected in (("p", p), ("p_cmh", cmh), ("p_homogeneity", homogeneity)):
        if expected == "nan":
            assert math.isnan(row[column]), column
        elif expected == "finite":
            assert 0 < row[column] <= 1, column
        else:
            assert row[column] == expected, column
    assert 0 < row["smallest_p"] <= 1 and row["ci_low"] <= row["estimate"] <= row["ci_high"]
