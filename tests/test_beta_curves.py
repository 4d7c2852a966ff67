"""The shift factor k between mean's and sum's take-up curves over beta (analysis/statistics/beta_curves.py): the fits against a
second implementation, the profile interval against a scan of its own definition, a shift built into the data
recovered, and each reading's rule."""

import math

import numpy as np
import pandas as pd
import pytest

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.statistics import beta_curves
from experiments.synthetic_sequences.analysis.statistics.beta_curves import (
    Curves,
    additive,
    against_prediction,
    cells_table,
    read_shift,
    reading,
    runs_to_resolve,
    shift_fit,
    shift_loglik,
    shift_table,
)
from experiments.synthetic_sequences.arms import TOOK_UP

BETAS = np.array([0.01, 0.02, 0.04, 0.08, 0.16])


def cell_runs(rates: dict[tuple[float, str], float], runs_per_cell: int, blocks: int = 2) -> pd.DataFrame:
    """Runs whose take-up in each (beta, mode) cell is `rate` of `runs_per_cell`, split evenly over the blocks."""
    rows = []
    for (beta, mode), rate in rates.items():
        took = round(rate * runs_per_cell)
        for index in range(runs_per_cell):
            rows.append({"reference": index % blocks, "beta": beta, "mode": mode, "controls": "none", TOOK_UP: float(index < took)})
    return pd.DataFrame(rows)


def expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


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


def test_a_shift_built_into_the_rates_is_recovered_and_read():
    """Sum at each beta takes up as mean does at twice that beta (one step of the grid): k = 2, the same slope."""
    mean = {beta: expit(-2.0 * math.log(beta / 0.04)) for beta in BETAS}
    rates = {(beta, "mean"): mean[beta] for beta in BETAS}
    rates |= {(beta, "sum"): expit(-2.0 * math.log(2 * beta / 0.04)) for beta in BETAS}
    row = shift_fit(cell_runs(rates, 200))
    assert row["k"] == pytest.approx(2.0, rel=0.05) and row["ci_low"] > 1.5 and row["ci_high"] < 2.7
    assert row["reading"] == "a shift" and row["parallel_p"] > 0.2 and row["fit_p"] > 0.2
    assert row["bootstrap_low"] <= row["k"] <= row["bootstrap_high"]


def test_swapping_the_modes_inverts_k_and_mirrors_its_interval():
    runs = pilot(np.random.default_rng(11), math.log(1.5), blocks=4, seeds=3, betas=BETAS)
    swapped = runs.assign(mode=runs["mode"].map({"mean": "sum", "sum": "mean"}))
    forward, backward = read_shift(Curves.of(runs)), read_shift(Curves.of(swapped))
    assert backward.log_k == pytest.approx(-forward.log_k, abs=1e-6)
    assert (backward.log_low, backward.log_high) == pytest.approx((-forward.log_high, -forward.log_low), abs=2e-3)


def test_a_curve_that_changes_slope_reads_beyond_scale():
    rates = {(beta, "mean"): expit(-1.0 * math.log(beta / 0.04)) for beta in BETAS}
    rates |= {(beta, "sum"): expit(-4.0 * math.log(beta / 0.04)) for beta in BETAS}
    row = shift_fit(cell_runs(rates, 200))
    assert row["parallel_p"] < 1e-6 and row["reading"] == "beyond scale" and row["against_prediction"] == "-"


def test_flat_take_up_gives_no_k_and_an_open_interval():
    rates = {(beta, mode): 0.5 for beta in BETAS for mode in ("mean", "sum")}
    row = shift_fit(cell_runs(rates, 8))
    assert math.isnan(row["k"]) and (row["ci_low"], row["ci_high"]) == (0.0, math.inf)
    assert row["reading"] == "cannot be resolved" and math.isnan(row["runs_to_resolve"])


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


def test_the_table_reads_main_families_with_both_modes_at_two_betas_or_more(monkeypatch):
    monkeypatch.setattr(beta_curves, "BOOTSTRAP_DRAWS", 20)
    runs = pilot(np.random.default_rng(2), 0.0, blocks=4, seeds=2, betas=BETAS).assign(family="f", term="raw", alpha=0.0)
    control = runs[runs["mode"] == "mean"].assign(family="f-scale", controls="scale")
    one_beta = runs[runs.beta == BETAS[0]].assign(term="dist")
    mean_only = runs[runs["mode"] == "mean"].assign(term="tokcc")
    table = shift_table(pd.concat([runs, control, one_beta, mean_only]), tokens=6.57)
    assert list(zip(table.family, table.term, strict=True)) == [("f", "raw")]
    (row,) = table.to_dict("records")
    assert row["runs"] == len(runs) and row["betas"] == len(BETAS) and row["predicted_k"] == pytest.approx(1 / 6.57)
    assert row["against_prediction"] != "-" and row["interval"] == "profile likelihood"


def test_the_figure_draws_a_panel_per_row_with_k_and_the_reading_in_its_title(monkeypatch, tmp_path):
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

    monkeypatch.setattr(beta_curves, "BOOTSTRAP_DRAWS", 20)
    figures = []
    monkeypatch.setattr(beta_curve_plot, "save", lambda fig, path: figures.append(fig))
    rng = np.random.default_rng(4)
    dist = pilot(rng, 0.0, blocks=4, seeds=2, betas=BETAS).assign(family="f", term="dist", alpha=0.0)
    raw = pilot(rng, math.log(2.0), blocks=4, seeds=2, betas=BETAS).assign(family="f", term="raw", alpha=0.0)
    scale = raw[(raw.beta == BETAS[2]) & (raw["mode"] == "mean")].assign(family="f-scale", controls="scale")
    runs = pd.concat([dist, raw, scale])
    table = shift_table(runs)
    beta_curve_plot.beta_curves_figure(runs, table, {"f-scale": "f"}, tmp_path / "beta_curves.png")
    beta_curve_plot.beta_curves_figure(runs, table.iloc[:0], {}, tmp_path / "none.png")
    drawn, empty = figures
    titles = [ax.get_title() for ax in drawn.axes if ax.get_title()]
    for title, row in zip(titles, table.to_dict("records"), strict=True):
        assert title.startswith(f"f {row['term']} a=0\n") and title.endswith(f": {row['reading']}")
        assert f"k = {row['k']:.2g} [{row['ci_low']:.2g}, {row['ci_high']:.2g}]" in title
    raw_panel = drawn.axes[[row["term"] for row in table.to_dict("records")].index("raw")]
    assert {text.get_text() for text in raw_panel.get_legend().get_texts()} == {"mean", "sum", "mean at k x beta", "scale"}
    assert "No (family, term) has mean and sum runs" in empty.axes[0].texts[0].get_text()


def test_the_cli_prints_the_table_and_draws_the_figure_with_raws_scale_prediction(tmp_path, monkeypatch, capsys):
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

    monkeypatch.setattr(beta_curves, "BOOTSTRAP_DRAWS", 20)
    rng = np.random.default_rng(6)
    raw = pilot(rng, math.log(0.5), blocks=4, seeds=2, betas=BETAS).assign(family="f", term="raw", alpha=0.0)
    dist = pilot(rng, 0.0, blocks=4, seeds=2, betas=BETAS).assign(family="f", term="dist", alpha=0.0)
    pd.concat([raw, dist]).to_parquet(tmp_path / "runs.parquet")
    beta_curve_plot.main([str(tmp_path / "runs.parquet"), "--tokens", "4", "--plot", str(tmp_path / "beta_curves.png")])
    lines = [[cell.strip() for cell in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()]
    rows = {row[lines[0].index("term")]: dict(zip(lines[0], row, strict=True)) for row in lines[2:]}
    assert set(rows) == {"raw", "dist"}
    assert rows["raw"]["predicted_k"] == "0.25" and rows["dist"]["predicted_k"] == "nan"  # normalised: no prediction
    assert (tmp_path / "beta_curves.png").read_bytes()[:4] == b"\x89PNG"
    pd.concat([raw, dist])[lambda runs: runs.beta == BETAS[0]].to_parquet(tmp_path / "one_beta.parquet")
    beta_curve_plot.main([str(tmp_path / "one_beta.parquet")])
    assert "no (family, term) ran both modes at two betas or more" in capsys.readouterr().out


def test_sum_at_its_ceiling_at_every_beta_leaves_k_open_below_and_bounded_above(monkeypatch):
    """Raw's curves far apart on a grid centred on mean's cliff: every sum run takes up, so nothing bounds how far left
    sum's curve lies (the separated fit puts log k near -11, beyond the search), but mean's curve bounds it above."""
    monkeypatch.setattr(beta_curves, "BOOTSTRAP_DRAWS", 20)
    rates = {(beta, "mean"): expit(-2.0 * math.log(beta / 0.04)) for beta in BETAS} | {(beta, "sum"): 1.0 for beta in BETAS}
    runs = cell_runs(rates, 8)
    assert read_shift(Curves.of(runs)).log_k < -beta_curves.LOG_K_LIMIT
    row = shift_fit(runs, predicted=0.01)
    assert row["ci_low"] == 0.0 and 0.05 < row["ci_high"] < 0.5 and row["reading"] == "a shift"
    assert row["against_prediction"] == "cannot be resolved"  # the open interval holds 0.01, and says nothing of it
    assert shift_fit(runs, predicted=1.0)["against_prediction"] == "a larger shift than the scale predicts"


def test_each_cells_expected_share_comes_from_the_shift_models_fit_and_sums_to_each_modes_count():
    """A binomial GLM with canonical link meets its score equations: over the runs of each mode, and of each block,
    the fitted probabilities sum to the events observed. So the cells' expected take-ups, summed over a mode's betas,
    give back that mode's count, whatever the shape of the curves."""
    rng = np.random.default_rng(3)
    runs = pilot(rng, math.log(2.0), blocks=4, seeds=2, betas=BETAS).assign(family="f", term="raw", alpha=0.0)
    control = runs.head(4).assign(family="f-scale", controls="scale")
    cells = cells_table(pd.concat([runs, control]))
    assert set(cells.family) == {"f"} and len(cells) == 2 * len(BETAS) and set(cells.runs) == {8}
    observed = runs.groupby(["beta", "mode"])[TOOK_UP].sum()
    assert cells.set_index(["beta", "mode"]).took_up.to_dict() == observed.astype(int).to_dict()
    expected = (cells.fitted * cells.runs).groupby(cells["mode"]).sum()
    assert expected.to_dict() == pytest.approx(runs.groupby("mode")[TOOK_UP].sum().to_dict(), abs=1e-6)
    assert cells_table(runs[runs.beta == BETAS[0]]).empty and list(cells_table(runs.iloc[:0]).columns) == list(cells.columns)


def test_the_plot_reads_a_given_shift_table_and_titles_a_curve_without_k(tmp_path):
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

    flat = cell_runs({(beta, mode): 0.0 for beta in BETAS for mode in ("mean", "sum")}, 4).assign(family="f", term="dist", alpha=0.0)
    flat.to_parquet(tmp_path / "runs.parquet")
    table = shift_table(flat)
    assert math.isnan(table.k.iat[0]) and table.reading.iat[0] == "cannot be resolved"
    assert beta_curve_plot.title(table.iloc[0].to_dict()) == "f dist a=0\nno k: cannot be resolved"
    table.to_parquet(tmp_path / "beta_curves.parquet")
    beta_curve_plot.main(
        [str(tmp_path / "runs.parquet"), "--table", str(tmp_path / "beta_curves.parquet"), "--plot", str(tmp_path / "b.png")]
    )
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
