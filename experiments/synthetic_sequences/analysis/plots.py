"""Figures of the ablation, from the aggregate tables.

    python -m experiments.synthetic_sequences.analysis.plots --runs results/tables/runs.parquet \\
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
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.disentanglement.artifacts import atomic_path  # noqa: E402
from experiments.synthetic_sequences.analysis.beta_axis import controls_per_beta, per_beta  # noqa: E402
from experiments.synthetic_sequences.analysis.contrasts import MARGINS, ONSET, PRIMARY  # noqa: E402
from experiments.synthetic_sequences.analysis.cross_term import DESIGN_DECISION, TERM_LABEL  # noqa: E402
from experiments.synthetic_sequences.analysis.inference import kaplan_meier  # noqa: E402
from experiments.synthetic_sequences.analysis.verdict import ENDPOINTS  # noqa: E402
from experiments.synthetic_sequences.metrics import METRICS, view  # noqa: E402
from experiments.synthetic_sequences.planning.grid import parse_control_of  # noqa: E402

MODE_COLOURS = {"mean": "#4C72B0", "sum": "#DD8452"}
COMPARISON_COLOURS = {
    "sum-mean": "#DD8452",
    "scale-mean": "#55A868",
    "balance-mean": "#8172B3",
    "sum-scale": "#2F7D4A",
    "sum-balance": "#5A4A8C",
}
NOTHING_TO_COMPARE = "nothing to compare (no runs or pairs in this subset)"
TITLE_WIDTH = 52  # characters of a forest panel's title line at font size 8: the panel is 4.2 inches wide


def save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


ARM_STYLES = {  # arm -> (colour, line style): a control is drawn in the colour of the mode it runs, dashed
    "mean": (MODE_COLOURS["mean"], "-"),
    "sum": (MODE_COLOURS["sum"], "-"),
    "scale": (MODE_COLOURS["mean"], "--"),
    "balance": (MODE_COLOURS["sum"], "--"),
}


def arm_column(frame: pd.DataFrame) -> np.ndarray:
    """Each row's arm: its mode in a main family, its control (scale, balance) in a control family."""
    return np.where(frame.controls == "none", frame["mode"], frame.controls)


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


def deltas(table: pd.DataFrame, metrics: Sequence[str], path: Path) -> None:
    """Per metric: each contrast that was computed, as a point with its 95% interval (none for a single seed pair)."""
    contrasts = table.groupby(["family", "term", "alpha", "comparison"]).ngroups
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.6 * len(metrics), 0.35 * max(4, contrasts) + 1.5), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        subset = table[table.metric == metric].reset_index(drop=True)
        y = np.arange(len(subset))[::-1]
        for comparison, colour in COMPARISON_COLOURS.items():
            rows = subset.comparison == comparison
            if not rows.any():
                continue
            chosen = subset[rows]
            delta = chosen["estimate"].to_numpy(dtype=float)
            error = np.nan_to_num([delta - chosen["ci_low"].to_numpy(dtype=float), chosen["ci_high"].to_numpy(dtype=float) - delta])
            ax.errorbar(delta, y[rows.to_numpy()], xerr=error, fmt="o", color=colour, label=comparison, capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        labels = [f"{r.family} {r.term} a={r.alpha:g}: {r.comparison} (n={r.n_a}, {r.n_b})" for r in subset.itertuples()]
        ax.set_yticks(y, labels, fontsize=7)
        kind = "difference in share of runs" if metric == PRIMARY else "paired difference"
        intervals = " / ".join(sorted(subset["interval"].dropna().unique()))  # the table's own name of its interval
        ax.set_title(f"{metric}: {kind}\n{intervals} 95% interval", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    handles = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
    if handles:  # beside the panels, clear of the points
        axes[0, -1].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    save(fig, path)


def forest(
    contrasts: pd.DataFrame, path: Path, decisions: Mapping[tuple, str] | None = None, term_labels: Mapping[tuple, str] | None = None
) -> None:
    """sum - mean of every (family, term, alpha) with its 95% interval, a panel per endpoint read on an interval; under a
    sequential design, each row's label gives the design's take-up decision and the intervals are named naive.
    `term_labels`: (family, term, alpha) -> the term as the cross-term table names it (a hybrid with its coefficients)."""
    panels = [endpoint for endpoint in ENDPOINTS if endpoint.metric != ONSET]
    effects = contrasts[contrasts.comparison == "sum-mean"]
    groups = sorted(effects.groupby(["family", "term", "alpha"]).groups)
    if not groups:  # a calibration trains mean arms only
        fig, ax = plt.subplots(figsize=(6, 1.2))
        ax.text(0.5, 0.5, "No family has both a mean and a sum run: nothing to compare.", ha="center", va="center")
        ax.set_axis_off()
        save(fig, path)
        return
    y = np.arange(len(groups))[::-1]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 0.4 * max(4, len(groups)) + 1.6), squeeze=False, sharey=True)
    for ax, endpoint in zip(axes[0], panels, strict=True):
        chosen = effects[(effects.metric == endpoint.metric) & (effects.subset == endpoint.subset)]
        by_group = {(row["family"], row["term"], row["alpha"]): row for row in chosen.to_dict("records")}
        margin = MARGINS[endpoint.metric]
        ax.axvspan(-margin, margin, color="grey", alpha=0.15, lw=0)
        ax.axvline(0, color="grey", lw=0.8)
        for position, group in zip(y, groups, strict=True):
            row = by_group.get(group)
            if row is None or not np.isfinite(float(row["estimate"])):  # e.g. no seed took up in both arms: say so
                ax.text(0.5, position, NOTHING_TO_COMPARE, transform=ax.get_yaxis_transform(), ha="center", color="grey", fontsize=7)
                continue
            delta, low, high = (float(row[key]) for key in ("estimate", "ci_low", "ci_high"))
            error = np.nan_to_num([[delta - low], [high - delta]])
            ax.errorbar([delta], [position], xerr=error, fmt="o", color=MODE_COLOURS["sum"], capsize=3)
            counts = f"n={row['n_a']},{row['n_b']}" + ("" if np.isfinite([low, high]).all() else ": no interval at this n")
            ax.annotate(counts, (delta, position), textcoords="offset points", xytext=(0, 6), fontsize=6, ha="center")
        intervals = " / ".join(sorted(chosen["interval"].dropna().unique())) + (" (naive under the design)" if decisions else "")
        title = f"{endpoint.name}: sum - mean\n({endpoint.metric}, {endpoint.subset} runs)"
        method = textwrap.fill(f"{intervals} 95% interval; shaded: +-{margin:g}", TITLE_WIDTH)  # no overlap with the next panel's
        ax.set_title(f"{title}\n{method}", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    term_labels = term_labels or {}
    labels = [f"{family} {term_labels.get((family, term, alpha), term)} a={alpha:g}" for family, term, alpha in groups]
    if decisions:
        labels = [f"{label}\ndesign: {decisions.get(group, '-')}" for label, group in zip(labels, groups, strict=True)]
    axes[0, 0].set_yticks(y, labels, fontsize=8)
    fig.tight_layout()
    save(fig, path)


def curves(table: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """A row per (main family, term, alpha), a column per metric of the curve_panels view; controls drawn in their parent's row."""
    keyed = table.assign(
        arm=arm_column(table),
        panel_family=table.family.map(lambda family: control_of.get(family, family)),
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
    fit = kaplan_meier(arm[ONSET], arm.onset_observed)
    steps = np.concatenate([[0.0], fit["steps"], [budget]])
    taken = np.concatenate([[0.0], 1 - fit["survival"], [1 - fit["survival"][-1] if len(fit["survival"]) else 0.0]])
    ax.step(steps, taken, where="post", color=colour, ls=style, lw=2, label=f"{label} ({int(arm[PRIMARY].sum())}/{len(arm)})")
    censored = arm[arm.onset_observed < 1]
    if not censored.empty:
        level = np.interp(censored[ONSET], steps, taken)  # the curve's height where each censored run ends
        ax.scatter(censored[ONSET], level, marker="|", s=120, color=colour, zorder=3)


def takeup(runs: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """A row per (main family, term, alpha): the take-up curves, then the per-seed strips of I(x;z) and strategy information."""
    keyed = runs.assign(arm=arm_column(runs), panel_family=runs.family.map(lambda family: control_of.get(family, family)))
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


def make_plots(runs_path, mean_vs_sum_path, curves_path, out_dir, control_of: dict[str, str], cross_term_path=None) -> list[Path]:
    """Every figure; the cross-term table (cross_term.py), when given, brings a sequential design's decisions. On a beta
    axis each beta is an arm of its own, as in the tables (beta_axis.py)."""
    out_dir = Path(out_dir)
    runs, contrasts, curve_table = pd.read_parquet(runs_path), pd.read_parquet(mean_vs_sum_path), pd.read_parquet(curves_path)
    control_of = controls_per_beta(control_of, runs)
    runs, curve_table = per_beta(runs), per_beta(curve_table)
    outputs = [out_dir / f"{name}.png" for name in ("takeup", "separation", "latent_usage", "mean_vs_sum", "curves", "forest")]
    takeup(runs, control_of, outputs[0])
    separation = "Strategy separation on the test split (NMI: argmax codes; probe: E_q[z] / q)"
    by_condition(runs, list(view("separation_panels")), outputs[1], separation)
    by_condition(runs, list(view("latent_usage_panels")), outputs[2], "Latent usage on the test split")
    deltas(contrasts[contrasts.subset == "all"], list(view("contrast_panels")), outputs[3])
    curves(curve_table, control_of, outputs[4])
    cross_term = pd.read_parquet(cross_term_path).to_dict("records") if cross_term_path else []
    decided = {(row["family"], row["term"], row["alpha"]): row[DESIGN_DECISION] for row in cross_term}
    labels = {(row["family"], row["term"], row["alpha"]): row[TERM_LABEL] for row in cross_term}
    forest(contrasts, outputs[5], {group: text for group, text in decided.items() if text != "-"}, labels)
    return outputs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--mean-vs-sum", required=True)
    parser.add_argument("--curves", required=True)
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--cross-term", help="tables/cross_term.parquet: a sequential design's decisions for the forest plot")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    make_plots(args.runs, args.mean_vs_sum, args.curves, args.out_dir, parse_control_of(args.control_of), args.cross_term)


if __name__ == "__main__":
    main()
