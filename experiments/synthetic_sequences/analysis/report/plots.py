"""Figures of the ablation, from the aggregate tables.

    python -m experiments.synthetic_sequences.analysis.report.plots --runs results/tables/runs.parquet \\
        --mean-vs-sum results/tables/mean_vs_sum.parquet --curves results/tables/curves.parquet --out-dir results/plots

takeup.png        per (family, term, alpha): the Kaplan-Meier curve of take-up over steps, a line per arm with its
                  censored runs marked, and a strip per arm of every seed's final I(x;z) and strategy information
separation.png    strategy information (from the posterior), argmax NMI and probe accuracy of every arm (bars: seed
                  mean; dots: seeds)
latent_usage.png  I(x;z), KL and the NLL rise when z is shuffled, same layout
mean_vs_sum.png   the contrasts (sum-mean and the controls): take-up with its Newcombe interval, the others paired by
                  seed with their 95% intervals, each titled with the `interval` the table names
forest.png        the note's question at a glance (verdict.md's first table, drawn): sum - mean of every (family, term,
                  alpha), one panel per endpoint the verdict reads on an interval, its margin of no difference shaded
curves.png        validation learning curves: a row per family, term and alpha, a column per headline metric;
                  mean and sum in the mode colours, controls dashed, thin lines seeds, thick lines their mean

On a beta axis (--per-term) takeup.png and curves.png would grow a row per beta of every term; each is drawn instead
one file per (main family, term), takeup_<family>_<term>.png and curves_<family>_<term>.png, a row per (beta, alpha).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.synthetic_sequences.analysis.comparisons.beta_axis import controls_per_beta, per_beta  # noqa: E402
from experiments.synthetic_sequences.analysis.report.contrast_plots import deltas, forest  # noqa: E402
from experiments.synthetic_sequences.analysis.report.cross_term import DESIGN_DECISION, TERM_LABEL  # noqa: E402
from experiments.synthetic_sequences.analysis.report.figure_style import ARM_STYLES, arm_column, save  # noqa: E402
from experiments.synthetic_sequences.analysis.statistics.inference import kaplan_meier  # noqa: E402
from experiments.synthetic_sequences.arms import ONSET_STEP, TOOK_UP, main_family
from experiments.synthetic_sequences.metrics import METRICS, view  # noqa: E402
from experiments.synthetic_sequences.planning.grid import parse_control_of  # noqa: E402
from experiments.synthetic_sequences.planning.plan_tables import TERM_PLOTS, plot_names  # noqa: E402


def by_condition(runs: pd.DataFrame, metrics: Sequence[str], path: Path, title: str) -> None:
    """One panel per metric: a bar per arm that was run (family, term, alpha, arm) at the seed mean, a dot per seed."""
    runs = runs.assign(arm=arm_column(runs))
    groups = runs.groupby(["family", "term", "alpha", "arm"], sort=True)
    labels = [f"{family}\n{term} a={alpha:g} {arm}" for family, term, alpha, arm in groups.groups]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(6, 0.9 * len(labels)), 2.8 * len(metrics)), squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        if metric not in runs:
            ax.set_visible(False)
            continue
        for x, ((*_, arm), group) in enumerate(groups):
            values = group[metric].dropna()
            colour, style = ARM_STYLES[arm]
            ax.bar(x, values.mean(), 0.7, color=colour, alpha=0.8, hatch="//" if style == "--" else None, edgecolor="white")
            ax.scatter(np.full(len(values), x), values, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
    handles = [
        plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="white", hatch="//" if s == "--" else None) for c, s in ARM_STYLES.values()
    ]
    axes[0, 0].legend(handles, list(ARM_STYLES), title="arm (hatched: control)", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    axes[0, 0].set_title(title)
    fig.tight_layout()
    save(fig, path)


def curves(table: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """A row per (main family, term, alpha), a column per metric of the curve_panels view; controls drawn in their parent's row."""
    keyed = table.assign(
        arm=arm_column(table),
        panel_family=table.family.map(lambda family: main_family(family, control_of)),
    )
    panels = sorted(keyed.groupby(["panel_family", "term", "alpha"]).groups)
    metrics = [m for m in view("curve_panels") if m in set(keyed.metric)]
    fig, axes = plt.subplots(len(panels), len(metrics), figsize=(3.6 * len(metrics), 2.6 * len(panels)), squeeze=False)
    for (family, term, alpha), row_axes in zip(panels, axes, strict=True):
        panel = keyed[(keyed.panel_family == family) & (keyed.term == term) & (keyed.alpha == alpha)]
        for ax, metric in zip(row_axes, metrics, strict=True):
            for arm, arm_rows in panel[panel.metric == metric].groupby("arm"):
                colour, style = ARM_STYLES[arm]
                for _, seed_rows in arm_rows.groupby(["reference", "seed"]):
                    ax.plot(seed_rows.step, seed_rows.value, color=colour, ls=style, lw=0.6, alpha=0.5)
                mean = arm_rows.groupby("step").value.mean()
                ax.plot(mean.index, mean.to_numpy(), color=colour, ls=style, lw=2.2, label=arm)
            ax.set_title(f"{family} {term} a={alpha:g}", fontsize=8)
            ax.set_ylabel(METRICS[metric].label, fontsize=8)
            ax.set_xlabel("step", fontsize=8)
            ax.grid(alpha=0.3)
        row_axes[0].legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def takeup_curve(ax, arm: pd.DataFrame, colour: str, style: str, label: str) -> None:
    """Share of the arm's runs that have taken up the latent by each step (1 - Kaplan-Meier), censored runs marked."""
    budget = float(arm.budget_step.max())
    fit = kaplan_meier(arm[ONSET_STEP], arm.onset_observed)
    steps = np.concatenate([[0.0], fit["steps"], [budget]])
    taken = np.concatenate([[0.0], 1 - fit["survival"], [1 - fit["survival"][-1] if len(fit["survival"]) else 0.0]])
    ax.step(steps, taken, where="post", color=colour, ls=style, lw=2, label=f"{label} ({int(arm[TOOK_UP].sum())}/{len(arm)})")
    censored = arm[arm.onset_observed < 1]
    if not censored.empty:
        level = np.interp(censored[ONSET_STEP], steps, taken)  # the curve's height where each censored run ends
        ax.scatter(censored[ONSET_STEP], level, marker="|", s=120, color=colour, zorder=3)


def takeup(runs: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """A row per (main family, term, alpha): the take-up curves, then the per-seed strips of I(x;z) and strategy information."""
    keyed = runs.assign(arm=arm_column(runs), panel_family=runs.family.map(lambda family: main_family(family, control_of)))
    panels = sorted(keyed.groupby(["panel_family", "term", "alpha"]).groups)
    strips = dict(zip(view("takeup_strips"), ("final test I(x;z) (nats)", "strategy information"), strict=True))
    fig, axes = plt.subplots(len(panels), 1 + len(strips), figsize=(13, 3.2 * len(panels)), squeeze=False)
    for (family, term, alpha), row_axes in zip(panels, axes, strict=True):
        panel = keyed[(keyed.panel_family == family) & (keyed.term == term) & (keyed.alpha == alpha)]
        present = [arm for arm in ARM_STYLES if arm in set(panel.arm)]
        for arm in present:
            takeup_curve(row_axes[0], panel[panel.arm == arm], *ARM_STYLES[arm], arm)
        row_axes[0].set(ylim=(-0.03, 1.03), xlabel="step", ylabel="share of runs taken up", title=f"{family} {term} a={alpha:g}: take-up")
        row_axes[0].legend(fontsize=7, title="arm (k/n); | censored", title_fontsize=7)
        for ax, (metric, label) in zip(row_axes[1:], strips.items(), strict=True):
            for x, arm in enumerate(present):
                values = panel.loc[panel.arm == arm, metric].dropna().to_numpy() if metric in panel else np.array([])
                jitter = np.random.default_rng(x).uniform(-0.15, 0.15, len(values))  # fixed: the same picture every run
                marker = "s" if ARM_STYLES[arm][1] == "--" else "o"  # a control: squares, as its curve is dashed
                ax.scatter(x + jitter, values, color=ARM_STYLES[arm][0], marker=marker, s=22, edgecolor="black", linewidth=0.4)
            ax.set_xticks(range(len(present)), present)
            ax.set(ylabel=label, title=f"{label}, one dot per seed")
        for ax in row_axes:
            ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, path)


def main_terms(frame: pd.DataFrame, control_of: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each row's (main family, term): a control family's rows under its main family's."""
    return list(zip(frame.family.map(lambda family: main_family(family, control_of)), frame.term, strict=True))


def rows_of(frame: pd.DataFrame, keys: list[tuple[str, str]], key: tuple[str, str]) -> pd.DataFrame:
    return frame[[each == key for each in keys]]


def make_plots(
    runs_path, mean_vs_sum_path, curves_path, out_dir, control_of: dict[str, str], cross_term_path=None, per_term: bool = False
) -> list[Path]:
    """Every figure; the cross-term table (cross_term.py), when given, brings a sequential design's decisions. On a beta
    axis each beta is an arm of its own, as in the tables (beta_axis.py), and with `per_term` the take-up and learning
    curves are drawn one file per (main family, term) (plan_tables.plot_names)."""
    out_dir = Path(out_dir)
    runs, contrasts, curve_table = pd.read_parquet(runs_path), pd.read_parquet(mean_vs_sum_path), pd.read_parquet(curves_path)
    run_terms, curve_terms = main_terms(runs, control_of), main_terms(curve_table, control_of)
    terms = sorted(set(run_terms)) if per_term else None
    outputs = {name: out_dir / f"{name}.png" for name in plot_names(terms)}
    paired = controls_per_beta(control_of, runs)
    runs, curve_table = per_beta(runs), per_beta(curve_table)
    if terms is None:
        takeup(runs, paired, outputs["takeup"])
        curves(curve_table, paired, outputs["curves"])
    else:
        for stale in (out_dir / f"{plot}.png" for plot in TERM_PLOTS):
            if stale.exists():  # drawn over the whole grid by an earlier version: it would read as this run's
                print(f"{stale}: removed; on a beta axis it is drawn one file per (main family, term)")
                stale.unlink()
        for family, term in terms:
            takeup(rows_of(runs, run_terms, (family, term)), paired, outputs[f"takeup_{family}_{term}"])
            curves(rows_of(curve_table, curve_terms, (family, term)), paired, outputs[f"curves_{family}_{term}"])
    separation = "Strategy separation on the test split (NMI: argmax codes; probe: E_q[z] / q)"
    by_condition(runs, list(view("separation_panels")), outputs["separation"], separation)
    by_condition(runs, list(view("latent_usage_panels")), outputs["latent_usage"], "Latent usage on the test split")
    deltas(contrasts[contrasts.subset == "all"], list(view("contrast_panels")), outputs["mean_vs_sum"])
    cross_term = pd.read_parquet(cross_term_path).to_dict("records") if cross_term_path else []
    decided = {(row["family"], row["term"], row["alpha"]): row[DESIGN_DECISION] for row in cross_term}
    labels = {(row["family"], row["term"], row["alpha"]): row[TERM_LABEL] for row in cross_term}
    forest(contrasts, outputs["forest"], {group: text for group, text in decided.items() if text != "-"}, labels)
    return list(outputs.values())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--mean-vs-sum", required=True)
    parser.add_argument("--curves", required=True)
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--cross-term", help="tables/cross_term.parquet: a sequential design's decisions for the forest plot")
    parser.add_argument("--per-term", action="store_true", help="on a beta axis: takeup and curves one file per (main family, term)")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    make_plots(args.runs, args.mean_vs_sum, args.curves, args.out_dir, parse_control_of(args.control_of), args.cross_term, args.per_term)


if __name__ == "__main__":
    main()
