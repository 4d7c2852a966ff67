import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from experiments.synthetic_sequences.analysis.comparisons.contrasts import contrast_table
from experiments.synthetic_sequences.analysis.report.plots import make_plots
from experiments.synthetic_sequences.analysis.statistics.inference import paired_seeds_needed, t_interval
from experiments.synthetic_sequences.analysis.tables import aggregate_table

CONTROL_OF = {"main-scale": "main", "main-balance": "main"}
T_975 = {1: 12.706204736174698, 2: 4.302652729911275, 3: 3.182446305284263}  # t(0.975, df) from a printed table


def run(family, controls, term, mode, seed, nmi, mi=0.5, converged=1.0):
    return {
        "family": family,
        "reference": 0,
        "numerics": "AVX2 kernels, a test CPU, 1 thread, float32, torch 2.13.0+cpu, eager, 1 seed per pass",
        "execution": "sequential, 2 seeds per process",
        "model": "shared_discrete",
        "controls": controls,
        "term": term,
        "mode": mode,
        "alpha": 0.0,
        "seed": seed,
        "beta": 0.1,
        "reconstruction_scale": 1.0,
        "nmi": nmi,
        "strategy_information": nmi / 2,
        "mutual_information": mi,
        "converged": converged,
        "took_up": 1.0,
        "onset_step": 300.0,
        "onset_observed": 1.0,
        "budget_step": 1500.0,
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


def test_paired_t_interval_matches_the_hand_formula():
    differences = [0.3, 0.1, 0.6]
    mean = sum(differences) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 2)
    half = T_975[2] * sd / math.sqrt(3)
    got = t_interval(np.array(differences))
    assert got == pytest.approx((mean, sd, mean - half, mean + half), rel=1e-9)


def test_no_interval_with_one_seed():
    mean, sd, low, high = t_interval(np.array([0.4]))
    assert mean == 0.4 and all(math.isnan(v) for v in (sd, low, high))


def test_contrasts_pair_by_seed_and_cover_both_controls(runs):
    table = contrast_table(runs, CONTROL_OF)
    nmi = table[(table.term == "raw") & (table.metric == "nmi") & (table.subset == "all")].set_index("comparison")
    assert set(nmi.index) == {"sum-mean", "scale-mean", "balance-mean", "sum-scale", "sum-balance"}
    assert nmi.loc["sum-mean", "estimate"] == pytest.approx(np.mean([0.3, 0.1, 0.6]))
    assert nmi.loc["scale-mean", "estimate"] == pytest.approx(0.05)
    assert nmi.loc["balance-mean", "estimate"] == pytest.approx(-0.1)
    assert nmi.loc["sum-scale", "estimate"] == pytest.approx(np.mean([0.25, 0.05, 0.55]))
    assert (nmi["n_a"] == 3).all() and (nmi["n_b"] == 3).all()
    assert nmi.loc["sum-mean", "ci_low"] < nmi.loc["sum-mean", "estimate"] < nmi.loc["sum-mean", "ci_high"]
    # NMI is a secondary reading: the paired t p, t = mean / (sd / sqrt(n)) on 2 degrees of freedom
    differences = [0.3, 0.1, 0.6]
    mean, sd = np.mean(differences), np.std(differences, ddof=1)
    assert (
        nmi.loc["sum-mean", "p"] == pytest.approx(2 * stats.t.sf(mean / (sd / math.sqrt(3)), 2))
        and nmi.loc["sum-mean", "test"] == "paired t"
    )
    # strategy information is an endpoint: the exact sign-flip p, every difference positive: 2 of the 2^3 sign patterns
    information = table[(table.metric == "strategy_information") & (table.subset == "all")].set_index("comparison")
    assert information.loc["sum-mean", "p"] == pytest.approx(2 / 8) and information.loc["sum-mean", "test"] == "sign-flip, exact"
    assert "dist" not in set(table.term)  # a term run in one mode only has nothing to pair


def test_contrasts_are_written_only_for_arms_that_were_run(runs):
    no_balance = runs[runs.family != "main-balance"]
    table = contrast_table(no_balance, {"main-scale": "main"})
    assert set(table.comparison) == {"sum-mean", "scale-mean", "sum-scale"}
    assert not table[["estimate", "n_a", "n_b"]].isna().any().any()


def test_a_seed_missing_from_one_arm_is_left_out_of_the_pair(runs):
    table = contrast_table(runs[~((runs.family == "main") & (runs["mode"] == "sum") & (runs.seed == 2))], CONTROL_OF)
    row = table[(table.comparison == "sum-mean") & (table.metric == "nmi") & (table.subset == "all")].iloc[0]
    assert row["n_a"] == 2 and row["estimate"] == pytest.approx(np.mean([0.3, 0.1]))


def test_unconverged_runs_are_counted_per_contrast(runs):
    runs.loc[(runs.family == "main") & (runs["mode"] == "sum") & (runs.seed == 1), "converged"] = 0.0
    table = contrast_table(runs, CONTROL_OF).set_index(["comparison", "metric", "subset"])
    assert table.loc[("sum-mean", "nmi", "all"), "unconverged_runs"] == 1
    assert table.loc[("sum-mean", "took_up", "all"), "unconverged_runs"] == 1
    assert table.loc[("scale-mean", "nmi", "all"), "unconverged_runs"] == 0


def test_paired_seeds_needed_is_the_power_or_the_equivalence_count_at_the_observed_values():
    # |delta| >= margin: 80% power of the paired t test at effect size 0.2 / 0.25 = 0.8 (noncentral t: power 0.790 with
    # 14 pairs, 0.821 with 15), and never fewer than the 6 pairs the sign-flip test needs to reach 0.05
    assert paired_seeds_needed(0.2, 0.25, margin=0.05) == 15
    assert paired_seeds_needed(1.0, 0.1, margin=0.05) == 6
    # |delta| < margin: fit inside +-margin, i.e. half-width < 0.05 - 0.01. n=3: 4.3027 * 0.02/sqrt(3) = 0.0497; n=4: 0.0318
    assert paired_seeds_needed(0.01, 0.02, margin=0.05) == 4
    assert paired_seeds_needed(0.3, 50.0, margin=0.05) == math.inf
    assert math.isnan(paired_seeds_needed(0.3, math.nan, margin=0.05))


def test_aggregate_reports_mean_sd_and_seed_count(runs):
    table = aggregate_table(runs)
    row = table[(table.family == "main") & (table.term == "raw") & (table["mode"] == "sum")].iloc[0]
    assert row["nmi_mean"] == pytest.approx(np.mean([0.4, 0.3, 0.9]))
    assert row["nmi_sd"] == pytest.approx(np.std([0.4, 0.3, 0.9], ddof=1))
    assert row["seeds"] == 3


def test_a_single_seed_still_tabulates_and_plots(runs, tmp_path):
    one_seed = runs[runs.seed == 0]
    table = contrast_table(one_seed, CONTROL_OF)
    paired = table[table.interval == "paired t"]
    assert (paired["n_a"] == 1).all() and paired["ci_low"].isna().all() and paired["estimate"].notna().all()
    curves = pd.DataFrame(
        [
            {
                **{k: r[k] for k in ("family", "controls", "term", "mode", "alpha", "seed")},
                "metric": metric,
                "step": step,
                "value": step / 10,
            }
            for r in one_seed.to_dict("records")
            for metric in ("mutual_information", "nmi")
            for step in (10, 20)
        ]
    )
    one_seed.to_parquet(tmp_path / "runs.parquet")
    table.to_parquet(tmp_path / "pairs.parquet")
    curves.to_parquet(tmp_path / "curves.parquet")
    outputs = make_plots(tmp_path / "runs.parquet", tmp_path / "pairs.parquet", tmp_path / "curves.parquet", tmp_path / "plots", CONTROL_OF)
    assert all(path.read_bytes()[:4] == b"\x89PNG" for path in outputs)


def test_the_forest_plot_labels_each_row_with_the_designs_decision_and_names_its_intervals_naive(runs, monkeypatch):
    """Under a sequential design (a cross-term table with decisions) each row says what the design decided; without
    one the labels are the rows alone."""
    from experiments.synthetic_sequences.analysis.report import contrast_plots as plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig))
    contrasts = contrast_table(runs, CONTROL_OF)
    plots.forest(contrasts, None, {("main", "raw", 0.0): "raises (look 1)"})
    plots.forest(contrasts, None)
    plots.forest(contrasts, None, term_labels={("main", "raw", 0.0): "raw (as the cross-term table names it)"})
    designed, fixed, labelled = ([label.get_text() for label in fig.axes[0].get_yticklabels()] for fig in figures)
    assert designed == ["main raw a=0\ndesign: raises (look 1)"] and fixed == ["main raw a=0"]
    assert labelled == ["main raw (as the cross-term table names it) a=0"]
    assert "(naive under the design)" in figures[0].axes[0].get_title() and "naive" not in figures[1].axes[0].get_title()


def test_the_forest_plots_panel_titles_do_not_overlap(runs, monkeypatch):
    """Each panel names its endpoint and its interval method; drawn side by side, no title runs into the next one's."""
    from experiments.synthetic_sequences.analysis.report import contrast_plots as plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig))
    contrasts = contrast_table(runs, CONTROL_OF)
    # the longest interval name contrasts.py writes, on the continuous endpoints, as a pilot with enough seeds has it
    continuous = contrasts.metric != "took_up"
    contrasts.loc[continuous, "interval"] = "paired t + two-level bootstrap"
    plots.forest(contrasts, None, {("main", "raw", 0.0): "raises (look 1)"})
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    assert len(boxes) == 3
    for left, right in itertools.pairwise(boxes):
        assert left.x1 < right.x0, (left, right)


def test_a_forest_panel_with_nothing_to_compare_says_so(runs, monkeypatch):
    """A row without an estimate in a panel (no seed took up in both arms, for magnitude) is labelled, not left blank."""
    from experiments.synthetic_sequences.analysis.report import contrast_plots as plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig))
    contrasts = contrast_table(runs, CONTROL_OF)
    magnitude = contrasts.metric == "mutual_information"
    contrasts.loc[magnitude, ["estimate", "ci_low", "ci_high"]] = np.nan
    plots.forest(contrasts, None)
    (fig,) = figures
    said = {index: [text.get_text() for text in ax.texts] for index, ax in enumerate(fig.axes)}
    assert said[1] == [plots.NOTHING_TO_COMPARE]
    assert plots.NOTHING_TO_COMPARE not in said[0] + said[2]


def test_a_forest_estimate_without_an_interval_says_so(runs, monkeypatch):
    """One seed pair gives an estimate but no interval: its point is labelled, not drawn as if it were exact."""
    from experiments.synthetic_sequences.analysis.report import contrast_plots as plots

    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig))
    contrasts = contrast_table(runs, CONTROL_OF)
    magnitude = contrasts.metric == "mutual_information"
    contrasts.loc[magnitude, ["ci_low", "ci_high"]] = np.nan
    plots.forest(contrasts, None)
    (fig,) = figures
    said = {index: [text.get_text() for text in ax.texts] for index, ax in enumerate(fig.axes)}
    assert [text.endswith(": no interval at this n") for text in said[1]] == [True]
    assert not any(text.endswith("no interval at this n") for text in said[0] + said[2])


def test_on_a_beta_axis_take_up_and_learning_curves_are_one_small_file_per_main_family_and_term(tmp_path, monkeypatch):
    """At config/curve.yaml's scale for one family (7 betas of raw, 5 of dist, 8 seeds in 4 blocks, a scale control
    at one beta), takeup and curves are drawn per (main family, term): each file holds only its term's betas, a
    control in its main family's file, and opens at 100% in at most 1 MB."""
    from experiments.synthetic_sequences.analysis.report import plots
    from experiments.synthetic_sequences.metrics import view

    axes = {"raw": (0.013, 0.024, 0.047, 0.09, 0.17, 0.33, 0.63), "dist": (0.035, 0.062, 0.11, 0.2, 0.35)}
    rng = np.random.default_rng(0)
    rows = [
        {**run(family, controls, term, mode, seed, rng.uniform()), "reference": seed // 2, "beta": beta, "key_beta": f"{beta:g}"}
        for term, betas in axes.items()
        for beta in betas
        for family, controls, modes in (("main", "none", ("mean", "sum")), ("main-scale", "scale", ("mean",)))
        if controls == "none" or (term, beta) == ("raw", 0.09)
        for mode in modes
        for seed in range(8)
    ]
    runs = pd.DataFrame(rows)
    runs["onset_step"] = rng.uniform(100, 1500, len(runs)).round()
    steps = range(0, 2001, 100)
    curves = pd.DataFrame(
        [
            {**{k: r[k] for k in ("family", "controls", "term", "mode", "alpha", "reference", "seed", "key_beta")}, "metric": metric}
            | {"step": step, "value": level / (1 + math.exp((r["onset_step"] - step) / 150)) + rng.normal(0, 0.01)}
            for r in runs.to_dict("records")
            for metric, level in zip(view("curve_panels"), (2.0, 0.6, 0.5, 0.05, 1.0), strict=True)
            for step in steps
        ]
    )
    runs.to_parquet(tmp_path / "runs.parquet")
    contrast_table(runs, {"main-scale": "main"}).to_parquet(tmp_path / "pairs.parquet")
    curves.to_parquet(tmp_path / "curves.parquet")
    titles, save = {}, plots.save

    def saved(fig, path):
        titles[path.name] = [ax.get_title() for ax in fig.axes]
        save(fig, path)

    monkeypatch.setattr(plots, "save", saved)
    tables = (tmp_path / f"{name}.parquet" for name in ("runs", "pairs", "curves"))
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "takeup.png").write_bytes(b"drawn over the whole grid before the split")
    outputs = make_plots(*tables, tmp_path / "plots", {"main-scale": "main"}, per_term=True)
    names = sorted(path.name for path in outputs)
    assert names == sorted(
        ["separation.png", "latent_usage.png", "mean_vs_sum.png", "forest.png"]
        + [f"{plot}_main_{term}.png" for plot in ("takeup", "curves") for term in ("dist", "raw")]
    )
    assert all(path.stat().st_size <= 1_000_000 for path in outputs), {path.name: path.stat().st_size for path in outputs}
    raw_rows = [title for title in titles["takeup_main_raw.png"] if title.endswith(": take-up")]
    assert raw_rows == [f"main b={beta:g} raw a=0: take-up" for beta in sorted(axes["raw"], key=lambda beta: f"{beta:g}")]
    assert not any("dist" in title for title in titles["takeup_main_raw.png"] + titles["curves_main_raw.png"])
    assert not (tmp_path / "plots" / "takeup.png").exists()  # a stale whole-grid figure would read as this run's
