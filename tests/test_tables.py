import numpy as np
import pandas as pd
import pytest

from experiments.synthetic_sequences.disentangled.plots import make_plots
from experiments.synthetic_sequences.disentangled.tables import aggregate_table, bootstrap_ci, mean_vs_sum_table


def run(family, controls, term, mode, seed, nmi, mi=0.5):
    return {
        "family": family,
        "model": "shared_discrete",
        "controls": controls,
        "term": term,
        "mode": mode,
        "alpha": 0.0,
        "seed": seed,
        "beta": 0.1,
        "reconstruction_scale": 1.0,
        "nmi": nmi,
        "mutual_information": mi,
    }


@pytest.fixture
def runs():
    rows = []
    for seed, (mean_nmi, sum_nmi) in enumerate([(0.1, 0.4), (0.2, 0.3), (0.3, 0.9)]):
        rows.append(run("main", "none", "raw", "mean", seed, mean_nmi))
        rows.append(run("main", "none", "raw", "sum", seed, sum_nmi))
        rows.append(run("main-scale", "scale", "raw", "mean", seed, mean_nmi + 0.05))
        rows.append(run("main-balance", "balance", "raw", "sum", seed, mean_nmi - 0.1))
    rows.append(run("main", "none", "dist", "sum", 0, 0.5))  # unpaired: no mean partner
    return pd.DataFrame(rows)


def test_pairs_are_matched_by_seed_with_controls_beside(runs):
    table = mean_vs_sum_table(runs, {"main-scale": "main", "main-balance": "main"})
    nmi = table[(table.term == "raw") & (table.metric == "nmi")].iloc[0]
    assert nmi["sum-mean:delta"] == pytest.approx(np.mean([0.3, 0.1, 0.6]))
    assert nmi["scale-mean:delta"] == pytest.approx(0.05)
    assert nmi["balance-mean:delta"] == pytest.approx(-0.1)
    assert nmi["sum-mean:ci_low"] <= nmi["sum-mean:delta"] <= nmi["sum-mean:ci_high"]
    assert "dist" not in set(table.term)  # a term without both modes yields no pair


def test_aggregate_reports_mean_sd_and_seed_count(runs):
    table = aggregate_table(runs)
    row = table[(table.family == "main") & (table.term == "raw") & (table["mode"] == "sum")].iloc[0]
    assert row["nmi_mean"] == pytest.approx(np.mean([0.4, 0.3, 0.9]))
    assert row["nmi_sd"] == pytest.approx(np.std([0.4, 0.3, 0.9], ddof=1))
    assert row["seeds"] == 3


def test_bootstrap_ci_brackets_the_mean_and_needs_two_seeds():
    low, high = bootstrap_ci(np.array([0.1, 0.2, 0.3, 0.4]))
    assert 0.1 <= low < 0.25 < high <= 0.4
    assert all(np.isnan(bootstrap_ci(np.array([0.3]))))
    assert bootstrap_ci(np.array([0.1, 0.5])) == bootstrap_ci(np.array([0.1, 0.5]))  # seeded


def test_a_single_seed_keeps_the_ci_columns_and_still_plots(runs, tmp_path):
    one_seed = runs[runs.seed == 0]
    table = mean_vs_sum_table(one_seed, {"main-scale": "main", "main-balance": "main"})
    assert {"sum-mean:ci_low", "sum-mean:ci_high", "scale-mean:ci_low"} <= set(table.columns)
    assert table["sum-mean:ci_low"].isna().all()
    one_seed.to_parquet(tmp_path / "runs.parquet")
    table.to_parquet(tmp_path / "pairs.parquet")
    outputs = make_plots(tmp_path / "runs.parquet", tmp_path / "pairs.parquet", tmp_path / "plots")
    assert all(path.read_bytes()[:4] == b"\x89PNG" for path in outputs)
