"""Decisions at a level: one tie policy for every decision (the verdict's and a sequential design's looks), and the
adjusted p values of a family of tests (Holm over a comparison's planned contrasts, Benjamini-Hochberg over its
secondary metrics). statsmodels is imported inside the function, as in inference.py."""

from __future__ import annotations

import gc
import math

import numpy as np

DECISION_DIGITS = 10  # p values and levels are compared rounded to 10 decimals (rejects)
NAN = math.nan


def rejects(p: float, level: float) -> bool:
    """The tie policy of every decision (the verdict's and the looks'): p <= level, both rounded to DECISION_DIGITS
    decimals, so an exact tie such as 1/100 at 0.01 rejects whatever float residue either side carries; nan does not."""
    return bool(np.isfinite(p)) and round(float(p), DECISION_DIGITS) <= round(float(level), DECISION_DIGITS)


def adjust(pvalues, method: str) -> np.ndarray:
    """Holm ('holm') or Benjamini-Hochberg ('fdr_bh') adjusted p values; nan entries stay nan and are not counted."""
    from statsmodels.stats.multitest import multipletests

    pvalues = np.asarray(pvalues, dtype=float)
    adjusted = np.full(len(pvalues), NAN)
    present = np.isfinite(pvalues)
    if present.any():
        gc.freeze()  # statsmodels' Holm calls gc.collect(), which walks every object of a large aggregation (bench/README.md)
        try:
            adjusted[present] = multipletests(pvalues[present], method=method)[1]
        finally:
            gc.unfreeze()
    return adjusted
