"""The operating point of each (model, term, alpha), read from a calibration run's runs table (config/calibration.yaml).

    python -m experiments.synthetic_sequences.analysis.comparisons.calibration results/calibration/tables/runs.parquet

The note's take-up contrast cannot move where the mean arm sits at a ceiling (every run takes up) or a floor (none
does). For each (model, term, alpha), the mean arm's take-up is counted at every beta of the grid, and a beta is
chosen by one stated rule:
  unclear       the rates rise across the band somewhere: a beta below 0.2 and a larger beta above 0.6 (take-up
                falls as beta grows, so such rates say the grid is too coarse or the runs too few); no choice
  measured      else the grid's beta whose rate lies in [0.2, 0.6], nearest 0.4 (the smaller beta on a tie)
  between       else the first step of the grid from a rate above 0.6 to one below 0.2 (rates fall as beta grows):
                the geometric mean of its two betas, a point the grid did not measure
  ceiling       every rate above 0.6: the grid stops short; no choice
  floor         every rate below 0.2: the grid starts too high; no choice
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence

import pandas as pd

from experiments.synthetic_sequences.arms import NO_CONTROL, TOOK_UP

BAND = (0.2, 0.6)
TARGET = 0.4
KEYS = ["model", "term", "alpha"]


def choose_beta(points: Sequence[tuple[float, int, int]]) -> tuple[float, str]:
    """(beta, how) from (beta, runs that took up, runs) at each beta of the grid (module docstring)."""
    if not points:
        raise ValueError("choose_beta: no grid points; a (model, term, alpha) needs take-up counts at one beta at least")
    rates = [(beta, k / n) for beta, k, n in sorted(points)]
    if any(low_rate < BAND[0] and high_rate > BAND[1] for (_, low_rate), (_, high_rate) in itertools.combinations(rates, 2)):
        return math.nan, "unclear"
    inside = [(round(abs(rate - TARGET), 10), beta) for beta, rate in rates if BAND[0] <= rate <= BAND[1]]  # exact ties
    if inside:
        return min(inside)[1], "measured"
    # Every rate lies outside the band, and none below it comes before one above it: above...above below...below.
    for (low, low_rate), (high, high_rate) in itertools.pairwise(rates):
        if low_rate > BAND[1] and high_rate < BAND[0]:
            return math.sqrt(low * high), "between"
    return math.nan, "ceiling" if rates[0][1] > BAND[1] else "floor"


def calibration_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, term, alpha) of the mean arms: take-up at each beta, and the beta chosen."""
    mean = runs[(runs["mode"] == "mean") & (runs.controls == NO_CONTROL)]
    rows = []
    for key, group in mean.groupby(KEYS, sort=True):
        points = [(float(beta), int(at[TOOK_UP].sum()), len(at)) for beta, at in group.groupby("beta")]
        beta, how = choose_beta(points)
        grid = ", ".join(f"{b:g}: {k}/{n}" for b, k, n in points)
        rows.append({**dict(zip(KEYS, key, strict=True)), "take-up by beta": grid, "beta": beta, "how": how})
    return pd.DataFrame(rows, columns=[*KEYS, "take-up by beta", "beta", "how"])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", help="the calibration run's tables/runs.parquet")
    args = parser.parse_args(argv)
    table = calibration_table(pd.read_parquet(args.runs))
    print(table.to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
