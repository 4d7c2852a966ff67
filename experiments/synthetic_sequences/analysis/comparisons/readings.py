"""How a contrast reads, as codes the report puts into words (report/verdict.py's RULE states the rule): a contrast's
reading from its interval, its margin and its adjusted p; an onset's direction; and how much of sum's effect a control
reproduces."""

from __future__ import annotations

import math

import pandas as pd

from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.analysis.statistics.multiplicity import rejects
from experiments.synthetic_sequences.arms import ONSET_STEP

SAME = ("no difference", "below the smallest effect of interest")


def finite(value) -> bool:
    """A number that is there: not None, not missing, not infinite."""
    return value is not None and not pd.isna(value) and math.isfinite(value)


def reading(row: dict | None, margin: float) -> str:
    """How one contrast row reads (module docstring); onset rows read earlier / later / cannot be told apart."""
    if row is None:
        return "not run"
    if row["metric"] == ONSET_STEP:
        if not finite(row["p"]):
            return "no onset in either arm"
        if rejects(row["p_adjusted"], ALPHA):
            return "earlier" if onset_sooner(row) else "later"
        return "cannot be told apart"
    low, high = row["ci_low"], row["ci_high"]
    if finite(low) and finite(high) and -margin <= low and high <= margin:
        return "no difference" if low <= 0 <= high else "below the smallest effect of interest"
    if rejects(row["p_adjusted"], ALPHA) and finite(low) and (low > 0 or high < 0):
        return "raises" if row["estimate"] > 0 else "lowers"
    return "cannot be resolved"


def onset_sooner(row: dict) -> bool:
    """Whether arm a's onsets come sooner: its median is earlier, or only its median is reached, or, where neither is,
    a larger share of its runs had an onset."""
    if finite(row["estimate"]):
        return row["estimate"] < 0
    if finite(row["median_a"]) or finite(row["median_b"]):
        return finite(row["median_a"]) and not finite(row["median_b"])
    return row["onset_share_a"] > row["onset_share_b"]


def control_share(effect: str, control_vs_mean: str, sum_vs_control: str) -> str:
    if control_vs_mean == effect and sum_vs_control in SAME:
        return "all of it"
    if control_vs_mean == effect and sum_vs_control == effect:
        return "part of it"
    if control_vs_mean in SAME:
        return "none of it"
    return "unclear"
