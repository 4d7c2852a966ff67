"""The verdict rule on constructed run tables whose answer is known."""

import math

import pandas as pd
import pytest

from experiments.synthetic_sequences.disentangled.contrasts import contrast_table
from experiments.synthetic_sequences.disentangled.verdict import verdict_markdown, verdict_table

CONTROL_OF = {"main-scale": "main", "main-balance": "main"}
ARMS = {"mean": ("main", "none", "mean"), "sum": ("main", "none", "sum"), "scale": ("main-scale", "scale", "mean")}
ARMS["balance"] = ("main-balance", "balance", "sum")


def table(values: dict[str, list[float]], converged: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """Runs of every arm in `values` ({arm: I(x;z) per seed}); NMI is I(x;z) / 2 so both metrics carry the same story."""
    rows = []
    for arm, per_seed in values.items():
        family, controls, mode = ARMS[arm]
        for seed, value in enumerate(per_seed):
            rows.append(
                {
                    "family": family,
                    "model": "shared_discrete",
                    "controls": controls,
                    "term": "raw",
                    "mode": mode,
                    "alpha": 0.0,
                    "seed": seed,
                    "mutual_information": value,
                    "nmi": value / 2,
                    "converged": (converged or {}).get(arm, [1.0] * len(per_seed))[seed],
                }
            )
    return pd.DataFrame(rows)


def verdict(runs: pd.DataFrame, metric: str = "mutual_information") -> dict:
    rows = verdict_table(runs, contrast_table(runs, CONTROL_OF), CONTROL_OF)
    return rows[rows.metric == metric].iloc[0].to_dict()


MEAN = [0.01, 0.03, 0.02]
SUM = [0.90, 0.97, 0.93]


def test_sum_equal_to_the_scale_control_is_accounted_for_by_scale():
    row = verdict(table({"mean": MEAN, "sum": SUM, "scale": SUM, "balance": [0.02, 0.02, 0.04]}))
    assert row["effect"] == "higher"
    assert row["accounted_for"] == "scale"
    assert "Accounted for by: scale" in row["verdict"] and "sum - balance" in row["verdict"]


def test_sum_equal_to_the_balance_control_is_accounted_for_by_balance():
    row = verdict(table({"mean": MEAN, "sum": SUM, "scale": [0.02, 0.01, 0.05], "balance": [0.91, 0.96, 0.94]}))
    assert (row["effect"], row["accounted_for"]) == ("higher", "balance")


def test_both_controls_reproducing_sum_read_both_and_neither_reads_neither():
    assert verdict(table({"mean": MEAN, "sum": SUM, "scale": SUM, "balance": SUM}))["accounted_for"] == "both"
    neither = verdict(table({"mean": MEAN, "sum": SUM, "scale": [0.41, 0.45, 0.43], "balance": [0.40, 0.46, 0.44]}))
    assert neither["accounted_for"] == "neither"


def test_identical_runs_read_no_change():
    same = [0.31, 0.52, 0.44]
    row = verdict(table({"mean": same, "sum": same, "scale": same, "balance": same}))
    assert row["effect"] == "no change"
    assert row["accounted_for"] == "-" and math.isnan(row["seeds_to_resolve"])
    assert "does not change I(x;z)" in row["verdict"]


def test_two_seeds_with_a_large_sd_read_inconclusive_with_the_seeds_that_would_resolve_it():
    row = verdict(table({"mean": [0.0, 0.0], "sum": [0.9, 0.1]}))
    assert row["effect"] == "inconclusive" and row["n"] == 2
    assert row["seeds_to_resolve"] > 2 and math.isfinite(row["seeds_to_resolve"])
    assert f"{int(row['seeds_to_resolve'])} seeds would resolve it" in row["verdict"]


def test_an_unclear_control_makes_the_attribution_inconclusive():
    row = verdict(table({"mean": MEAN, "sum": SUM, "scale": [0.1, 0.9, 0.5], "balance": [0.02, 0.02, 0.04]}))
    assert row["effect"] == "higher" and row["accounted_for"] == "inconclusive"
    assert row["seeds_to_resolve"] > 3


def test_without_controls_the_verdict_says_so():
    row = verdict(table({"mean": MEAN, "sum": SUM}))
    assert row["accounted_for"] == "no controls run" and "cannot be told apart" in row["verdict"]


def test_a_verdict_resting_on_unconverged_runs_says_so():
    runs = table({"mean": MEAN, "sum": SUM, "scale": SUM, "balance": MEAN}, converged={"sum": [1.0, 0.0, 1.0]})
    row = verdict(runs)
    assert row["unconverged_runs"] == 1 and row["runs"] == 12
    assert "Rests on 1 of 12 runs not flagged converged" in row["verdict"]


def test_both_metrics_get_a_verdict_and_the_markdown_states_the_rule():
    runs = table({"mean": MEAN, "sum": SUM, "scale": SUM, "balance": MEAN})
    rows = verdict_table(runs, contrast_table(runs, CONTROL_OF), CONTROL_OF)
    assert set(rows.metric) == {"mutual_information", "nmi"}
    assert not rows.drop(columns="seeds_to_resolve").isna().any().any()
    text = verdict_markdown(rows)
    assert "inconclusive" in text and "accounts" in text and text.count("\n- ") == 2


@pytest.mark.parametrize("arms", [{"sum": SUM}, {"mean": MEAN, "scale": SUM}])
def test_no_verdict_without_a_mean_and_a_sum_run(arms):
    runs = table(arms)
    assert verdict_table(runs, contrast_table(runs, CONTROL_OF), CONTROL_OF).empty
