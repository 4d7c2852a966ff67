"""The note's question at a glance: the table that opens verdict.md, one row per (family, term, alpha).

A row gives the primary endpoint of every arm (take-up: runs that took up the latent, of the runs; or, for a term
that declares onset primary in the config, runs with an onset of the runs and the median step), sum - mean with
its 95% interval, its p, and its reading under the verdict's rule (Holm over the term's own planned contrasts), then
what each control reproduces of it. Its last column adjusts every planned take-up contrast of the whole pilot together
(Holm over all rows' contrasts: sum - mean and each control's), and gives the sum - mean one's: the p for a reader
who asks whether sum changes take-up in any term of the pilot at all.

Under a sequential design the looks decided each contrast (sequential/decisions.py), and the table gives the design's
decision on sum - mean beside the fixed-design reading of the runs trained, which is naive there; the across-pilot
column is left out, since the design holds each (family, term) at 5% and nothing across them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
from statsmodels.stats.multitest import multipletests

from experiments.synthetic_sequences.analysis.comparisons.contrasts import arms, takeup_count, term_arms
from experiments.synthetic_sequences.analysis.statistics.inference import kaplan_meier
from experiments.synthetic_sequences.arms import ARMS, CONTROL_ARMS, MODE_EFFECT, ONSET, ONSET_STEP
from experiments.synthetic_sequences.sequential.text import decision_text

ACROSS = "p (Holm across the pilot)"
DESIGN_DECISION = "design decision"
TERM_LABEL = "term label"
COLUMNS = [
    "family",
    "term",
    TERM_LABEL,
    "alpha",
    "beta",
    "endpoint",
    *ARMS,
    "sum - mean",
    "ci_low",
    "ci_high",
    "p",
    "p_adjusted",
    DESIGN_DECISION,
    "reading",
    *(f"{kind} reproduces" for kind in CONTROL_ARMS),
    ACROSS,
]


def holm_across(p_values: pd.Series) -> pd.Series:
    """Holm's adjustment over the finite p values of a column; a row without a test keeps nan."""
    finite = p_values.dropna()
    adjusted = pd.Series(math.nan, index=p_values.index)
    if not finite.empty:
        adjusted[finite.index] = multipletests(finite.to_numpy(dtype=float), method="holm")[1]
    return adjusted


def planned_contrasts(contrasts: pd.DataFrame) -> int:
    """How many planned contrasts on a primary endpoint the pilot has (every row's sum - mean and its controls')."""
    return int((contrasts.adjustment == "holm").sum())


def arm_cell(arm: pd.DataFrame, endpoint: str) -> str:
    """An arm's primary endpoint: 'k/n' took up, or for onset 'k/n, median 250' (runs with an onset, KM median)."""
    if endpoint != ONSET:
        return takeup_count(arm)
    median = kaplan_meier(arm[ONSET_STEP], arm.onset_observed)["median"]
    return f"{int(arm.onset_observed.sum())}/{len(arm)}, median {'not reached' if math.isnan(median) else f'{median:.0f}'}"


def design_decisions(looks: Sequence[Mapping]) -> dict[tuple[str, str, float], str]:
    """(family, term, alpha): the design's decision on sum - mean in the last look, with the look that made it."""
    if not looks:
        return {}
    decided = {}
    for group in looks[-1]["groups"]:
        decision = group["decisions"].get(MODE_EFFECT)
        if decision is not None:
            text = decision_text(decision, len(looks[0]["design"]["looks"]))
            at = "" if text.startswith(("open", "undecided")) else f" (look {decision['look']})"
            decided[(group["family"], group["term"], float(group["alpha"]))] = text + at
    return decided


def term_label(term: str, family: str, hybrid_mixes: Mapping[str, str]) -> str:
    """The term as the tables name it: a hybrid with its coefficients where two families' hybrids mix differently."""
    if term == "hybrid" and len(set(hybrid_mixes.values())) > 1:
        return f"hybrid ({hybrid_mixes[family]})"
    return term


def cross_term_table(
    verdict: pd.DataFrame,
    runs: pd.DataFrame,
    contrasts: pd.DataFrame,
    control_of: dict[str, str],
    looks: Sequence[Mapping] = (),
    hybrid_mixes: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per (family, term, alpha) of the verdict (module docstring), in the verdict's order; `hybrid_mixes`:
    family -> its hybrid's coefficients (metrics_files.hybrid_mixes), for the term's label."""
    family_arms = arms(runs, control_of)
    decided = design_decisions(looks)
    rows = []
    for line in verdict[verdict.primary].to_dict("records"):
        group = term_arms(family_arms[line["family"]], line["term"], line["alpha"])
        rows.append(
            {
                "family": line["family"],
                "term": line["term"],
                TERM_LABEL: term_label(line["term"], line["family"], hybrid_mixes or {}),
                "alpha": line["alpha"],
                "beta": float(group["mean"].beta.iloc[0]),  # a control pairs at its main family's beta (pairing.py)
                "endpoint": line["endpoint"],
                **{name: arm_cell(group[name], line["endpoint"]) if name in group else "-" for name in ARMS},
                "sum - mean": line["estimate"],
                "ci_low": line["ci_low"],
                "ci_high": line["ci_high"],
                "p": line["p"],
                "p_adjusted": line["p_adjusted"],
                DESIGN_DECISION: decided.get((line["family"], line["term"], float(line["alpha"])), "-" if not looks else "not planned"),
                "reading": line["reading"],
                **{f"{kind} reproduces": line[kind] for kind in CONTROL_ARMS},
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS[:-1])
    if looks:  # the design holds each (family, term) at 5% and claims nothing across them
        table[ACROSS] = math.nan
        return table
    planned = contrasts[contrasts.adjustment == "holm"].reset_index(drop=True)
    planned["across"] = holm_across(planned["p"].astype(float))
    effect = planned[planned.comparison == MODE_EFFECT].set_index(["family", "term", "alpha"])["across"]
    table[ACROSS] = [effect.get((row.family, row.term, row.alpha), math.nan) for row in table.itertuples()]
    return table


def signed(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:+.3f}"


def glance_frame(table: pd.DataFrame, design: bool) -> pd.DataFrame:
    """The table as verdict.md prints it: the interval beside its estimate, p values to 2 significant digits; under a
    sequential design its decision first and the fixed reading named as naive."""
    shown = table[["family", TERM_LABEL, "alpha", "beta", "endpoint", *ARMS]].rename(columns={TERM_LABEL: "term"})
    shown["sum - mean [95% interval]"] = [
        f"{signed(row['sum - mean'])} [{signed(row['ci_low'])}, {signed(row['ci_high'])}]" for row in table.to_dict("records")
    ]
    if design:
        shown[DESIGN_DECISION] = table[DESIGN_DECISION]
    for column, name in (("p_adjusted", "p (Holm in term)"), *(() if design else ((ACROSS, ACROSS),))):
        shown[name] = ["-" if pd.isna(value) else f"{value:.2g}" for value in table[column]]
    shown["fixed-design reading (naive)" if design else "reading"] = table["reading"]
    for kind in CONTROL_ARMS:
        shown[f"{kind} reproduces"] = table[f"{kind} reproduces"]
    return shown


def multiplicity_line(table: pd.DataFrame, planned: int, design: bool) -> str:
    """What the table's p values hold, said once under it."""
    declared = [f"{row.family} {row.term}" for row in table.itertuples() if row.endpoint == ONSET]
    onset = (
        f" {', '.join(declared)} declared onset their primary endpoint in the config (take-up sits at a ceiling or a "
        "floor there): Holm spans their planned onset contrasts (stratified log-rank), and take-up is secondary."
        if declared
        else ""
    )
    if design:
        return (
            "Each (family, term) is one of the note's questions, and the sequential design holds each at 5%: its looks "
            "split their alpha over that term's planned take-up contrasts (the design's section below). The design "
            "decision is the one that counts; the interval, p and reading beside it are those of a fixed design of the "
            "runs the design trained, which the design's stopping makes naive. Nothing is claimed across terms."
        )
    return (
        f"Each row reads its term under Holm over that term's own planned contrasts on its primary endpoint (`p (Holm in "
        f"term)`): every (family, term) is one of the note's questions, and the verdict holds each at 5%. `{ACROSS}` "
        f"adjusts all {planned} planned contrasts of the pilot together (sum - mean and the controls', every row), for "
        f"the pilot-wide claim that sum changes the primary endpoint in some term.{onset}"
    )
