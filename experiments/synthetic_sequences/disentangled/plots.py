"""Figures of the ablation, from the aggregate tables.

    python -m experiments.synthetic_sequences.disentangled.plots --runs results/tables/runs.parquet \\
        --mean-vs-sum results/tables/mean_vs_sum.parquet --out-dir results/plots

separation.png    strategy NMI and probe accuracy by family, term, alpha and mode (bars: seed mean; dots: seeds)
latent_usage.png  I(x;z), KL and the NLL rise when z is shuffled, same layout
mean_vs_sum.png   sum - mean deltas with bootstrap CIs, the scale and balance controls beside them
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

MODE_COLOURS = {"mean": "#4C72B0", "sum": "#DD8452"}
COMPARISON_COLOURS = {"sum-mean": "#DD8452", "scale-mean": "#55A868", "balance-mean": "#8172B3"}


def save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def run_label(row) -> str:
    return f"{row.family}\n{row.term} a={row.alpha:g}"


def by_condition(runs: pd.DataFrame, metrics: Sequence[str], path: Path, title: str) -> None:
    """One panel per metric: a bar per (condition, mode) at the seed mean, a dot per seed."""
    runs = runs.assign(condition=[run_label(r) for r in runs.itertuples()])
    conditions = list(dict.fromkeys(runs.sort_values(["family", "term", "alpha"]).condition))
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(6, 1.3 * len(conditions)), 2.8 * len(metrics)), squeeze=False)
    width = 0.38
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        if metric not in runs:
            ax.set_visible(False)
            continue
        for offset, mode in ((-width / 2, "mean"), (width / 2, "sum")):
            subset = runs[runs["mode"] == mode]
            for x, condition in enumerate(conditions):
                values = subset.loc[subset.condition == condition, metric].dropna()
                if values.empty:
                    continue
                ax.bar(x + offset, values.mean(), width, color=MODE_COLOURS[mode], alpha=0.8)
                ax.scatter(np.full(len(values), x + offset), values, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(conditions)), conditions, fontsize=8, rotation=20, ha="right")
        ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in MODE_COLOURS.values()]
    axes[0, 0].legend(handles, list(MODE_COLOURS), title="aggregation mode", fontsize=8)
    axes[0, 0].set_title(title)
    fig.tight_layout()
    save(fig, path)


def deltas(table: pd.DataFrame, metrics: Sequence[str], path: Path) -> None:
    """Per metric: each (family, term, alpha) comparison as a point with its bootstrap CI."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        subset = table[table.metric == metric].reset_index(drop=True)
        labels = [f"{r.family}\n{r.term} a={r.alpha:g}" for r in subset.itertuples()]
        for offset, comparison in zip((-0.2, 0.0, 0.2), COMPARISON_COLOURS, strict=True):
            column = f"{comparison}:delta"
            if column not in subset:
                continue
            y = subset[column].to_numpy(dtype=float)
            low = y - subset[f"{comparison}:ci_low"].to_numpy(dtype=float)
            high = subset[f"{comparison}:ci_high"].to_numpy(dtype=float) - y
            x = np.arange(len(subset)) + offset
            ax.errorbar(x, y, yerr=np.nan_to_num([low, high]), fmt="o", color=COMPARISON_COLOURS[comparison], label=comparison, capsize=3)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(len(subset)), labels, fontsize=7, rotation=20, ha="right")
        ax.set_title(f"{metric}: delta vs mean")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)


def make_plots(runs_path: str | Path, mean_vs_sum_path: str | Path, out_dir: str | Path) -> list[Path]:
    out_dir = Path(out_dir)
    runs, pairs = pd.read_parquet(runs_path), pd.read_parquet(mean_vs_sum_path)
    outputs = [out_dir / "separation.png", out_dir / "latent_usage.png", out_dir / "mean_vs_sum.png"]
    by_condition(runs, ["nmi", "probe_accuracy"], outputs[0], "Strategy separation on the test split")
    by_condition(runs, ["mutual_information", "kl", "shuffled_z_nll_rise_per_token"], outputs[1], "Latent usage on the test split")
    deltas(pairs, ["nmi", "mutual_information", "shuffled_z_nll_rise_per_token"], outputs[2])
    return outputs


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--mean-vs-sum", required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    make_plots(args.runs, args.mean_vs_sum, args.out_dir)


if __name__ == "__main__":
    main()
