"""The statistics behind the contrasts against hand computations on small examples."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity

# a small censored example: steps of take-up, 1 = onset seen, 0 = censored at that step
TIMES_A, SEEN_A = np.array([3.0, 5, 5, 8, 10]), np.array([1, 1, 0, 1, 0])
TIMES_B, SEEN_B = np.array([4.0, 6, 10, 10]), np.array([1, 1, 0, 0])


def test_kaplan_meier_matches_the_product_limit_by_hand():
    fit = inference.kaplan_meier(TIMES_A, SEEN_A)
    # step 3: 1 of 5 at risk; step 5: 1 of 4 (the run censored at 5 is still at risk there); step 8: 1 of 2
    assert fit["steps"].tolist() == [3.0, 5.0, 8.0]
    assert fit["survival"] == pytest.approx([4 / 5, 4 / 5 * 3 / 4, 4 / 5 * 3 / 4 * 1 / 2])
    assert fit["median"] == 8.0  # the first step at which the curve falls to 0.5 or below


def test_kaplan_meier_without_an_onset_has_no_median():
    fit = inference.kaplan_meier(np.array([1500.0, 1500.0]), np.array([0, 0]))
    assert math.isnan(fit["median"]) and len(fit["steps"]) == 0


def test_logrank_matches_the_observed_minus_expected_by_hand():
    observed_a = expected_a = variance = 0.0
    times = np.concatenate([TIMES_A, TIMES_B])
    seen = np.concatenate([SEEN_A, SEEN_B])
    in_a = np.repeat([True, False], [len(TIMES_A), len(TIMES_B)])
    for step in sorted(set(times[seen == 1])):
        at_risk, at_risk_a = (times >= step).sum(), ((times >= step) & in_a).sum()
        events, events_a = ((times == step) & (seen == 1)).sum(), ((times == step) & (seen == 1) & in_a).sum()
        observed_a += events_a
        expected_a += events * at_risk_a / at_risk
        variance += at_risk_a * (at_risk - at_risk_a) * events * (at_risk - events) / (at_risk**2 * (at_risk - 1))
    by_hand = stats.chi2.sf((observed_a - expected_a) ** 2 / variance, df=1)
    assert inference.logrank_p(TIMES_A, SEEN_A, TIMES_B, SEEN_B) == pytest.approx(by_hand, rel=1e-9)


def test_logrank_of_arms_with_no_onset_is_undefined_and_of_identical_onsets_is_one():
    none = np.array([0, 0])
    assert math.isnan(inference.logrank_p(np.array([9.0, 9]), none, np.array([9.0, 9]), none))
    every = np.array([1, 1])
    assert inference.logrank_p(np.array([3.0, 3]), every, np.array([3.0, 3]), every) == 1.0


def test_holm_and_benjamini_hochberg_match_a_hand_computation():
    p = [0.01, 0.04, 0.03, 0.20]
    # Holm: sorted 0.01 x4, 0.03 x3, 0.04 x2, 0.20 x1, each at least the one before
    assert multiplicity.adjust(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # BH: sorted p x 4 / rank = 0.04, 0.06, 0.0533, 0.20, each at most the one after
    assert multiplicity.adjust(p, "fdr_bh") == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])
    assert multiplicity.adjust([0.01, math.nan, 0.02], "holm") == pytest.approx([0.02, math.nan, 0.02], nan_ok=True)


def test_the_exact_sign_flip_p_counts_the_sign_patterns_at_least_as_extreme():
    differences = np.array([0.4, 1.0, -0.2, 0.3])
    observed = abs(differences.mean())
    patterns = [abs(np.mean(differences * signs)) >= observed - 1e-12 for signs in itertools.product([1, -1], repeat=4)]
    p, draws = inference.sign_flip_p(differences)
    assert p == pytest.approx(sum(patterns) / 16) and draws == 0
    assert inference.smallest_sign_flip_p(3) == 0.25 and inference.smallest_sign_flip_p(6) == 2 / 64
    assert inference.sign_flip_p(np.arange(1.0, 21.0))[1] == inference.SIGN_FLIP_DRAWS  # 20 pairs: Monte Carlo, counted


def test_proportion_intervals_match_their_closed_forms():
    assert inference.clopper_pearson(0, 10)[1] == pytest.approx(1 - 0.025 ** (1 / 10))
    wilson_low = 10 / (10 + stats.norm.ppf(0.975) ** 2)  # Wilson's lower bound for 10 of 10
    assert inference.newcombe(10, 10, 10, 10) == pytest.approx((-(1 - wilson_low), 1 - wilson_low))


def test_boschloo_edges_and_its_exact_power():
    assert inference.smallest_boschloo_p(3, 3) == pytest.approx(1 / 32)
    assert inference.boschloo_p(0, 5, 0, 5) == 1.0 and inference.boschloo_p(5, 5, 5, 5) == 1.0
    # at 3 per arm only 3/3 vs 0/3 (and its mirror) rejects at 0.05: power at rates 1 and 0 is 1, at 0.9 and 0.1 is 0.9^6
    assert inference.boschloo_rejections(3) == {(3, 0), (0, 3)}
    assert inference.boschloo_power(3, 0.9, 0.1) == pytest.approx(0.9**6 + 0.1**6)
    assert inference.takeup_seeds_needed(1.0, 0.0, margin=0.3) == 3
    assert inference.takeup_seeds_needed(1.0, 0.0, margin=0.3, alpha=0.01) == 4  # 4/4 vs 0/4: p = 2 / 2^8 < 0.01


@pytest.mark.parametrize(("n", "alpha"), [(7, 0.05), (8, 0.0125)])
def test_boschloos_rejection_region_is_every_table_its_test_rejects(n, alpha):
    """The walk's region against testing each of the (n + 1)^2 tables."""
    every = {(a, b) for a in range(n + 1) for b in range(n + 1) if multiplicity.rejects(inference.boschloo_p(a, n, b, n), alpha)}
    assert inference.boschloo_rejections(n, alpha) == every and len(every) > 2


def test_tost_reads_a_tight_difference_inside_the_margin_as_equivalent():
    assert inference.tost_p(np.array([0.01, 0.02, 0.0, 0.01]), margin=0.05) < 0.05
    assert inference.tost_p(np.array([0.3, 0.5, 0.1]), margin=0.05) > 0.5
    assert inference.tost_p(np.array([0.02, 0.02]), margin=0.05) == 0.0  # no spread, inside the margin
