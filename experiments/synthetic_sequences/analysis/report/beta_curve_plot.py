"""beta_curves.png: take-up over beta, mean against sum, one panel per (family, term, alpha) of a config with a beta
axis (analysis/comparisons/curve_table.py). Named apart from curves.png, which holds the validation learning curves.

    python -m experiments.synthetic_sequences.analysis.report.beta_curve_plot results/tables/runs.parquet --tokens 6.57 \
        --control-of discrete-scale=discrete --plot results/plots/beta_curves.png

prints the shift table (k, its interval, the parallelism p, the reading) and draws the figure.

Each panel: the take-up rate per beta and mode with its Clopper-Pearson 95% interval, on a log-beta axis; each mode's
curve as the population fit draws it for the typical block (solid: sum's is mean's at k x beta), with the band where
the central 80% of blocks' curves lie (the blocks' SDs); the control families' points (scale: square, balance:
diamond); and k with its interval, the reading, the parallelism p and the SD of sum's effect over blocks in the title:
under a curve design, the design's k, interval and reading at the look it stopped at, with why it stopped there.
The curves come from the table's fit, not from a refit: the figure draws what the verdict reads.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from experiments.synthetic_sequences.analysis.comparisons.curve_table import KEYS, shift_table  # noqa: E402
from experiments.synthetic_sequences.analysis.report.beta_curve_text import design_estimate, design_interval, mode_sd  # noqa: E402
from experiments.synthetic_sequences.analysis.report.figure_style import MODE_COLOURS, save  # noqa: E402
from experiments.synthetic_sequences.analysis.statistics.inference import clopper_pearson  # noqa: E402
from experiments.synthetic_sequences.analysis.statistics.population_curves import PopulationFit, block_curve  # noqa: E402
from experiments.synthetic_sequences.arms import NO_CONTROL, TOOK_UP
from experiments.synthetic_sequences.planning.grid import parse_control_of  # noqa: E402

CONTROL_MARKERS = {"scale": "s", "balance": "D"}
SPREAD = 1.04  # mean's and sum's points drawn this factor apart in beta, so their bars do not hide each other
BAND = (0.1, 0.9)  # the quantiles of the blocks whose curves bound the shaded band


def rate_points(ax, runs: pd.DataFrame, colour: str, marker: str, label: str, nudge: float) -> None:
    """k/n per beta with its Clopper-Pearson interval."""
    counts = runs.groupby("beta")[TOOK_UP].agg(["sum", "size"])
    rates = counts["sum"] / counts["size"]
    bounds = np.array([clopper_pearson(int(k), int(n)) for k, n in zip(counts["sum"], counts["size"], strict=True)])
    errors = np.vstack([rates - bounds[:, 0], bounds[:, 1] - rates])
    ax.errorbar(counts.index * nudge, rates, yerr=errors, fmt=marker, color=colour, capsize=2, ms=4, label=label, lw=0.8)


def design_title(row: dict) -> str:
    """A curve design's panel: its answer, the stopping look's k, interval and reading (the verdict's design table)."""
    stop = f"{row['design_stop']} at look {row['design_look']:.0f}, {row['design_runs']:.0f} runs"
    spread = f"parallelism p {row['parallel_p']:.2g}, SD of sum's effect over blocks {mode_sd(row)}"
    return (
        f"{row['family']} {row['term']} a={row['alpha']:g}\nk = {design_estimate(row)} {design_interval(row)} at the look's level: "
        f"{row['design_reading']}\n{stop}\n{spread}"
    )


def title(row: dict) -> str:
    """k with its 95% interval and the reading, or a curve design's answer where the row carries one."""
    if isinstance(row.get("design_stop"), str):
        return design_title(row)
    if not math.isfinite(row["k"]):
        return f"{row['family']} {row['term']} a={row['alpha']:g}\nno k: {row['reading']}"
    interval = f"[{row['ci_low']:.2g}, {row['ci_high']:.2g}]"
    estimate = f"k = {row['k']:.2g}" if math.isfinite(row["ci_low"] * row["ci_high"]) and row["ci_low"] > 0 else "k open"
    spread = f"parallelism p {row['parallel_p']:.2g}, SD of sum's effect over blocks {mode_sd(row)}"
    return f"{row['family']} {row['term']} a={row['alpha']:g}\n{estimate} {interval}: {row['reading']}\n{spread}"


def population_fit(row: dict) -> PopulationFit:
    """The population fit a shift table's row carries."""
    return PopulationFit(row["intercept"], row["slope"], row["mode_effect"], row["sd_block"], row["sd_mode"], math.nan)


def beta_curves_figure(runs: pd.DataFrame, table: pd.DataFrame, control_of: dict[str, str], path: Path) -> None:
    """One panel per row of beta_curves.shift_table (module docstring)."""
    rows = table.to_dict("records")
    columns = min(4, max(1, len(rows)))
    lines = math.ceil(max(1, len(rows)) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.2 * columns, 3.4 * lines), squeeze=False)
    for ax in axes.flat[len(rows) :]:
        ax.set_axis_off()
    if not rows:
        axes[0, 0].text(0.5, 0.5, "No (family, term) has mean and sum runs at two betas or more.", ha="center", va="center")
    for ax, row in zip(axes.flat, rows, strict=False):
        key = tuple(row[name] for name in KEYS)
        group = runs[(runs[KEYS].apply(tuple, axis=1) == key) & (runs.controls == NO_CONTROL)]
        grid = np.geomspace(group.beta.min() / 1.5, group.beta.max() * 1.5, 120)
        fit = population_fit(row)
        for is_sum, (mode, nudge) in enumerate((("mean", 1 / SPREAD), ("sum", SPREAD))):
            rate_points(ax, group[group["mode"] == mode], MODE_COLOURS[mode], "o", mode, nudge)
            ax.plot(grid, block_curve(fit, np.log(grid), is_sum), color=MODE_COLOURS[mode], lw=1.2)
            low, high = (block_curve(fit, np.log(grid), is_sum, quantile) for quantile in BAND)
            ax.fill_between(grid, low, high, color=MODE_COLOURS[mode], alpha=0.15, lw=0, label=f"{mode}: 80% of blocks")
        controls = runs[runs.family.map(control_of).eq(row["family"]) & (runs.term == row["term"]) & (runs.alpha == row["alpha"])]
        for kind, arm in controls.groupby("controls"):
            rate_points(ax, arm, "black", CONTROL_MARKERS.get(kind, "^"), kind, 1.0)
        ax.set(xscale="log", ylim=(-0.05, 1.05), xlabel="beta", ylabel="share of runs that took up")
        betas = sorted(group.beta.unique())  # the axis's own betas as ticks: a span of 10x holds one power of ten at most
        ax.set_xticks(betas, [f"{beta:.2g}" for beta in betas], fontsize=6, rotation=45)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title(row), fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
    fig.tight_layout()
    save(fig, path)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", help="a runs table (tables/runs.parquet) whose main families ran both modes at two betas or more")
    parser.add_argument("--tokens", type=float, help="the train split's mean supervised token count; raw's and tok's predicted k is 1 / it")
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--table", type=Path, help="its shift table (tables/beta_curves.parquet), read rather than fitted again")
    parser.add_argument("--plot", type=Path, help="where to write beta_curves.png")
    args = parser.parse_args(argv)
    runs = pd.read_parquet(args.runs)
    table = pd.read_parquet(args.table) if args.table else shift_table(runs, args.tokens)
    print(table.to_markdown(index=False, floatfmt=".3g") if not table.empty else "no (family, term) ran both modes at two betas or more")
    if args.plot:
        beta_curves_figure(runs, table, parse_control_of(args.control_of), args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
