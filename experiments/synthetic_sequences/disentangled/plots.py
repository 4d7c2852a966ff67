"""Figures of the ablation, from the aggregate tables.

    python -m experiments.synthetic_sequences.disentangled.plots --runs results/tables/runs.parquet \\
        --mean-vs-sum results/tables/mean_vs_sum.parquet --curves results/tables/curves.parquet --out-dir results/plots

separation.png    strategy NMI and probe accuracy of every arm that was run (bars: seed mean; dots: seeds)
latent_usage.png  I(x;z), KL and the NLL rise when z is shuffled, same layout
mean_vs_sum.png   the paired contrasts (sum-mean and the controls) with their 95% paired t intervals
curves.png        validation learning curves: a row per family, term and alpha, a column per headline metric;
                  mean and sum in the mode colours, controls dashed, thin lines seeds, thick lines their mean
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.disentanglement.artifacts import atomic_path  # noqa: E402
from experiments.synthetic_sequences.disentangled.grid import parse_control_of  # noqa: E402

MODE_COLOURS = {"mean": "#4C72B0", "sum": "#DD8452"}
COMPARISON_COLOURS = {
    "sum-mean": "#DD8452",
    "scale-mean": "#55A868",
    "balance-mean": "#8172B3",
    "sum-scale": "#2F7D4A",
    "sum-balance": "#5A4A8C",
}


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
CURVE_METRICS = {
    "mutual_information": "I(x;z) (nats)",
    "nmi": "NMI (codes vs strategy)",
    "shuffled_z_nll_rise_per_token": "shuffled-z NLL rise / token",
    "recon_nll_per_token": "reconstruction NLL / token",
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
    """Per metric: each contrast that was computed, as a point with its 95% paired t interval (none with one seed)."""
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
            delta = chosen["delta"].to_numpy(dtype=float)
            error = np.nan_to_num([delta - chosen["ci_low"].to_numpy(dtype=float), chosen["ci_high"].to_numpy(dtype=float) - delta])
            ax.errorbar(delta, y[rows.to_numpy()], xerr=error, fmt="o", color=colour, label=comparison, capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, [f"{r.family} {r.term} a={r.alpha:g}: {r.comparison} (n={r.n})" for r in subset.itertuples()], fontsize=7)
        ax.set_title(f"{metric}: paired difference, 95% t interval", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def curves(table: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """A row per (main family, term, alpha), a column per CURVE_METRICS entry; controls drawn in their parent's row."""
    keyed = table.assign(
        arm=arm_column(table),
        panel_family=table.family.map(lambda family: control_of.get(family, family)),
    )
    panels = sorted(keyed.groupby(["panel_family", "term", "alpha"]).groups)
    metrics = [m for m in CURVE_METRICS if m in set(keyed.metric)]
    fig, axes = plt.subplots(len(panels), len(metrics), figsize=(3.6 * len(metrics), 2.6 * len(panels)), squeeze=False)
    for (family, term, alpha), row_axes in zip(panels, axes, strict=True):
        panel = keyed[(keyed.panel_family == family) & (keyed.term == term) & (keyed.alpha == alpha)]
        for ax, metric in zip(row_axes, metrics, strict=True):
            for arm, arm_rows in panel[panel.metric == metric].groupby("arm"):
                colour, style = ARM_STYLES[arm]
                for _, seed_rows in arm_rows.groupby("seed"):
                    ax.plot(seed_rows.step, seed_rows.value, color=colour, ls=style, lw=0.6, alpha=0.5)
                mean = arm_rows.groupby("step").value.mean()
                ax.plot(mean.index, mean.to_numpy(), color=colour, ls=style, lw=2.2, label=arm)
            ax.set_title(f"{family} {term} a={alpha:g}", fontsize=8)
            ax.set_ylabel(CURVE_METRICS[metric], fontsize=8)
            ax.set_xlabel("step", fontsize=8)
            ax.grid(alpha=0.3)
        row_axes[0].legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def make_plots(runs_path, mean_vs_sum_path, curves_path, out_dir, control_of: dict[str, str]) -> list[Path]:
    out_dir = Path(out_dir)
    runs, contrasts, curve_table = pd.read_parquet(runs_path), pd.read_parquet(mean_vs_sum_path), pd.read_parquet(curves_path)
    outputs = [out_dir / f"{name}.png" for name in ("separation", "latent_usage", "mean_vs_sum", "curves")]
    by_condition(runs, ["nmi", "probe_accuracy"], outputs[0], "Strategy separation on the test split")
    by_condition(runs, ["mutual_information", "kl", "shuffled_z_nll_rise_per_token"], outputs[1], "Latent usage on the test split")
    deltas(contrasts, ["mutual_information", "nmi", "shuffled_z_nll_rise_per_token"], outputs[2])
    curves(curve_table, control_of, outputs[3])
    return outputs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--mean-vs-sum", required=True)
    parser.add_argument("--curves", required=True)
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    make_plots(args.runs, args.mean_vs_sum, args.curves, args.out_dir, parse_control_of(args.control_of))


if __name__ == "__main__":
    main()
