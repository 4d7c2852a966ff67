"""The shift factor k between mean's and sum's take-up curves over beta (analysis/statistics/beta_curves.py): the fits against a
second implementation, the profile interval against a scan of its own definition, swapped modes, and each reading's
rule. The table that reads them over the population of blocks: test_curve_table.py."""

import math

import numpy as np
import pytest

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.statistics import beta_curves
from experiments.synthetic_sequences.analysis.statistics.beta_curves import (
    Curves,
    additive,
    against_prediction,
    read_shift,
    reading,
    runs_to_resolve,
    shift_loglik,
)

BETAS = np.array([0.01, 0.02, 0.04, 0.08, 0.16])


def test_the_glm_agrees_with_statsmodels_logit_on_the_same_runs():
    import statsmodels.api as sm

    runs = pilot(np.random.default_rng(3), math.log(2.0), blocks=4, seeds=4, betas=BETAS)
    curves = Curves.of(runs)
    glm = additive(curves)
    design = np.column_stack([curves.blocks(), curves.log_beta, curves.sums])
    logit = sm.Logit(curves.took_up, design).fit(disp=0)
    assert np.allclose(glm.params, logit.params, rtol=1e-6, atol=1e-6)
    assert glm.llf == pytest.approx(logit.llf, rel=1e-9)


def test_the_parallelism_p_is_raos_score_test_computed_by_hand():
    """U = z'(y - mu) at the shift model's fit, its variance z'Wz - z'WX (X'WX)^-1 X'Wz, U^2 / var against chi2_1."""
    from scipy import stats

    runs = pilot(np.random.default_rng(9), 0.3, blocks=4, seeds=3, betas=BETAS)
    curves = Curves.of(runs)
    free = additive(curves)
    design, extra = np.asarray(free.model.exog), curves.sums * curves.log_beta
    mu = np.asarray(free.fittedvalues)
    weights = mu * (1 - mu)
    score = extra @ (curves.took_up - mu)
    information = design.T @ (weights[:, None] * design)
    cross = design.T @ (weights * extra)
    variance = extra @ (weights * extra) - cross @ np.linalg.solve(information, cross)
    assert beta_curves.parallelism_p(curves, free) == pytest.approx(stats.chi2.sf(score**2 / variance, 1), rel=1e-6)


def test_the_profile_interval_is_where_its_deviance_crosses_the_chi2_cut_and_a_scan_finds_the_same_ends():
    runs = pilot(np.random.default_rng(5), 0.0, blocks=4, seeds=3, betas=BETAS)
    curves = Curves.of(runs)
    shift = read_shift(curves)
    assert shift.log_low < shift.log_k < shift.log_high
    for end in (shift.log_low, shift.log_high):
        assert 2 * (shift.loglik - shift_loglik(curves, end)) == pytest.approx(3.841459, abs=1e-3)
    # the free fit's maximum is the profile's: the shift model is the additive one reparametrised (c = b log k)
    assert shift_loglik(curves, shift.log_k) == pytest.approx(shift.loglik, abs=1e-6)
    grid = np.arange(shift.log_k - 3, shift.log_k + 3, 0.01)
    inside = [value for value in grid if 2 * (shift.loglik - shift_loglik(curves, value)) <= 3.841459]
    assert min(inside) == pytest.approx(shift.log_low, abs=0.011) and max(inside) == pytest.approx(shift.log_high, abs=0.011)


def test_swapping_the_modes_inverts_k_and_mirrors_its_interval():
    runs = pilot(np.random.default_rng(11), math.log(1.5), blocks=4, seeds=3, betas=BETAS)
    swapped = runs.assign(mode=runs["mode"].map({"mean": "sum", "sum": "mean"}))
    forward, backward = read_shift(Curves.of(runs)), read_shift(Curves.of(swapped))
    assert backward.log_k == pytest.approx(-forward.log_k, abs=1e-6)
    assert (backward.log_low, backward.log_high) == pytest.approx((-forward.log_high, -forward.log_low), abs=2e-3)


@pytest.mark.parametrize(
    ("low", "high", "parallel_p", "said"),
    [
        (-0.1, 0.1, 0.01, "beyond scale"),  # the shape test comes first
        (-0.3, 0.3, 0.5, "no shift"),  # inside log 1.5 = 0.405 both ways
        (0.1, 0.9, 0.5, "a shift"),
        (-1.2, -0.2, 0.5, "a shift"),
        (-0.3, 0.5, 0.5, "cannot be resolved"),
        (-math.inf, 0.2, 0.5, "cannot be resolved"),
    ],
)
def test_each_reading_follows_its_rule(low, high, parallel_p, said):
    assert reading(low, high, parallel_p) == said


@pytest.mark.parametrize(
    ("low", "high", "predicted", "said"),
    [
        (math.log(0.1), math.log(0.2), 1 / 6.57, "as the scale predicts"),
        (math.log(0.3), math.log(0.9), 1 / 6.57, "a smaller shift than the scale predicts"),  # nearer 1
        (math.log(0.02), math.log(0.1), 1 / 6.57, "a larger shift than the scale predicts"),
        (math.log(1.1), math.log(2.0), 3.0, "a smaller shift than the scale predicts"),
        (math.log(4.0), math.log(5.0), 3.0, "a larger shift than the scale predicts"),
        (-math.inf, math.log(0.9), 1 / 6.57, "cannot be resolved"),  # sum at its ceiling at every beta: open below
        (math.log(0.3), math.log(0.9), 1.0, "a larger shift than the scale predicts"),  # any shift, where none is predicted
        (math.log(0.1), math.log(1.3), 1 / 6.57, "cannot tell a shift of 1 from the scale's"),  # identical curves, a wide interval
        (math.log(0.9), math.log(1.1), 1.0, "as the scale predicts"),  # where the scale predicts no shift, 1 is the prediction
    ],
)
def test_k_is_read_against_the_scale_prediction(low, high, predicted, said):
    assert against_prediction(low, high, predicted) == said


def test_the_runs_that_would_resolve_k_by_hand():
    # half-width 0.5 on log k at 8 runs per cell, estimate 0.1: excluding 1 needs 0.1, the margin 0.405 - 0.1 = 0.305
    assert runs_to_resolve(0.1, -0.4, 0.6, 8) == math.ceil(8 * (0.5 / (math.log(1.5) - 0.1)) ** 2)
    assert runs_to_resolve(0.3, -0.2, 0.8, 8) == math.ceil(8 * (0.5 / 0.3) ** 2)
    assert math.isnan(runs_to_resolve(0.1, -math.inf, 0.6, 8))
