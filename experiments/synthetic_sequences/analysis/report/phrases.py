"""The phrases of the verdict's sentences: numbers, p values, sample sizes, the seeds a contrast needs, the runs
behind a line."""

from __future__ import annotations

import math

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import MARGINS
from experiments.synthetic_sequences.analysis.comparisons.readings import finite
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA, MAX_SEEDS
from experiments.synthetic_sequences.analysis.statistics.multiplicity import rejects
from experiments.synthetic_sequences.analysis.statistics.stratified import POWER_DRAWS
from experiments.synthetic_sequences.arms import BLOCK, ONSET_STEP, TOOK_UP


def number(value, digits: int = 3) -> str:
    return f"{value:+.{digits}f}" if finite(value) else "-"


def p_text(row: dict) -> str:
    return f"{row['test']} p = {row['p']:.2g} ({row['adjustment']} {row['p_adjusted']:.2g})" if finite(row["p"]) else row["test"]


def contrast_text(row: dict) -> str:
    """'sum - mean +0.600 [+0.231, +0.814], boschloo p = 0.0054 (holm 0.027)'; an onset row has no estimate to print
    where a median is not reached."""
    interval = f" [{number(row['ci_low'])}, {number(row['ci_high'])}]" if finite(row["ci_low"]) else ""
    estimate = f" {number(row['estimate'], 0)} steps" if row["metric"] == ONSET_STEP else f" {number(row['estimate'])}"
    if not finite(row["estimate"]):  # an onset median not reached: no difference of medians to print
        return f"{row['comparison'].replace('-', ' vs ')}: {p_text(row)}"
    return f"{row['comparison'].replace('-', ' - ')}{estimate}{interval}, {p_text(row)}"


def sample_size(row: dict) -> str:
    """'n = 10 per arm', 'n = 12 per arm (3 references x 4 seeds)', 'n = 9 seed pairs (over 3 references)'."""
    if row["interval"].startswith("paired t"):
        text = f"n = {row['n_a']} seed pair{'s' if row['n_a'] != 1 else ''}"
    else:
        text = f"n = {row['n_a']} per arm" if row["n_a"] == row["n_b"] else f"n = {row['n_a']} vs {row['n_b']}"
    blocks = row.get("references", 1)
    if not finite(blocks) or blocks <= 1:
        return text
    blocks = int(blocks)
    if row["n_a"] == row["n_b"] and row["n_a"] % blocks == 0 and not row["interval"].startswith("paired t"):
        return f"{text} ({blocks} references x {row['n_a'] // blocks} seeds)"
    return f"{text} (over {blocks} references)"


def runs_text(needed: float, blocks: int) -> str:
    """'about 16 seeds per arm' or, with several reference blocks, 'about 16 runs per arm (4 references x 4 seeds)'."""
    if blocks <= 1:
        return f"about {int(needed)} seeds per arm"
    return f"about {int(needed)} runs per arm ({blocks} references x {math.ceil(needed / blocks)} seeds)"


def resolvability(row: dict, planned: int) -> str:
    """Why this n cannot resolve the contrast, and the seeds that would."""
    smallest = row["smallest_p"]
    text = f"cannot be resolved at {sample_size(row)}"
    if finite(smallest):
        reachable = min(1.0, smallest * planned) if row["metric"] == TOOK_UP else smallest
        text += f": the smallest p {row['test'].split(',')[0]} can give at this n is {smallest:.2g}"
        if row["metric"] == TOOK_UP and planned > 1:
            text += f" ({reachable:.2g} under Holm over {planned} contrasts)"
        if not rejects(reachable, ALPHA):
            text += ", so no outcome at this n reaches 0.05"
    needed = row["seeds_needed"]
    blocks = int(row["references"]) if finite(row.get("references")) else 1
    if finite(needed) and needed <= min(row["n_a"], row["n_b"]):
        text += "; the observed values sit at the edge of resolving (the adjusted p or the interval falls short): add seeds"
    elif finite(needed):
        text += f"; {runs_text(needed, blocks)} would resolve it at the observed values{sizing(row, blocks)}"
    elif needed == math.inf:
        text += f"; more than {MAX_SEEDS} seeds per arm would be needed at the observed values"
    elif row["subset"] == "all" and row["metric"] != TOOK_UP:
        text += "; no seed count is estimated from it: it mixes runs that took up with runs that did not (see take-up)"
    return text


def takeup_sizing(blocks: int) -> str:
    """How takeup_seeds_needed sized a take-up contrast whose rates differ, as the verdict names it."""
    if blocks > 1:
        return f"80% power of the exact test stratified by reference, simulated over {POWER_DRAWS:,} pilots"
    return "80% power of Boschloo's test, enumerated"


def sizing(row: dict, blocks: int) -> str:
    """' (80% power of ...)': how a take-up contrast whose rates differ by the margin or more was sized."""
    differs = finite(row["estimate"]) and abs(row["estimate"]) >= MARGINS[TOOK_UP]
    return f" ({takeup_sizing(blocks)})" if row["metric"] == TOOK_UP and differs else ""


def disagreement(row: dict) -> str:
    """' The references disagree (Breslow-Day p = 0.01).' for a take-up contrast whose blocks do not share one odds ratio."""
    homogeneity = row.get("p_homogeneity", math.nan)
    if rejects(homogeneity, ALPHA):
        return f" The references disagree on it (Breslow-Day p = {homogeneity:.2g}): read the counts per reference"
    return ""


def seeds_text(needed: float, blocks: int) -> str:
    if finite(needed):
        return f": {runs_text(needed, blocks)} would tell"
    return f": more than {MAX_SEEDS} seeds per arm would be needed" if needed == math.inf else ""


def spans(values) -> str:
    """'0-3,5' of the values 0, 1, 2, 3, 5."""
    runs: list[list[int]] = []
    for value in sorted({int(v) for v in values}):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def runs_behind(group_arms: dict[str, pd.DataFrame]) -> str:
    """'mean: discrete/ref0/raw_mean_0 seeds 0-9; sum: ...', or ref0-2/... over several reference blocks (ranges collapsed)."""
    parts = []
    for name, arm in group_arms.items():
        first = arm.iloc[0]
        parts.append(f"{name}: {first.family}/ref{spans(arm[BLOCK])}/{first.term}_{first['mode']}_{first.alpha:g} seeds {spans(arm.seed)}")
    return "; ".join(parts)
