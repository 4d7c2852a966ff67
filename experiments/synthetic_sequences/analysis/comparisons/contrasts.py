"""Contrasts between the arms of one comparison, each endpoint with the test that fits its kind of outcome.

The arms of a (family, term, alpha): `mean` and `sum` of the main family, `scale` (mean mode, reconstruction x
the mean train token count) and `balance` (sum mode, beta x that count) of its control families. For each
contrast `a - b` (COMPARISONS) the `mean_vs_sum` table holds, with the tests of inference.py:

Every arm has the same seeds in every reference block (stratified.py), so arms are compared within a block and
pooled across blocks:

  took_up (primary)     p_a - p_b over each arm's runs, which with balanced blocks is the Mantel-Haenszel risk
                        difference; Newcombe interval of the pooled runs (wider than a stratified one, as pooling
                        adds the blocks' spread); the exact p: Boschloo's with one block, the exact conditional test
                        stratified by block with several, Holm-adjusted over the (family, term, alpha)'s planned
                        contrasts; beside it the CMH p and Breslow-Day's homogeneity p over the blocks that vary (nan
                        where fewer vary than the test needs); runs per arm needed at the observed rates, at alpha /
                        the planned contrasts, in whole blocks and sized by the test run (inference.takeup_seeds_needed)
  onset_step            difference of the Kaplan-Meier median onsets (nan where one is not reached); log-rank p,
                        stratified by block
  continuous metrics    paired by (block, seed), among all pairs (subset `all`) and, for I(x;z), strategy information and
                        reconstruction, among the pairs whose runs both took up the latent (subset `took_up`): mean
                        difference with its paired t interval (with several blocks, widened to hold the two-level
                        bootstrap interval too); exact sign-flip p; TOST p for a difference within
                        +-margin; seeds needed (among the pairs that took up only). NMI, AMI, ARI (of argmax codes
                        or k-means clusters of E_q[z]), the probe and the samples' rates, secondary readings: among
                        all pairs, with the paired t p
Onset and the continuous metrics are secondary: Benjamini-Hochberg over them per (family, term, alpha,
comparison, subset). A term that declares onset its primary endpoint (planning/endpoints.py) swaps the two: Holm
over its planned onset contrasts, take-up secondary. Every row carries both the raw and the adjusted p, the smallest p its test can give at
this n, and the arm sizes. Rows exist only for arms that were run and pairs that exist.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity, stratified
from experiments.synthetic_sequences.arms import BLOCK, COMPARISON_NAMES, COMPARISONS, MODE_ARMS, NO_CONTROL, ONSET_STEP, TOOK_UP
from experiments.synthetic_sequences.metrics import margins, view

PAIRED_METRICS = view("paired_contrasts")  # among all pairs and among the pairs that took up
SECONDARY_METRICS = view("secondary_contrasts")  # among all pairs only
MARGINS = margins()
ARM_KEYS = [BLOCK, "term", "alpha", "seed"]
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
    "references",
    "p_cmh",
    "p_homogeneity",
    "bootstrap_low",
    "bootstrap_high",
]


def arms(runs: pd.DataFrame, control_of: dict[str, str]) -> dict[str, dict[str, pd.DataFrame]]:
    """{main family: {arm name: its runs}}; an arm absent from the runs is absent here."""
    result: dict[str, dict[str, pd.DataFrame]] = {}
    for family, group in runs[runs.controls == NO_CONTROL].groupby("family"):
        family_arms = {mode: group[group["mode"] == mode] for mode in MODE_ARMS}
        for control_family, parent in control_of.items():
            if parent == family:
                control = runs[runs.family == control_family]
                for kind in control.controls.unique():
                    family_arms[kind] = control[control.controls == kind]
        result[family] = {name: arm for name, arm in family_arms.items() if not arm.empty}
    return result


def term_arms(family_arms: Mapping[str, pd.DataFrame], term: str, alpha: float) -> dict[str, pd.DataFrame]:
    """The arms of one (term, alpha) of a family (an entry of `arms`); an arm without runs of it is absent."""
    chosen = {name: arm[(arm.term == term) & (arm.alpha == alpha)] for name, arm in family_arms.items()}
    return {name: arm for name, arm in chosen.items() if not arm.empty}


def takeup_count(arm: pd.DataFrame) -> str:
    """An arm's primary endpoint as the verdict prints it: 'k/n', runs that took up of the runs."""
    return f"{int(arm[TOOK_UP].sum())}/{len(arm)}"


Counts = Mapping[int, tuple[int, int]]  # an arm's (runs that took up, runs) by reference block


def arm_counts(runs: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """An arm's took_up counts by block, from its rows of the runs table."""
    return {int(block): (int(group[TOOK_UP].sum()), len(group)) for block, group in runs.groupby(BLOCK)}


def contrast_tables(a: Counts, b: Counts) -> list[tuple[int, int, int, int]]:
    """(k_a, n_a, k_b, n_b) of took_up in every block where both arms have runs, in block order."""
    return [(*a[block], *b[block]) for block in sorted(set(a) & set(b))]


def takeup_p(tables: list[tuple[int, int, int, int]]) -> tuple[float, str]:
    """The exact two-sided p of took_up, a against b, from each block's (k_a, n_a, k_b, n_b), and the test's name:
    Boschloo's with one block, the exact conditional test stratified by block with several."""
    if len(tables) == 1:
        return inference.boschloo_p(*tables[0]), "boschloo"
    return stratified.exact_stratified_p(tables), "exact stratified by reference"


def smallest_takeup_p(sizes: list[tuple[int, int]]) -> float:
    """The smallest p takeup_p can give at these (n_a, n_b) per block: every run of a takes up, none of b."""
    if len(sizes) == 1:
        return inference.smallest_boschloo_p(*sizes[0])
    return stratified.smallest_exact_stratified_p(sizes)


def takeup_row(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """took_up of arm a against arm b (all their runs, unpaired within each block)."""
    n_a, n_b, k_a, k_b = len(a), len(b), int(a[TOOK_UP].sum()), int(b[TOOK_UP].sum())
    low, high = inference.newcombe(k_a, n_a, k_b, n_b)
    tables = contrast_tables(arm_counts(a), arm_counts(b))
    p, test = takeup_p(tables)
    smallest = smallest_takeup_p([(t[1], t[3]) for t in tables])
    return {
        "metric": TOOK_UP,
        "subset": "all",
        "n_a": n_a,
        "n_b": n_b,
        "estimate": k_a / n_a - k_b / n_b,
        "rate_b": k_b / n_b,
        "ci_low": low,
        "ci_high": high,
        "interval": "newcombe",
        "p": p,
        "test": test,
        "smallest_p": smallest,
        "unconverged_runs": int((a.converged < 1).sum() + (b.converged < 1).sum()),
        "references": len(tables),
        "p_cmh": stratified.cmh_p(tables),
        "p_homogeneity": stratified.breslow_day_p(tables),
    }


def onset_row(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """onset_step of arm a against arm b: Kaplan-Meier medians and the log-rank p."""
    fits = [inference.kaplan_meier(arm[ONSET_STEP], arm.onset_observed) for arm in (a, b)]
    p = inference.logrank_p(a[ONSET_STEP], a.onset_observed, b[ONSET_STEP], b.onset_observed, a[BLOCK], b[BLOCK])
    return {
        "metric": ONSET_STEP,
        "subset": "all",
        "n_a": len(a),
        "n_b": len(b),
        "estimate": fits[0]["median"] - fits[1]["median"],
        "p": p,
        "test": ("log-rank" if a[BLOCK].nunique() == 1 else "log-rank stratified by reference")
        if np.isfinite(p)
        else "no onset in either arm",
        "references": int(a[BLOCK].nunique()),
    }


def paired_rows(pairs: pd.DataFrame, subset: str, metrics: tuple[str, ...]) -> list[dict]:
    """A row per metric over (block, seed) pairs (columns suffixed _a and _b)."""
    rows = []
    unconverged = int((pairs["converged_a"] < 1).sum() + (pairs["converged_b"] < 1).sum())
    for metric in metrics:
        if f"{metric}_a" not in pairs:
            continue
        present = pairs[[f"{metric}_a", f"{metric}_b", BLOCK]].dropna()
        differences = (present[f"{metric}_a"] - present[f"{metric}_b"]).to_numpy(dtype=float)
        if len(differences) == 0:
            continue
        delta, sd, low, high = inference.t_interval(differences)
        interval, boot_low, boot_high, blocks = "paired t", np.nan, np.nan, present[BLOCK].nunique()
        if metric in PAIRED_METRICS:
            boot_low, boot_high = stratified.two_level_bootstrap(differences, present[BLOCK].to_numpy())
            if blocks > 1 and np.isfinite(boot_low):  # the t interval treats pairs as exchangeable across blocks
                low, high, interval = min(low, boot_low), max(high, boot_high), "paired t + two-level bootstrap"
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
                "interval": interval,
                "p": p,
                "test": test,
                "p_equivalence": inference.tost_p(differences, MARGINS[metric]),
                "smallest_p": smallest,
                # only among runs that took up: over all runs the differences mix runs that did with runs that did not,
                # and the sd of such a bimodal variable sizes nothing
                "seeds_needed": inference.paired_seeds_needed(delta, sd, MARGINS[metric]) if subset == "took_up" else np.nan,
                "sd": sd,
                "unconverged_runs": unconverged,
                "references": blocks,
                "bootstrap_low": boot_low,
                "bootstrap_high": boot_high,
            }
        )
    return rows


def comparison_rows(a: pd.DataFrame, b: pd.DataFrame) -> list[dict]:
    """Every endpoint's rows for one contrast a - b within one (term, alpha)."""
    rows = [takeup_row(a, b), onset_row(a, b)]
    pairs = a.merge(b, on=ARM_KEYS, suffixes=("_a", "_b"))
    both = pairs[(pairs[f"{TOOK_UP}_a"] >= 1) & (pairs[f"{TOOK_UP}_b"] >= 1)]
    rows += paired_rows(pairs, "all", PAIRED_METRICS + SECONDARY_METRICS)
    return rows + paired_rows(both, "took_up", PAIRED_METRICS)


def primary_rows(table: pd.DataFrame, declared: Mapping[tuple[str, str, float], str]) -> pd.Series:
    """Each (family, term, alpha)'s planned contrasts on its primary endpoint: take-up, or onset where declared."""
    onset = pd.Series([(row.family, row.term, float(row.alpha)) in declared for row in table.itertuples()], index=table.index, dtype=bool)
    return ((table.metric == TOOK_UP) & ~onset) | ((table.metric == ONSET_STEP) & (table.subset == "all") & onset)


def adjust_for_multiplicity(table: pd.DataFrame, declared: Mapping[tuple[str, str, float], str]) -> pd.DataFrame:
    """Holm over each (family, term, alpha)'s planned contrasts on its primary endpoint (take-up, or a declared onset:
    planning/endpoints.py); Benjamini-Hochberg over the secondary endpoints of each (family, term, alpha, comparison,
    subset)."""
    primary = primary_rows(table, declared)
    table = table.assign(p_adjusted=np.nan, adjustment=np.where(primary, "holm", "benjamini-hochberg"))
    for _, index in table[primary].groupby(["family", "term", "alpha"]).groups.items():  # one endpoint per group
        table.loc[index, "p_adjusted"] = multiplicity.adjust(table.loc[index, "p"], "holm")
    for _, index in table[table.metric == TOOK_UP].groupby(["family", "term", "alpha"]).groups.items():
        for i in index:  # at the level Holm holds the smallest of the planned contrasts' p values to
            rates = [table.at[i, "estimate"] + table.at[i, "rate_b"], table.at[i, "rate_b"]]
            blocks = int(table.at[i, "references"])
            table.at[i, "seeds_needed"] = inference.takeup_seeds_needed(*rates, MARGINS[TOOK_UP], inference.ALPHA / len(index), blocks)
    for _, index in table[~primary].groupby(["family", "term", "alpha", "comparison", "subset"]).groups.items():
        table.loc[index, "p_adjusted"] = multiplicity.adjust(table.loc[index, "p"], "fdr_bh")
    return table


def contrast_table(
    runs: pd.DataFrame, control_of: dict[str, str], declared: Mapping[tuple[str, str, float], str] | None = None
) -> pd.DataFrame:
    """One row per (family, term, alpha, comparison, endpoint, subset) that has runs in both arms; see the module
    docstring. `declared`: the (family, term, alpha) whose primary endpoint is onset (planning/endpoints.py)."""
    rows = []
    for family, family_arms in arms(runs, control_of).items():
        for (left, right), comparison in zip(COMPARISONS, COMPARISON_NAMES, strict=True):
            if left not in family_arms or right not in family_arms:
                continue
            for (term, alpha), a in family_arms[left].groupby(["term", "alpha"]):
                b = family_arms[right][(family_arms[right].term == term) & (family_arms[right].alpha == alpha)]
                if b.empty:
                    continue
                where = {"family": family, "term": term, "alpha": alpha, "comparison": comparison}
                rows += [{**where, **row} for row in comparison_rows(a, b)]
    table = adjust_for_multiplicity(pd.DataFrame(rows, columns=[*COLUMNS, "rate_b"]), declared or {}).drop(columns="rate_b")
    statistics = [
        "estimate",
        "sd",
        "ci_low",
        "ci_high",
        "p",
        "p_adjusted",
        "p_equivalence",
        "p_cmh",
        "p_homogeneity",
        "bootstrap_low",
        "bootstrap_high",
    ]
    table[statistics] = table[statistics].astype(float).round(12)  # float residue such as -3.7e-17 for a zero mean difference reads as 0
    return table
