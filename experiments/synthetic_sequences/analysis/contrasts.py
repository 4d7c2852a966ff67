"""Contrasts between the arms of one comparison, each endpoint with the test that fits its kind of outcome.

The arms of a (family, term, alpha): `mean` and `sum` of the main family, `scale` (mean mode, reconstruction x
the mean train token count) and `balance` (sum mode, beta x that count) of its control families. For each
contrast `a - b` (COMPARISONS) the `mean_vs_sum` table holds, with the tests of inference.py:

  took_up (primary)     p_a - p_b over each arm's runs; Newcombe interval; Boschloo's exact p, Holm-adjusted over the
                        (family, term, alpha)'s planned contrasts; seeds per arm needed at the observed rates, at
                        alpha / the planned contrasts
  onset_step            difference of the Kaplan-Meier median onsets (nan where one is not reached); log-rank p
  continuous metrics    paired by seed, among all pairs (subset `all`) and, for I(x;z), strategy information and
                        reconstruction, among the pairs whose runs both took up the latent (subset `took_up`): mean
                        difference with its paired t interval; exact sign-flip p; TOST p for a difference within
                        +-margin; seeds needed (among the pairs that took up only). NMI, AMI, ARI (of argmax codes
                        or k-means clusters of E_q[z]), the probe and the samples' rates, secondary readings: among
                        all pairs, with the paired t p
Onset and the continuous metrics are secondary: Benjamini-Hochberg over them per (family, term, alpha,
comparison, subset). Every row carries both the raw and the adjusted p, the smallest p its test can give at
this n, and the arm sizes. Rows exist only for arms that were run and pairs that exist.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis import inference
from experiments.synthetic_sequences.metrics import margins, view

# sum - mean is the effect; the control contrasts say how much of it each confound reproduces
COMPARISONS = (("sum", "mean"), ("scale", "mean"), ("balance", "mean"), ("sum", "scale"), ("sum", "balance"))
PRIMARY = "took_up"
ONSET = "onset_step"
PAIRED_METRICS = view("paired_contrasts")  # among all pairs and among the pairs that took up
SECONDARY_METRICS = view("secondary_contrasts")  # among all pairs only
MARGINS = margins()
ARM_KEYS = ["term", "alpha", "seed"]
COLUMNS = [
    "family",
    "term",
    "alpha",
    "comparison",
    "metric",
    "subset",
    "n_a",
    "n_b",
    "estimate",
    "ci_low",
    "ci_high",
    "interval",
    "p",
    "test",
    "p_adjusted",
    "adjustment",
    "p_equivalence",
    "smallest_p",
    "seeds_needed",
    "sd",
    "unconverged_runs",
]


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


def takeup_row(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """took_up of arm a against arm b (all their runs, unpaired)."""
    n_a, n_b, k_a, k_b = len(a), len(b), int(a[PRIMARY].sum()), int(b[PRIMARY].sum())
    low, high = inference.newcombe(k_a, n_a, k_b, n_b)
    return {
        "metric": PRIMARY,
        "subset": "all",
        "n_a": n_a,
        "n_b": n_b,
        "estimate": k_a / n_a - k_b / n_b,
        "rate_b": k_b / n_b,
        "ci_low": low,
        "ci_high": high,
        "interval": "newcombe",
        "p": inference.boschloo_p(k_a, n_a, k_b, n_b),
        "test": "boschloo",
        "smallest_p": inference.smallest_boschloo_p(n_a, n_b),
        "unconverged_runs": int((a.converged < 1).sum() + (b.converged < 1).sum()),
    }


def onset_row(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """onset_step of arm a against arm b: Kaplan-Meier medians and the log-rank p."""
    fits = [inference.kaplan_meier(arm[ONSET], arm.onset_observed) for arm in (a, b)]
    p = inference.logrank_p(a[ONSET], a.onset_observed, b[ONSET], b.onset_observed)
    return {
        "metric": ONSET,
        "subset": "all",
        "n_a": len(a),
        "n_b": len(b),
        "estimate": fits[0]["median"] - fits[1]["median"],
        "p": p,
        "test": "log-rank" if np.isfinite(p) else "no onset in either arm",
    }


def paired_rows(pairs: pd.DataFrame, subset: str, metrics: tuple[str, ...]) -> list[dict]:
    """A row per metric over seed pairs (columns suffixed _a and _b)."""
    rows = []
    unconverged = int((pairs["converged_a"] < 1).sum() + (pairs["converged_b"] < 1).sum())
    for metric in metrics:
        if f"{metric}_a" not in pairs:
            continue
        differences = (pairs[f"{metric}_a"] - pairs[f"{metric}_b"]).dropna().to_numpy(dtype=float)
        if len(differences) == 0:
            continue
        delta, sd, low, high = inference.t_interval(differences)
        if metric in PAIRED_METRICS:
            p, draws = inference.sign_flip_p(differences)
            test, smallest = (
                (f"sign-flip, {draws} draws" if draws else "sign-flip, exact"),
                inference.smallest_sign_flip_p(len(differences)),
            )
        else:
            p, test, smallest = inference.paired_t_p(differences), "paired t", np.nan
        rows.append(
            {
                "metric": metric,
                "subset": subset,
                "n_a": len(differences),
                "n_b": len(differences),
                "estimate": delta,
                "ci_low": low,
                "ci_high": high,
                "interval": "paired t",
                "p": p,
                "test": test,
                "p_equivalence": inference.tost_p(differences, MARGINS[metric]),
                "smallest_p": smallest,
                # only among runs that took up: over all runs the differences mix runs that did with runs that did not,
                # and the sd of such a bimodal variable sizes nothing
                "seeds_needed": inference.paired_seeds_needed(delta, sd, MARGINS[metric]) if subset == "took_up" else np.nan,
                "sd": sd,
                "unconverged_runs": unconverged,
            }
        )
    return rows


def comparison_rows(a: pd.DataFrame, b: pd.DataFrame) -> list[dict]:
    """Every endpoint's rows for one contrast a - b within one (term, alpha)."""
    rows = [takeup_row(a, b), onset_row(a, b)]
    pairs = a.merge(b, on=ARM_KEYS, suffixes=("_a", "_b"))
    both = pairs[(pairs[f"{PRIMARY}_a"] >= 1) & (pairs[f"{PRIMARY}_b"] >= 1)]
    rows += paired_rows(pairs, "all", PAIRED_METRICS + SECONDARY_METRICS)
    return rows + paired_rows(both, "took_up", PAIRED_METRICS)


def adjust_for_multiplicity(table: pd.DataFrame) -> pd.DataFrame:
    """Holm over each (family, term, alpha)'s planned contrasts on take-up; Benjamini-Hochberg over the secondary
    endpoints of each (family, term, alpha, comparison, subset)."""
    primary = table.metric == PRIMARY
    table = table.assign(p_adjusted=np.nan, adjustment=np.where(primary, "holm", "benjamini-hochberg"))
    for _, index in table[primary].groupby(["family", "term", "alpha"]).groups.items():
        table.loc[index, "p_adjusted"] = inference.adjust(table.loc[index, "p"], "holm")
        for i in index:  # at the level Holm holds the smallest of the planned contrasts' p values to
            rates = [table.at[i, "estimate"] + table.at[i, "rate_b"], table.at[i, "rate_b"]]
            table.at[i, "seeds_needed"] = inference.takeup_seeds_needed(*rates, MARGINS[PRIMARY], inference.ALPHA / len(index))
    for _, index in table[~primary].groupby(["family", "term", "alpha", "comparison", "subset"]).groups.items():
        table.loc[index, "p_adjusted"] = inference.adjust(table.loc[index, "p"], "fdr_bh")
    return table


def contrast_table(runs: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """One row per (family, term, alpha, comparison, endpoint, subset) that has runs in both arms; see the module docstring."""
    rows = []
    for family, family_arms in arms(runs, control_of).items():
        for left, right in COMPARISONS:
            if left not in family_arms or right not in family_arms:
                continue
            for (term, alpha), a in family_arms[left].groupby(["term", "alpha"]):
                b = family_arms[right][(family_arms[right].term == term) & (family_arms[right].alpha == alpha)]
                if b.empty:
                    continue
                where = {"family": family, "term": term, "alpha": alpha, "comparison": f"{left}-{right}"}
                rows += [{**where, **row} for row in comparison_rows(a, b)]
    table = adjust_for_multiplicity(pd.DataFrame(rows, columns=[*COLUMNS, "rate_b"])).drop(columns="rate_b")
    statistics = ["estimate", "sd", "ci_low", "ci_high", "p", "p_adjusted", "p_equivalence"]
    table[statistics] = table[statistics].astype(float).round(12)  # float residue such as -3.7e-17 for a zero mean difference reads as 0
    return table


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
]


def arm_table(runs: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """Take-up per arm: k of n runs with its Clopper-Pearson interval, and the Kaplan-Meier median onset with its
    interval (nan where the curve never falls to one half, or the bound is not reached)."""
    rows = []
    for family, family_arms in arms(runs, control_of).items():
        for name, arm in family_arms.items():
            for (term, alpha), group in arm.groupby(["term", "alpha"]):
                k, n = int(group[PRIMARY].sum()), len(group)
                low, high = inference.clopper_pearson(k, n)
                fit = inference.kaplan_meier(group[ONSET], group.onset_observed)
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
                    }
                )
    return pd.DataFrame(rows, columns=ARM_COLUMNS)
