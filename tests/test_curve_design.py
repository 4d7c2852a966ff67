"""The sequential curve design's rules (sequential/curve_design.py): the fixed set of betas, stage 1's coarse grid,
where a later stage puts each mode's runs (by hand from the curve's own logit), the alpha each look spends, and why a
curve stops."""

import math

import pytest

from experiments.synthetic_sequences.sequential.curve_design import (
    E12,
    CurveDesign,
    coarse_betas,
    effective_dose,
    fixed_beta,
    fixed_betas,
    fixed_index,
    informative_betas,
    stop_reason,
)
from experiments.synthetic_sequences.sequential.design import obrien_fleming_spent


def test_the_fixed_set_is_e12_in_every_decade_spelt_as_written():
    assert fixed_betas(0.01, 0.1) == [0.01, 0.012, 0.015, 0.018, 0.022, 0.027, 0.033, 0.039, 0.047, 0.056, 0.068, 0.082, 0.1]
    assert [fixed_beta(12 + i) for i in range(12)] == [10 * m for m in E12]
    assert fixed_beta(-24) == 0.01 and repr(fixed_beta(-18)) == "0.033"
    # each beta's nearest fixed beta on the log scale, across a decade's edge too (0.0095: 5% under 0.01, 16% over 0.0082)
    nearest = [fixed_beta(fixed_index(beta)) for beta in (0.035, 0.062, 0.11, 0.2, 0.35, 0.0095, 0.091)]
    assert nearest == [0.033, 0.068, 0.12, 0.22, 0.33, 0.01, 0.1]  # 0.062: 9.7% under 0.068, 10.7% over 0.056


def test_stage_one_takes_every_third_fixed_beta_over_the_span_and_its_top():
    assert coarse_betas([0.035, 0.062, 0.11, 0.2, 0.35]) == [0.033, 0.056, 0.1, 0.18, 0.33]
    assert coarse_betas([0.013, 0.63]) == [0.012, 0.022, 0.039, 0.068, 0.12, 0.22, 0.39, 0.68]  # 0.68 tops 0.63


def test_each_mode_is_placed_either_side_of_its_ed50_or_at_its_ed18_and_ed82():
    """logit P = a + b log beta + c s: mean's ED50 at 0.11, slope -2.45, k = 0.5 (sum's curve a factor 2 to the right).
    ED18 = 0.11 exp(1.5434 / 2.45) = 0.206, ED82 = 0.11 exp(-1.5434 / 2.45) = 0.0587, by hand."""
    slope = -2.45
    intercept, mode_effect = -slope * math.log(0.11), slope * math.log(0.5)
    assert effective_dose(intercept, slope, 0.0, 0, 0.5) == pytest.approx(0.11)
    assert effective_dose(intercept, slope, mode_effect, 1, 0.5) == pytest.approx(0.22)
    assert informative_betas(intercept, slope, mode_effect, 0, [0.035, 0.35], "d-optimal") == [0.056, 0.22]
    assert informative_betas(intercept, slope, mode_effect, 1, [0.035, 0.35], "d-optimal") == [0.12, 0.39]  # 0.117, 0.411
    # c-optimal, the default: the fixed betas either side of each ED50
    assert informative_betas(intercept, slope, mode_effect, 0, [0.035, 0.35]) == [0.1, 0.12]
    assert informative_betas(intercept, slope, mode_effect, 1, [0.035, 0.35]) == [0.22, 0.27]


def test_a_cliff_steeper_than_a_step_gets_the_betas_either_side_and_a_far_curve_is_sought_within_ten_times_the_span():
    steep = -60.0
    assert informative_betas(-steep * math.log(0.19), steep, 0.0, 0, [0.035, 0.35], "d-optimal") == [0.18, 0.22]
    far = -2.45  # ED50 at 30: beyond 10 x 0.35, so the set's betas at 3.3 and under hold it
    assert informative_betas(-far * math.log(30.0), far, 0.0, 0, [0.035, 0.35]) == [2.7, 3.3]
    assert informative_betas(-far * math.log(1e-5), far, 0.0, 0, [0.035, 0.35]) == [0.0033, 0.0039]
    # no slope: beyond the span, where take-up would change (none took up: smaller betas; all did: larger)
    assert informative_betas(-100.0, 0.0, 0.0, 1, [0.035, 0.35]) == [0.01, 0.018]
    # a slope near 0 but not under 1e-8 puts the doses beyond any float (a simulated design's fit overflowed there)
    assert informative_betas(-100.0, 1e-6, 0.0, 0, [0.035, 0.35]) == [2.7, 3.3]
    assert informative_betas(-100.0, -1e-6, 0.0, 0, [0.035, 0.35], "d-optimal") == [0.0033, 0.0039]
    assert informative_betas(100.0, 0.0, 0.0, 0, [0.035, 0.35]) == [0.56, 1.0]


def test_the_looks_spend_their_increments_and_the_last_spends_what_is_left():
    design = CurveDesign(first_blocks=4, stage_blocks=8, seeds=1, budget=160)
    assert design.first_runs([0.035, 0.35]) == 2 * 5 * 4 and design.stage_runs() == 2 * 2 * 8
    looks = [40, 72, 104, 136]
    increments = [design.increment(runs, before, 0.05, last=runs == 136) for before, runs in zip([0, *looks], looks, strict=False)]
    assert increments[0] == pytest.approx(obrien_fleming_spent(0.25, 0.05))
    assert increments[1] == pytest.approx(obrien_fleming_spent(72 / 160, 0.05) - obrien_fleming_spent(0.25, 0.05))
    assert sum(increments) == pytest.approx(0.05) and all(value > 0 for value in increments)


@pytest.mark.parametrize(
    ("log_k", "low", "high", "parallel_p", "room", "reason"),
    [
        (0.5, 0.1, 0.9, 0.001, True, "beyond scale"),  # under the look's alpha: first
        (0.5, 0.1, 0.9, 0.02, True, "a shift"),  # 0.02 is over this look's 0.01
        (0.5, 0.5 - 0.26, 0.5 + 0.26, 0.5, True, "precise"),  # within log 1.3 = 0.262 either way, before the reading
        (0.0, -0.3, 0.3, 0.5, True, "no shift"),
        (0.1, -0.3, 0.6, 0.5, True, None),
        (0.1, -0.3, 0.6, 0.5, False, "budget"),
        (math.nan, -math.inf, math.inf, 0.5, True, None),
    ],
)
def test_a_curve_stops_for_the_first_reason_that_applies(log_k, low, high, parallel_p, room, reason):
    design = CurveDesign(first_blocks=4, stage_blocks=8, seeds=1, budget=160)
    assert stop_reason(design, log_k, low, high, parallel_p, 0.01, room) == reason


def test_a_design_that_does_not_stop_at_a_reading_goes_on_to_its_precision_or_budget():
    design = CurveDesign(first_blocks=4, stage_blocks=8, seeds=1, budget=160, stop_at_reading=False)
    assert stop_reason(design, 0.5, 0.1, 0.9, 0.5, 0.01, True) is None
    assert stop_reason(design, 0.5, 0.1, 0.9, 0.5, 0.01, False) == "budget"
