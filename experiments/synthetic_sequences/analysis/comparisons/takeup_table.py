"""The takeup table: per arm, how many runs took up the latent, in each reference block, and when."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import arm_counts, arms
from experiments.synthetic_sequences.analysis.statistics import inference
from experiments.synthetic_sequences.arms import BLOCK, ONSET_STEP, TOOK_UP
from experiments.synthetic_sequences.metrics import view

FLOOR, ROUNDING = view("collapse")

ARM_COLUMNS = [
    "family",
    "term",
    "alpha",
    "arm",
    "runs",
    "took_up",
    "rate",
    "ci_low",
    "ci_high",
    "onsets_observed",
    "median_onset",
    "median_onset_low",
    "median_onset_high",
    "budget_step",
    "references",
    "by_reference",
    "rounding_takeups",
    "floor_mutual_information",
]


def block_counts(arm: pd.DataFrame) -> str:
    """'ref0 3/4, ref1 2/4': took_up k of n in each reference block."""
    return ", ".join(f"ref{block} {k}/{n}" for block, (k, n) in arm_counts(arm).items())


def arm_table(runs: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """Take-up per arm: k of n runs with its Clopper-Pearson interval, k of n in each reference block ('ref0 3/4, ref1
    2/4'), the take-ups from a posterior uniform to float precision (rounding events) and the arm's smallest floor of
    I(x;z) before the onset, and the Kaplan-Meier median onset with its interval (nan where the curve never falls to
    one half, or the bound is not reached)."""
    rows = []
    for family, family_arms in arms(runs, control_of).items():
        for name, arm in family_arms.items():
            for (term, alpha), group in arm.groupby(["term", "alpha"]):
                k, n = int(group[TOOK_UP].sum()), len(group)
                low, high = inference.clopper_pearson(k, n)
                fit = inference.kaplan_meier(group[ONSET_STEP], group.onset_observed)
                rows.append(
                    {
                        "family": family,
                        "term": term,
                        "alpha": alpha,
                        "arm": name,
                        "runs": n,
                        "took_up": k,
                        "rate": k / n,
                        "ci_low": low,
                        "ci_high": high,
                        "onsets_observed": int(group.onset_observed.sum()),
                        "median_onset": fit["median"],
                        "median_onset_low": fit["median_low"],
                        "median_onset_high": fit["median_high"],
                        "budget_step": float(group.budget_step.max()),
                        "references": int(group[BLOCK].nunique()),
                        "by_reference": block_counts(group),
                        "rounding_takeups": int(group.get(ROUNDING, pd.Series(0.0)).sum()),
                        "floor_mutual_information": float(group.get(FLOOR, pd.Series(np.nan)).min()),
                    }
                )
    return pd.DataFrame(rows, columns=ARM_COLUMNS)
