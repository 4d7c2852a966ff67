"""The verdict: per family, term and alpha, does sum change take-up of the latent, its onset, its magnitude and
the strategy separation it carries, and how much of it does each control reproduce? RULE states how it is read;
verdict.md prints it above the sentences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import MARGINS, arms, takeup_count, term_arms
from experiments.synthetic_sequences.analysis.comparisons.readings import control_share, finite, reading
from experiments.synthetic_sequences.analysis.comparisons.takeup_table import ROUNDING, block_counts
from experiments.synthetic_sequences.analysis.records.curves import ROUNDING_FLOOR, TAKEUP_THRESHOLD
from experiments.synthetic_sequences.analysis.report.phrases import (
    contrast_text,
    disagreement,
    resolvability,
    runs_behind,
    seeds_text,
)
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA, POWER, kaplan_meier
from experiments.synthetic_sequences.analysis.statistics.multiplicity import DECISION_DIGITS
from experiments.synthetic_sequences.arms import BLOCK, CONTROL_ARMS, MODE_EFFECT, ONSET_STEP, TOOK_UP
from experiments.synthetic_sequences.metrics import view

RULE = f"""Endpoints, in order (contrasts.py has the tests; p values are adjusted: Holm for take-up, Benjamini-Hochberg
for the others):
  take-up     share of runs whose final validation I(x;z) >= {TAKEUP_THRESHOLD:g} nats (primary); margin +-{MARGINS[TOOK_UP]:g} of the runs
  onset       Kaplan-Meier median step of take-up; log-rank test (no equivalence claim is made for onset)
  magnitude   test I(x;z) among the seeds whose runs took up the latent in both arms; margin +-{MARGINS["mutual_information"]:g} nats
  separation  strategy information, I(z; strategy) / H(strategy) from the posterior itself, all runs; margin
              +-{MARGINS["strategy_information"]:g}
Reading of a contrast a - b, from its 95% interval and adjusted p:
  no difference                           the interval lies inside +-margin and holds 0
  below the smallest effect of interest   the interval lies inside +-margin and excludes 0
  raises / lowers                         otherwise, when the adjusted p <= {ALPHA:g} and the interval excludes 0
  cannot be resolved at n                 anything else; the line gives the smallest p the test can give at
                                          this n and the seeds per arm that would resolve it at the observed
                                          values ({POWER:.0%} power at alpha {ALPHA:g}, for take-up at alpha / the planned
                                          contrasts, of the test the line runs; or an interval inside +-margin);
                                          for a continuous metric only among the seeds that took up, as over all
                                          runs it is bimodal
  onset reads earlier / later (adjusted log-rank p <= {ALPHA:g}) or cannot be told apart.
p values meet their level after rounding both to {DECISION_DIGITS} decimals: an exact tie rejects.
Each control C (scale, balance), when sum raises or lowers an endpoint:
  all of it    C - mean reads as sum - mean does, and sum - C reads no difference (or below the margin)
  part of it   C - mean and sum - C both read as sum - mean does: C lies between mean and sum
  none of it   C - mean reads no difference (or below the margin)
  unclear      anything else"""


@dataclass(frozen=True)
class Endpoint:
    name: str
    metric: str
    subset: str
    label: str


# (name, subset, label) of each endpoint; its metric is the verdict view's, in order
READINGS = (
    ("take-up", "all", "take-up"),
    ("onset", "all", "onset of take-up"),
    ("magnitude", "took_up", "I(x;z) among the seeds that took up in both arms"),
    ("separation", "all", "strategy information"),
)
ENDPOINTS = tuple(Endpoint(name, metric, subset, label) for metric, (name, subset, label) in zip(view("verdict"), READINGS, strict=True))
# of the sum - mean row
STATISTICS = ("n_a", "n_b", "references", "estimate", "ci_low", "ci_high", "p", "p_adjusted", "smallest_p", "p_homogeneity")
COLUMNS = [
    "family",
    "term",
    "alpha",
    "endpoint",
    "primary",
    "metric",
    "subset",
    "n_a",
    "n_b",
    "references",
    "estimate",
    "ci_low",
    "ci_high",
    "p",
    "p_adjusted",
    "smallest_p",
    "p_homogeneity",
    "reading",
    "scale",
    "balance",
    "seeds_needed",
    "runs",
    "unconverged_runs",
    "verdict",
]


def endpoint_line(endpoint: Endpoint, rows: dict[str, dict], arm_text: str, planned: int) -> dict:
    """One endpoint of one (family, term, alpha): its reading, each control's share and the sentence."""
    effect_row = rows.get(MODE_EFFECT)
    margin = MARGINS.get(endpoint.metric, math.nan)
    if effect_row is None:
        text = f"{endpoint.label}: no seed has runs in both arms to compare."
        if endpoint.subset == "took_up":
            text = f"{endpoint.label}: no seed took up the latent in both the mean and the sum arm, so there is nothing to pair."
        return {"reading": "not comparable", "shares": {}, "text": text, "row": None}
    effect = reading(effect_row, margin)
    text = f"{endpoint.label} ({arm_text}): {contrast_text(effect_row)}: "
    if effect == "cannot be resolved":
        text += resolvability(effect_row, planned)
    elif effect == "no onset in either arm":  # the test had nothing to run on: say so once
        text = (
            f"{endpoint.label} ({arm_text}): no run of the mean or the sum arm took up the latent within its budget, "
            "so there is no onset to compare"
        )
    elif endpoint.metric == ONSET_STEP:
        text += f"sum's onset comes {effect}" if effect in ("earlier", "later") else effect
    else:
        text += {"raises": f"sum raises {endpoint.label}", "lowers": f"sum lowers {endpoint.label}"}.get(effect, effect)
    if endpoint.metric == TOOK_UP and (note := disagreement(effect_row)):
        text += "." + note
    shares, needed = {}, effect_row["seeds_needed"] if effect == "cannot be resolved" else math.nan
    blocks = int(effect_row["references"]) if finite(effect_row.get("references")) else 1
    if effect in ("raises", "lowers"):
        details, absent = [], []
        for kind in CONTROL_ARMS:
            if f"{kind}-mean" not in rows or f"sum-{kind}" not in rows:
                absent.append(kind)
                continue
            pair = (rows[f"{kind}-mean"], rows[f"sum-{kind}"])
            shares[kind] = control_share(effect, *(reading(row, margin) for row in pair))
            evidence = f"{contrast_text(pair[0])}; {contrast_text(pair[1])}"
            if shares[kind] != "unclear":
                details.append(f"{kind} reproduces {shares[kind]} ({evidence})")
                continue
            unresolved = [row["seeds_needed"] for row in pair if reading(row, margin) == "cannot be resolved"]
            needed = max((value for value in (needed, *unresolved) if not pd.isna(value)), default=math.nan)
            needed_here = seeds_text(max(unresolved, default=math.nan), blocks)
            details.append(f"how much of it {kind} reproduces is unclear ({evidence}{needed_here})")
        if details and absent:
            details.append(f"no {' or '.join(absent)} control was run")
        joined = "; ".join(details) or "no control was run, so scale and length weighting cannot be told apart"
        text += ". " + joined[0].upper() + joined[1:]
    return {"reading": effect, "shares": shares, "text": text + ".", "row": effect_row, "seeds_needed": needed}


def ended_line(endpoint: Endpoint, runs: pd.DataFrame) -> dict | None:
    """Where runs ended at their confirmed take-up (the trainer's stop_at_take_up), the line of an endpoint read at
    the budget's end (magnitude, separation): not read. None where none ended early or the endpoint is the event's."""
    (ended_at,) = view("ended_early")
    if endpoint.metric in (TOOK_UP, ONSET_STEP) or ended_at not in runs or not (ended := int(runs[ended_at].notna().sum())):
        return None
    text = (
        f"{endpoint.label}: not read: {ended} of {len(runs)} runs ended at their confirmed take-up (stop_at_take_up), "
        "so their final I(x;z) and strategy information are those of that step, not of the budget."
    )
    return {"reading": "not read", "shares": {}, "text": text, "row": None}


def arm_summary(endpoint: Endpoint, group_arms: dict[str, pd.DataFrame], medians: dict[str, float]) -> str:
    """Per arm, what the endpoint counts: 'mean 0/10, sum 6/10' for take-up (with several reference blocks, per block
    too, and the take-ups that were rounding events), the seeds behind the others."""
    if endpoint.metric == TOOK_UP:
        several = any(arm[BLOCK].nunique() > 1 for arm in group_arms.values())
        text = ", ".join(f"{name} {takeup_count(arm)}" + (f" ({block_counts(arm)})" if several else "") for name, arm in group_arms.items())
        rounding = {name: int(arm[ROUNDING].sum()) for name, arm in group_arms.items() if ROUNDING in arm}
        if any(rounding.values()):
            counted = ", ".join(f"{name} {count}" for name, count in rounding.items() if count)
            text += f"; of these, rounding events (taken up from I(x;z) < {ROUNDING_FLOOR:g} nats): {counted}"
        return text
    if endpoint.metric == ONSET_STEP:
        parts = []
        for name, arm in group_arms.items():
            median = medians[name]
            reached = f"median step {median:.0f}" if finite(median) else "median not reached"
            parts.append(f"{name} {int(arm.onset_observed.sum())} of {len(arm)} with an onset, {reached}")
        return "; ".join(parts)
    if endpoint.subset == "took_up":
        return ", ".join(f"{name} {int(arm[TOOK_UP].sum())} took up" for name, arm in group_arms.items())
    return ", ".join(f"{name} n={len(arm)}" for name, arm in group_arms.items())


def verdict_table(
    runs: pd.DataFrame, contrasts: pd.DataFrame, control_of: dict[str, str], declared: Mapping[tuple[str, str, float], str] | None = None
) -> pd.DataFrame:
    """One row per (main family, term, alpha, endpoint) whose family has a mean and a sum arm, its primary endpoint
    (take-up, or the one `declared` for it: planning/endpoints.py) first; see the module docstring."""
    declared = declared or {}
    rows = []
    for family, family_arms in arms(runs, control_of).items():
        if not {"mean", "sum"} <= set(family_arms):
            continue
        for (term, alpha), _ in family_arms["sum"].groupby(["term", "alpha"]):
            group_arms = term_arms(family_arms, term, alpha)
            if "mean" not in group_arms:
                continue
            mine = contrasts[(contrasts.family == family) & (contrasts.term == term) & (contrasts.alpha == alpha)]
            planned = int((mine.metric == TOOK_UP).sum())
            involved, behind = pd.concat(group_arms.values()), runs_behind(group_arms)
            # each arm's Kaplan-Meier median onset, once: the onset line prints them and reads its direction from them
            medians = {name: kaplan_meier(arm[ONSET_STEP], arm.onset_observed)["median"] for name, arm in group_arms.items()}
            first = declared.get((family, term, float(alpha)), ENDPOINTS[0].name)
            for endpoint in sorted(ENDPOINTS, key=lambda endpoint: endpoint.name != first):  # the primary first
                chosen = mine[(mine.metric == endpoint.metric) & (mine.subset == endpoint.subset)]
                by_comparison = {row["comparison"]: row for row in chosen.to_dict("records")}
                if endpoint.metric == ONSET_STEP:
                    for row in by_comparison.values():
                        row["median_a"], row["median_b"] = (medians[name] for name in row["comparison"].split("-"))
                        row["onset_share_a"], row["onset_share_b"] = (
                            group_arms[name].onset_observed.mean() for name in row["comparison"].split("-")
                        )
                line = ended_line(endpoint, involved) or endpoint_line(
                    endpoint, by_comparison, arm_summary(endpoint, group_arms, medians), planned
                )
                effect_row = line["row"] or {}
                rows.append(
                    {
                        "family": family,
                        "term": term,
                        "alpha": alpha,
                        "endpoint": endpoint.name,
                        "primary": endpoint.name == first,
                        "metric": endpoint.metric,
                        "subset": endpoint.subset,
                        **{key: effect_row.get(key, math.nan) for key in STATISTICS},
                        "reading": line["reading"],
                        **{kind: line["shares"].get(kind, "-") for kind in CONTROL_ARMS},
                        "seeds_needed": line.get("seeds_needed", math.nan),
                        "runs": behind,
                        "unconverged_runs": int((involved.converged < 1).sum()),
                        "verdict": line["text"],
                    }
                )
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"n_a": "Int64", "n_b": "Int64", "references": "Int64", "primary": bool})
