"""The metric registry is the one list of metric names: every view reads registered metrics, every metric is read."""

import pytest

from experiments.synthetic_sequences.analysis.comparisons import contrasts
from experiments.synthetic_sequences.analysis.records import run_files
from experiments.synthetic_sequences.analysis.report import verdict
from experiments.synthetic_sequences.arms import TOOK_UP
from experiments.synthetic_sequences.metrics import METRICS, REGISTRY, VIEWS, Metric, margins, uses, view


def test_every_view_reads_registered_metrics_once_and_every_metric_is_read():
    for name, names in VIEWS.items():
        assert len(set(names)) == len(names), name
        assert set(names) <= set(METRICS), f"{name} reads unregistered metrics {sorted(set(names) - set(METRICS))}"
    assert len(METRICS) == len(REGISTRY)  # no name registered twice
    assert [metric.name for metric in REGISTRY if not uses(metric.name)] == []


def test_uses_is_the_views_read_the_other_way():
    assert uses("strategy_information") == (
        "headline",
        "paired_contrasts",
        "curves",
        "curve_panels",
        "takeup_strips",
        "separation_panels",
        "contrast_panels",
        "verdict",
    )
    assert uses("kappa_max") == ("train_diagnostics", "batch_extremes")


def test_every_compared_metric_has_its_margin_and_the_analysis_reads_the_registry():
    compared = {TOOK_UP, *view("paired_contrasts"), *view("secondary_contrasts")}
    assert compared == set(margins())
    assert contrasts.MARGINS == {"took_up": 0.3} | dict.fromkeys(sorted(compared - {"took_up"}), 0.05)
    assert [endpoint.metric for endpoint in verdict.ENDPOINTS] == list(view("verdict"))
    assert run_files.RANGES["strategy_information"] == (0.0, 1.0) and run_files.RANGES["ami"] == (-1.0, 1.0)


def test_a_training_diagnostic_says_how_it_reduces_over_batches():
    assert {name: METRICS[name].over_batches for name in view("train_diagnostics")} == {
        "tokens_mean": "mean",
        "tokens_min": "min",
        "tokens_max": "max",
        "base_aggregate_min": "min",
        "kappa_min": "min",
        "kappa_max": "max",
        "eta_min": "min",
        "eta_max": "max",
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"direction": "up"}, "direction 'up' is not one of higher, lower, neither"), ({"over_batches": "sum"}, "over_batches 'sum'")],
)
def test_a_metric_with_an_unknown_direction_or_reduction_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        Metric(**{"name": "x", "label": "x", "unit": "nats", "direction": "higher", **changes})
