"""The note's question at a glance: the table that opens verdict.md, one row per (family, term, alpha).

A row gives the primary endpoint of every arm (take-up: runs that took up the latent, of the runs), sum - mean with
its 95% interval, its p, and its reading under the verdict's rule (Holm over the term's own planned contrasts), then
what each control reproduces of it. Its last column adjusts every planned take-up contrast of the whole pilot together
(Holm over all rows' contrasts: sum - mean and each control's), and gives the sum - mean one's: the p for a reader
who asks whether sum changes take-up in any term of the pilot at all.
"""

from __future__ import annotations

import math

import pandas as pd
from statsmodels.stats.multitest import multipletests

from experiments.synthetic_sequences.analysis.contrasts import PRIMARY, arms
from experiments.synthetic_sequences.analysis.verdict import CONTROL_ARMS

PRIMARY_ENDPOINT = "take-up"
ARMS = ("mean", "sum", *CONTROL_ARMS)
ACROSS = "p (Holm across the pilot)"
COLUMNS = [
    "family",
    "term",
    "alpha",
    "beta",
    "endpoint",
    *ARMS,
    "sum - mean",
    "ci_low",
    "ci_high",
    "p",
    "p_adjusted",
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


def arm_count(arm: pd.DataFrame | None) -> str:
    return "-" if arm is None else f"{int(arm[PRIMARY].sum())}/{len(arm)}"


def cross_term_table(verdict: pd.DataFrame, runs: pd.DataFrame, contrasts: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """One row per (family, term, alpha) of the verdict (module docstring), in the verdict's order."""
    family_arms = arms(runs, control_of)
    rows = []
    for line in verdict[verdict.endpoint == PRIMARY_ENDPOINT].to_dict("records"):
        group = {name: arm[(arm.term == line["term"]) & (arm.alpha == line["alpha"])] for name, arm in family_arms[line["family"]].items()}
        group = {name: arm for name, arm in group.items() if not arm.empty}
        rows.append(
            {
                "family": line["family"],
                "term": line["term"],
                "alpha": line["alpha"],
                "beta": float(group["mean"].beta.iloc[0]),  # a control pairs at its main family's beta (pairing.py)
                "endpoint": PRIMARY_ENDPOINT,
                **{name: arm_count(group.get(name)) for name in ARMS},
                "sum - mean": line["estimate"],
                "ci_low": line["ci_low"],
                "ci_high": line["ci_high"],
                "p": line["p"],
                "p_adjusted": line["p_adjusted"],
                "reading": line["reading"],
                **{f"{kind} reproduces": line[kind] for kind in CONTROL_ARMS},
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS[:-1])
    planned = contrasts[contrasts.metric == PRIMARY].reset_index(drop=True)
    planned["across"] = holm_across(planned["p"].astype(float))
    effect = planned[planned.comparison == "sum-mean"].set_index(["family", "term", "alpha"])["across"]
    table[ACROSS] = [effect.get((row.family, row.term, row.alpha), math.nan) for row in table.itertuples()]
    return table


def signed(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:+.3f}"


def glance_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The table as verdict.md prints it: the interval beside its estimate, p values to 2 significant digits."""
    shown = table[["family", "term", "alpha", "beta", "endpoint", *ARMS]].copy()
    shown["sum - mean [95% interval]"] = [
        f"{signed(row['sum - mean'])} [{signed(row['ci_low'])}, {signed(row['ci_high'])}]" for row in table.to_dict("records")
    ]
    for column, name in (("p_adjusted", "p (Holm in term)"), (ACROSS, ACROSS)):
        shown[name] = ["-" if pd.isna(value) else f"{value:.2g}" for value in table[column]]
    shown["reading"] = table["reading"]
    for kind in CONTROL_ARMS:
        shown[f"{kind} reproduces"] = table[f"{kind} reproduces"]
    return shown


def multiplicity_line(contrasts: pd.DataFrame) -> str:
    """What the table's p values hold, said once under it."""
    planned = int((contrasts.metric == PRIMARY).sum())
    return (
        f"Each row reads its term under Holm over that term's own planned take-up contrasts (`p (Holm in term)`): every "
        f"(family, term) is one of the note's questions, and the verdict holds each at 5%. `{ACROSS}` adjusts all "
        f"{planned} planned take-up contrasts of the pilot together (sum - mean and the controls', every row), for the "
        "pilot-wide claim that sum changes take-up in some term."
    )
