"""Paired contrasts between the arms of one comparison, with 95% paired t intervals over seeds.

The arms of a (family, term, alpha): `mean` and `sum` of the main family, `scale` (mean mode, reconstruction x
the mean train token count) and `balance` (sum mode, beta x that count) of its control families. Runs pair
by seed. For each contrast `a - b` and metric:

    d_s = a_s - b_s over the n seeds both arms have,   interval = mean(d) +- t(0.975, n-1) * sd(d) / sqrt(n)

With n < 2 there is no interval (nan). Rows exist only for arms that were run.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# sum - mean is the effect; the control contrasts say which confound reproduces it
COMPARISONS = (("sum", "mean"), ("scale", "mean"), ("balance", "mean"), ("sum", "scale"), ("sum", "balance"))
CONTRAST_METRICS = (
    "mutual_information",
    "nmi",
    "ami",
    "ari",
    "probe_accuracy",
    "kl",
    "shuffled_z_nll_rise_per_token",
    "recon_nll_per_token",
    "parse_rate",
    "answer_accuracy",
)  # reconstruction_to_kl is left out: with KL near 0 its differences are of order 1e5 and mean nothing
ARM_KEYS = ["term", "alpha", "seed"]
COLUMNS = [
    "family",
    "term",
    "alpha",
    "comparison",
    "metric",
    "n",
    "delta",
    "sd",
    "ci_low",
    "ci_high",
    "unconverged_runs",
]


def t_quantile(probability: float, df: int) -> float:
    """t(probability, df). scipy is imported here, not at the top: every per-run `tables extract` job imports this
    module through tables.py, and scipy.stats would add half a second to each."""
    from scipy import stats

    return float(stats.t.ppf(probability, df))


def t_interval(differences: np.ndarray, level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean, sd, low, high) of paired differences; the interval is mean +- t(1 - (1-level)/2, n-1) sd / sqrt(n), nan for n < 2."""
    n = len(differences)
    if n == 0:
        return math.nan, math.nan, math.nan, math.nan
    mean = float(np.mean(differences))
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    sd = float(np.std(differences, ddof=1))
    half = t_quantile(1 - (1 - level) / 2, n - 1) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def seeds_to_resolve(delta: float, sd: float, margin: float, limit: int = 1000) -> float:
    """The fewest seeds whose interval, at the observed mean difference and paired sd, would either exclude 0
    (|delta| >= margin) or fit inside +-margin (|delta| < margin); nan when no interval can be formed, inf past `limit`."""
    if not (math.isfinite(delta) and math.isfinite(sd)):
        return math.nan
    target = abs(delta) if abs(delta) >= margin else margin - abs(delta)
    for n in range(2, limit + 1):
        if t_quantile(0.975, n - 1) * sd / math.sqrt(n) < target:
            return float(n)
    return math.inf


def arms(runs: pd.DataFrame, control_of: dict[str, str]) -> dict[str, dict[str, pd.DataFrame]]:
    """{main family: {arm name: its runs}}; an arm absent from the runs is absent here."""
    result: dict[str, dict[str, pd.DataFrame]] = {}
    for family, group in runs[runs.controls == "none"].groupby("family"):
        family_arms = {mode: group[group["mode"] == mode] for mode in ("mean", "sum")}
        for control_family, parent in control_of.items():
            if parent == family:
                control = runs[runs.family == control_family]
                for kind in control.controls.unique():
                    family_arms[kind] = control[control.controls == kind]
        result[family] = {name: arm for name, arm in family_arms.items() if not arm.empty}
    return result


def contrast_table(runs: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """One row per (family, term, alpha, comparison, metric) that has runs in both arms; see the module docstring."""
    rows = []
    metrics = [m for m in CONTRAST_METRICS if m in runs.columns]
    converged = "converged" in runs.columns
    for family, family_arms in arms(runs, control_of).items():
        for left, right in COMPARISONS:
            if left not in family_arms or right not in family_arms:
                continue
            merged = family_arms[left].merge(family_arms[right], on=ARM_KEYS, suffixes=("_a", "_b"))
            for (term, alpha), pair in merged.groupby(["term", "alpha"]):
                unconverged = int((pair["converged_a"] < 1).sum() + (pair["converged_b"] < 1).sum()) if converged else 0
                for metric in metrics:
                    differences = (pair[f"{metric}_a"] - pair[f"{metric}_b"]).dropna().to_numpy(dtype=float)
                    if len(differences) == 0:
                        continue
                    delta, sd, low, high = t_interval(differences)
                    rows.append(
                        {
                            "family": family,
                            "term": term,
                            "alpha": alpha,
                            "comparison": f"{left}-{right}",
                            "metric": metric,
                            "n": len(differences),
                            "delta": delta,
                            "sd": sd,
                            "ci_low": low,
                            "ci_high": high,
                            "unconverged_runs": unconverged,
                        }
                    )
    table = pd.DataFrame(rows, columns=COLUMNS)
    statistics = ["delta", "sd", "ci_low", "ci_high"]
    table[statistics] = table[statistics].round(12)  # float residue such as -3.7e-17 for a zero mean difference reads as 0
    return table
