"""The contrasts drawn: mean_vs_sum.png (every contrast with its 95% interval) and forest.png (sum - mean of every
(family, term, alpha), a panel per endpoint read on an interval); plots.py draws them with the other figures."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import MARGINS
from experiments.synthetic_sequences.analysis.report.figure_style import MODE_COLOURS, save
from experiments.synthetic_sequences.analysis.report.verdict import ENDPOINTS
from experiments.synthetic_sequences.arms import COMPARISON_NAMES, MODE_EFFECT, ONSET_STEP, TOOK_UP

# sum-mean, scale-mean, balance-mean, sum-scale, sum-balance
COMPARISON_COLOURS = dict(zip(COMPARISON_NAMES, ("#DD8452", "#55A868", "#8172B3", "#2F7D4A", "#5A4A8C"), strict=True))
NOTHING_TO_COMPARE = "nothing to compare (no runs or pairs in this subset)"
TITLE_WIDTH = 52  # characters of a forest panel's title line at font size 8: the panel is 4.2 inches wide


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
        kind = "difference in share of runs" if metric == TOOK_UP else "paired difference"
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
    panels = [endpoint for endpoint in ENDPOINTS if endpoint.metric != ONSET_STEP]
    effects = contrasts[contrasts.comparison == MODE_EFFECT]
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
