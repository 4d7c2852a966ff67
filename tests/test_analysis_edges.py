"""The analysis at its edges: an arm with no runs, no pairs or no curve reads nan or says so, never a number."""

import itertools
import math

import numpy as np
import pytest

from experiments.synthetic_sequences.analysis.comparisons.readings import onset_sooner, reading
from experiments.synthetic_sequences.analysis.records.curves import last_quarter_change
from experiments.synthetic_sequences.analysis.statistics import inference
from experiments.synthetic_sequences.analysis.tables import aggregate
from experiments.synthetic_sequences.planning.data_draws import SHARED_DRAW
from experiments.synthetic_sequences.sequential.decisions import earlier_decisions


@pytest.mark.parametrize(
    "estimate",
    [
        lambda: inference.clopper_pearson(0, 0),
        lambda: inference.newcombe(0, 0, 3, 5),
        lambda: inference.newcombe(3, 5, 0, 0),
        lambda: (inference.boschloo_p(0, 0, 1, 4),),
        lambda: (inference.takeup_seeds_needed(math.nan, 0.5, 0.3),),
        lambda: inference.t_interval(np.array([])),
        lambda: (inference.sign_flip_p(np.array([]))[0],),
        lambda: (inference.smallest_sign_flip_p(0),),
    ],
    ids=["clopper-pearson", "newcombe a", "newcombe b", "boschloo", "seeds needed", "t interval", "sign-flip", "smallest p"],
)
def test_an_arm_without_runs_or_pairs_estimates_nothing(estimate):
    assert all(math.isnan(value) for value in estimate())


def test_a_sign_flip_test_without_pairs_draws_nothing():
    assert inference.sign_flip_p(np.array([]))[1] == 0


@pytest.mark.parametrize("n", range(1, 9))
def test_the_smallest_sign_flip_p_is_the_exact_enumerations(n):
    """All n differences of one sign: of the 2^n sign patterns, those as extreme in |mean| are the 2 of one sign."""
    differences = np.arange(1.0, n + 1)
    observed = abs(differences.mean())
    patterns = [np.array(signs) * differences for signs in itertools.product((1, -1), repeat=n)]
    as_extreme = sum(abs(pattern.mean()) >= observed - 1e-12 for pattern in patterns)
    assert inference.smallest_sign_flip_p(n) == pytest.approx(as_extreme / 2**n)


def test_a_contrast_that_did_not_run_reads_not_run():
    assert reading(None, 0.3) == "not run"


def test_onset_reads_sooner_by_median_then_by_share_of_runs_with_an_onset():
    nan = math.nan
    assert onset_sooner({"estimate": -50.0, "median_a": 150.0, "median_b": 200.0})
    assert onset_sooner({"estimate": nan, "median_a": 150.0, "median_b": nan})  # only a's median is reached
    assert not onset_sooner({"estimate": nan, "median_a": nan, "median_b": 300.0})
    neither = {"estimate": nan, "median_a": nan, "median_b": nan}
    assert onset_sooner({**neither, "onset_share_a": 0.4, "onset_share_b": 0.1})
    assert not onset_sooner({**neither, "onset_share_a": 0.1, "onset_share_b": 0.4})


def test_a_curve_without_evaluations_has_no_last_quarter_change():
    assert math.isnan(last_quarter_change([], []))


def test_a_design_without_an_earlier_look_has_no_earlier_decisions():
    assert earlier_decisions(None) == {}


def test_aggregate_without_a_run_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one run's metrics file"):
        aggregate([], {SHARED_DRAW: tmp_path / "summary.json"}, [], tmp_path / "tables", {})
