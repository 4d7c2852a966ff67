"""The operating-point rule of analysis/comparisons/calibration.py, on take-up counts whose choice is known by hand."""

import math

import pandas as pd
import pytest

from experiments.synthetic_sequences.analysis.comparisons.calibration import calibration_table, choose_beta, main


@pytest.mark.parametrize(
    ("points", "beta", "how"),
    [
        ([(0.02, 4, 4), (0.06, 2, 4), (0.2, 0, 4)], 0.06, "measured"),  # 0.5 lies in the band
        ([(0.02, 2, 5), (0.06, 3, 5), (0.2, 0, 5)], 0.02, "measured"),  # 0.4 beats 0.6
        ([(0.02, 3, 6), (0.06, 3, 10), (0.2, 0, 4)], 0.02, "measured"),  # 0.5 and 0.3 both 0.1 from 0.4: the smaller beta
        ([(0.02, 4, 4), (0.06, 4, 4), (0.2, 0, 4)], math.sqrt(0.06 * 0.2), "between"),
        ([(0.2, 0, 4), (0.02, 4, 4)], math.sqrt(0.02 * 0.2), "between"),  # in any order
        ([(0.02, 4, 4), (0.2, 3, 4)], math.nan, "ceiling"),
        ([(0.02, 0, 4), (0.2, 0, 4)], math.nan, "floor"),
        ([(0.02, 4, 4), (0.06, 0, 4), (0.2, 4, 4)], math.nan, "unclear"),  # falls, then rises across the band
        ([(0.02, 0, 4), (0.06, 2, 4), (0.2, 4, 4)], math.nan, "unclear"),  # rises through the band: 2/4 is not a reading
        ([(0.02, 0, 4), (0.2, 4, 4)], math.nan, "unclear"),  # rises with beta
        ([(0.02, 3, 4), (0.06, 4, 4), (0.2, 2, 4)], 0.2, "measured"),  # a rise above the band is noise at 4 runs
    ],
)
def test_the_rule_picks_the_beta_a_hand_reading_does(points, beta, how):
    chosen, reason = choose_beta(points)
    assert reason == how and (chosen == pytest.approx(beta) if not math.isnan(beta) else math.isnan(chosen))


def test_no_grid_points_is_refused_by_name():
    with pytest.raises(ValueError, match="no grid points"):
        choose_beta([])


def runs_at(model, term, beta, took_up, runs, mode="mean", controls="none"):
    return [
        {"model": model, "term": term, "alpha": 0.0, "beta": beta, "mode": mode, "controls": controls, "took_up": float(i < took_up)}
        for i in range(runs)
    ]


def test_the_table_reads_only_mean_arms_of_main_families_and_prints(tmp_path, capsys):
    rows = runs_at("continuous", "dist", 0.02, 2, 4) + runs_at("continuous", "dist", 0.2, 0, 4)
    rows += runs_at("continuous", "dist", 0.02, 4, 4, mode="sum") + runs_at("continuous", "dist", 0.2, 4, 4, controls="scale")
    rows += runs_at("shared_discrete", "raw", 0.06, 4, 4)
    table = calibration_table(pd.DataFrame(rows))
    assert table[["model", "term", "take-up by beta", "how"]].values.tolist() == [
        ["continuous", "dist", "0.02: 2/4, 0.2: 0/4", "measured"],
        ["shared_discrete", "raw", "0.06: 4/4", "ceiling"],
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "runs.parquet")
    main([str(tmp_path / "runs.parquet")])
    assert "0.02: 2/4, 0.2: 0/4" in capsys.readouterr().out
