"""The take-up curves' table and figure (analysis/comparisons/curve_table.py, analysis/report/beta_curve_plot.py): a
shift built into the rates recovered and read over the population of blocks, the fixed-block fit beside it, the table's
rows, the cells' expected shares, and a figure that draws the population fit's curves, never a staircase."""

import math

import numpy as np
import pandas as pd
import pytest

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.comparisons.curve_table import cells_table, shift_fit, shift_table
from experiments.synthetic_sequences.analysis.statistics import beta_curves
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves, read_shift
from experiments.synthetic_sequences.arms import TOOK_UP
from tests.test_beta_curves import BETAS


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


def test_a_shift_built_into_the_rates_is_recovered_and_read():
    """Sum at each beta takes up as mean does at twice that beta (one step of the grid): k = 2, the same slope."""
    mean = {beta: expit(-2.0 * math.log(beta / 0.04)) for beta in BETAS}
    rates = {(beta, "mean"): mean[beta] for beta in BETAS}
    rates |= {(beta, "sum"): expit(-2.0 * math.log(2 * beta / 0.04)) for beta in BETAS}
    row = shift_fit(cell_runs(rates, 200))
    assert row["k"] == pytest.approx(2.0, rel=0.05) and row["ci_low"] > 1.5 and row["ci_high"] < 2.7
    assert row["reading"] == "a shift" and row["parallel_p"] > 0.2 and row["fit_p"] > 0.2
    # the two blocks hold the same rates: they cannot disagree, and the fixed-block fit reads what the population's does
    assert row["sd_mode"] < 1e-3 and row["sd_mode_low"] == 0.0 and row["sd_mode_p"] == 1.0
    assert row["fixed_k"] == pytest.approx(row["k"], rel=1e-3) and row["fixed_low"] == pytest.approx(row["ci_low"], rel=1e-2)


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


def test_the_table_reads_main_families_with_both_modes_at_two_betas_or_more():
    runs = pilot(np.random.default_rng(2), 0.0, blocks=4, seeds=2, betas=BETAS).assign(family="f", term="raw", alpha=0.0)
    control = runs[runs["mode"] == "mean"].assign(family="f-scale", controls="scale")
    one_beta = runs[runs.beta == BETAS[0]].assign(term="dist")
    mean_only = runs[runs["mode"] == "mean"].assign(term="tokcc")
    table = shift_table(pd.concat([runs, control, one_beta, mean_only]), tokens=6.57)
    assert list(zip(table.family, table.term, strict=True)) == [("f", "raw")]
    (row,) = table.to_dict("records")
    assert row["runs"] == len(runs) and row["betas"] == len(BETAS) and row["predicted_k"] == pytest.approx(1 / 6.57)
    assert row["against_prediction"] != "-" and row["interval"] == "population profile likelihood" and row["blocks"] == 4


def test_the_figure_draws_a_panel_per_row_with_k_and_the_reading_in_its_title(monkeypatch, tmp_path):
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

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
        assert title.startswith(f"f {row['term']} a=0\n") and f": {row['reading']}\nparallelism p" in title
        assert f"k = {row['k']:.2g} [{row['ci_low']:.2g}, {row['ci_high']:.2g}]" in title
    raw_panel = drawn.axes[[row["term"] for row in table.to_dict("records")].index("raw")]
    legend = {text.get_text() for text in raw_panel.get_legend().get_texts()}
    assert legend == {"mean", "sum", "mean: 80% of blocks", "sum: 80% of blocks", "scale"}
    assert "No (family, term) has mean and sum runs" in empty.axes[0].texts[0].get_text()


def test_the_cli_prints_the_table_and_draws_the_figure_with_raws_scale_prediction(tmp_path, capsys):
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

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


def test_sum_at_its_ceiling_at_every_beta_leaves_k_open_below_and_bounded_above():
    """Raw's curves far apart on a grid centred on mean's cliff: every sum run takes up, so nothing bounds how far left
    sum's curve lies (the separated fit puts log k near -11, beyond the search), but mean's curve bounds it above."""
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


def test_a_run_whose_fixed_block_fit_separates_draws_the_population_fits_curve_at_each_plotted_beta(monkeypatch, tmp_path):
    """Four blocks of 2 seeds a beta on a steep curve: with a free offset per block, each block's runs split cleanly
    along beta and the fixed-block slope runs off (a staircase once averaged over blocks); the population fit shares
    its slope over blocks. Each mode's solid line is expit(a + b log beta + c s) at every plotted beta, by hand."""
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot

    figures = []
    monkeypatch.setattr(beta_curve_plot, "save", lambda fig, path: figures.append(fig))
    runs = pilot(np.random.default_rng(19), math.log(0.5), blocks=4, seeds=2, betas=BETAS, slope=-3.0, block_sd=1.5)
    runs = runs.assign(family="f", term="tokcc", alpha=0.0)
    assert abs(beta_curves.additive(Curves.of(runs)).params[-2]) > 30  # separated: the slope ran off
    table = shift_table(runs)
    (row,) = table.to_dict("records")
    assert -10 < row["slope"] < -3
    beta_curve_plot.beta_curves_figure(runs, table, {}, tmp_path / "beta_curves.png")
    (ax,) = [ax for ax in figures[0].axes if ax.get_title()]
    solid = [line for line in ax.get_lines() if line.get_linestyle() == "-" and len(line.get_xdata()) > len(BETAS)]
    assert len(solid) == 2
    for is_sum, line in enumerate(solid):
        betas, drawn = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        logits = row["intercept"] + row["slope"] * np.log(betas) + row["mode_effect"] * is_sum
        assert np.allclose(drawn, 1 / (1 + np.exp(-logits)), rtol=1e-12, atol=1e-15)
        assert len(np.unique(np.round(drawn[(drawn > 0.05) & (drawn < 0.95)], 6))) >= 10  # a curve, not a step


def test_under_a_curve_design_the_table_carries_its_stops_and_each_panel_titles_the_designs_answer(monkeypatch, tmp_path):
    """The 95% reading of every run and the design's reading at its stopping look may differ; the figure says the
    design's, as the verdict's design table does. A curve the looks never read keeps the 95% title."""
    from experiments.synthetic_sequences.analysis.report import beta_curve_plot
    from experiments.synthetic_sequences.sequential.curve_looks import curve_stops

    figures = []
    monkeypatch.setattr(beta_curve_plot, "save", lambda fig, path: figures.append(fig))
    rng = np.random.default_rng(4)
    runs = pd.concat(
        [pilot(rng, math.log(2.0), blocks=4, seeds=2, betas=BETAS).assign(family="f", term=term, alpha=0.0) for term in ("raw", "dist")]
    )
    decision = {"decision": "precise", "look": 4, "runs": 136, "alpha": 0.0213, "reading": "cannot be resolved"}
    decision |= {"log_k": math.log(1.2), "log_low": math.log(0.99), "log_high": math.log(1.51)}
    looks = [{"groups": []}, {"groups": [{"family": "f", "term": "raw", "alpha": 0, "decisions": {"curve": decision}}]}]
    table = shift_table(runs, design_stops=curve_stops(looks))
    design_columns = [column for column in table.columns if column.startswith("design_")]
    assert list(table.term) == ["dist", "raw"] and list(table.columns) == [*shift_table(runs).columns, *design_columns]
    assert len(design_columns) == 8
    raw, dist = table.set_index("term").loc["raw"], table.set_index("term").loc["dist"]
    assert raw.design_stop == "precise" and raw.design_look == 4 and raw.design_log_high == pytest.approx(math.log(1.51))
    assert dist[design_columns].isna().all()
    beta_curve_plot.beta_curves_figure(runs, table, {}, tmp_path / "beta_curves.png")
    dist_title, raw_title = (ax.get_title() for ax in figures[0].axes if ax.get_title())
    assert raw_title.startswith("f raw a=0\nk = 1.2 [0.99, 1.51] at the look's level: cannot be resolved\nprecise at look 4, 136 runs\n")
    assert f"k = {dist.k:.2g} [{dist.ci_low:.2g}, {dist.ci_high:.2g}]: {dist.reading}\nparallelism p" in dist_title
    assert curve_stops([]) == []


def test_the_runs_tables_csv_alone_refits_each_curves_k(tmp_path):
    """What a colleague who is sent a findings folder does: refit every curve from runs.csv, the tables' one row per run
    (written by tables.write_table, as aggregation writes it), with nothing else. A run left out (a beta only one mode
    ran, as a curve design's later stages place) would move k; the CSV's floats must not."""
    from experiments.synthetic_sequences.analysis.tables import write_table

    runs = pilot(np.random.default_rng(5), math.log(1.5), blocks=6, seeds=2, betas=BETAS).assign(family="f", term="dist", alpha=0.0)
    placed = pilot(np.random.default_rng(6), math.log(1.5), blocks=2, seeds=2, betas=BETAS[2:4]).assign(family="f", term="dist", alpha=0.0)
    staged = pd.concat([runs, placed[placed["mode"] == "sum"].assign(reference=placed.reference + 6)], ignore_index=True)
    write_table(staged, tmp_path / "runs", formats=("csv",))
    table, refit = shift_table(staged), shift_table(pd.read_csv(tmp_path / "runs.csv"))
    assert math.isfinite(table.k[0]) and refit.k[0] == pytest.approx(table.k[0], rel=1e-9)
    assert refit.runs[0] == len(staged) and (refit.ci_low[0], refit.ci_high[0]) == pytest.approx(
        (table.ci_low[0], table.ci_high[0]), rel=1e-9
    )
    assert shift_table(runs).k[0] != pytest.approx(table.k[0], rel=1e-6)  # the sum-only runs count


def test_each_run_carries_the_stage_of_the_first_look_that_read_it():
    """A curve design's runs table (tables.staged_runs): a stage's runs are first read by its own look, and a later look
    reads them again; the column sits beside the seed, the rest of the table as it was."""
    from experiments.synthetic_sequences.analysis.tables import staged_runs
    from experiments.synthetic_sequences.run_layout import run_path

    rows = [("f", 101, "dist", mode, 0.0, 0, beta) for mode in ("mean", "sum") for beta in (0.1, 0.2)]
    rows += [("f", 102, "dist", "sum", 0.0, 0, 0.12)]
    runs = pd.DataFrame(rows, columns=["family", "reference", "term", "mode", "alpha", "seed", "beta"])
    runs = runs.assign(key_beta=runs.beta.map(lambda beta: f"{beta:g}"), took_up=1.0)
    paths = [run_path(family, block, term, mode, alpha, seed, beta=beta) for family, block, term, mode, alpha, seed, beta in rows]
    looks = [{"look": 1, "runs_read": dict.fromkeys(paths[:4], "")}, {"look": 2, "runs_read": dict.fromkeys(paths, "")}]
    staged = staged_runs(runs, looks)
    assert list(staged.stage) == [1, 1, 1, 1, 2] and list(staged.columns).index("stage") == list(staged.columns).index("seed") + 1
    assert staged.drop(columns="stage").equals(runs)
