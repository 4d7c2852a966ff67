"""One look of a sequential design: a decision for each planned take-up contrast, and the arms the next look trains.

The look files themselves are written and checked by look_files.py (its CLI is the design_look rule's).

The look reads the runs' metrics files as extraction wrote them; the tables hold every run to the grid and the
current inputs once the design has stopped (bindings.py).

At look k the design spends its increment alpha_k (sequential/design.py), shared evenly among the m planned contrasts
of a (family, term, alpha) (m fixed by the arms run, whichever are still open). Each open contrast gets alpha_k / m
for either decision:

  different    (raises / lowers) its take-up p (contrasts.takeup_p: Boschloo with one reference block, the exact
               test stratified by block with several) <= alpha_k / m (multiplicity.rejects: the tie policy of the
               verdict); the file's p_adjusted is Bonferroni's min(1, m p)
  equivalent   the Newcombe interval of the pooled runs at level 1 - 2 alpha_k / m lies inside +-margin: TOST at
               alpha_k / m
  continue     neither, before the last look
  undecided    neither, at the last look ("undecided at N")

Error control, both kinds of decision together: a contrast has at most one true null (p_a = p_b, or |p_a - p_b| >=
margin), each look tests it at alpha_k / m whatever the looks before decided, so by the union bound over contrasts
and looks P(any false decision, raises/lowers or equivalent) <= sum of alpha_k = alpha. The decision interval is
that look's 1 - 2 alpha_k / m Newcombe interval: per contrast and per look, not simultaneous, and approximate
(Newcombe's coverage is nominal, not exact).

A decided contrast stays decided, with the look that decided it. An arm trains at the next look while any contrast it
belongs to is open. Take-up is the primary endpoint and the only one that steers the design.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import (
    MARGINS,
    Counts,
    arm_counts,
    arms,
    contrast_tables,
    smallest_takeup_p,
    takeup_p,
)
from experiments.synthetic_sequences.analysis.statistics import inference, multiplicity
from experiments.synthetic_sequences.arms import COMPARISON_NAMES, TOOK_UP
from experiments.synthetic_sequences.sequential.design import EQUIVALENT, OPEN, UNDECIDED, Design, DesignError
from experiments.synthetic_sequences.sequential.looks import Group

SMALLEST_INCREMENT = 1e-6  # a look spending less alpha than this can decide nothing (check_decidable)


@dataclass(frozen=True)
class Decision:
    comparison: str  # arms.COMPARISON_NAMES: "sum-mean", ...
    decision: str  # raises, lowers, or design's EQUIVALENT, OPEN, UNDECIDED
    look: int  # the look that made it (the current one while open)
    runs_per_arm: int
    alpha: float  # the look's increment alpha_k
    level: float  # this contrast's share of it, alpha_k / m: either decision is tested at it
    estimate: float
    ci_low: float  # Newcombe at level 1 - 2 level
    ci_high: float
    p: float
    p_adjusted: float  # Bonferroni over the m planned contrasts of its group: min(1, m p), which decides at <= alpha

    @property
    def open(self) -> bool:
        return self.decision == OPEN

    def to_dict(self) -> dict:
        return asdict(self)


def planned(arms: Mapping[str, Counts]) -> list[str]:
    """The planned contrasts whose arms are both present, in COMPARISONS' order."""
    return [name for name in COMPARISON_NAMES if all(arm in arms for arm in name.split("-"))]


def tested(arms: Mapping[str, Counts], names: list[str]) -> list[tuple[str, tuple[int, int, int, int], float]]:
    """Each named contrast's pooled (k_a, n_a, k_b, n_b) and its take-up p (contrasts.takeup_p, stratified by block)."""
    tables = [contrast_tables(*(arms[arm] for arm in name.split("-"))) for name in names]
    pooled = [tuple(int(total) for total in np.sum(table, axis=0)) for table in tables]
    return [(name, counts, takeup_p(table)[0]) for name, counts, table in zip(names, pooled, tables, strict=True)]


def look_decisions(
    arms: Mapping[str, Counts],
    before: Mapping[str, Decision],
    design: Design,
    look: int,
    alpha: float = inference.ALPHA,
    margin: float = MARGINS[TOOK_UP],
) -> dict[str, Decision]:
    """Every planned contrast's decision at `look`, from the open arms' counts by then (a closed arm's are not needed)
    and the decisions of the look before."""
    increment = design.increment(look, alpha)
    last = look == len(design.looks)
    readable = planned(arms)
    names = [name for name in COMPARISON_NAMES if name in before or name in readable]
    share = increment / len(names) if names else increment  # each planned contrast's, for either decision
    decisions = {name: before[name] for name in names if name in before and not before[name].open}
    still_open = [name for name in names if name not in decisions]
    if unread := [name for name in still_open if name not in readable]:
        raise ValueError(f"look {look}: contrast {unread[0]} is open, but the runs of its arms were not all read")
    for name, (k_a, n_a, k_b, n_b), p in tested(arms, still_open):
        estimate = k_a / n_a - k_b / n_b
        low, high = inference.newcombe(k_a, n_a, k_b, n_b, level=1 - 2 * share)
        adjusted = min(1.0, p * len(names))
        if multiplicity.rejects(adjusted, increment):
            decision = "raises" if estimate > 0 else "lowers"
        elif -margin < low and high < margin:
            decision = EQUIVALENT
        else:
            decision = UNDECIDED if last else OPEN
        decisions[name] = Decision(name, decision, look, int(n_a), increment, share, float(estimate), low, high, p, adjusted)
    return {name: decisions[name] for name in names}


def check_decidable(design: Design, groups: Iterable[Collection[str]], alpha: float = inference.ALPHA) -> None:
    """Refuse a design with a look that can decide nothing, naming the look: its increment alpha_k is below
    SMALLEST_INCREMENT, or even the most extreme outcome's take-up p at the look's layout exceeds alpha_k / m in every
    group (m its planned contrasts; groups: each group's arm names)."""
    contrasts = min((len(planned(dict.fromkeys(arms))) for arms in groups), default=0)
    for look in design.looks:
        increment = design.increment(look.number, alpha)
        where = f"design.looks[{look.number - 1}]: look {look.number}"
        if increment < SMALLEST_INCREMENT:
            raise DesignError(
                f"{where} spends alpha {increment:.2g} (below {SMALLEST_INCREMENT:g}) under {design.alpha_spending} spending "
                f"at {look.runs_per_arm} of {design.max_runs_per_arm} runs per arm: it would train its runs and decide nothing; "
                "look later, lower max_runs_per_arm, or use pocock"
            )
        smallest = smallest_takeup_p([(look.seeds, look.seeds)] * look.references)
        if contrasts and not multiplicity.rejects(smallest * contrasts, increment):
            raise DesignError(
                f"{where} tests each of {contrasts} planned contrasts at alpha {increment:.2g} / {contrasts} = "
                f"{increment / contrasts:.2g}, but at {look.references} reference(s) x {look.seeds} seed(s) the smallest p "
                f"its take-up test can give is {smallest:.2g}: it would train its runs and decide nothing; give it more runs "
                "per arm or a larger share of alpha"
            )


def arms_to_train(decisions: Mapping[str, Decision]) -> list[str]:
    """The arms of the contrasts still open, in the order they first appear in COMPARISONS."""
    arms = [arm for name, decision in decisions.items() if decision.open for arm in name.split("-")]
    return list(dict.fromkeys(arms))


def group_counts(runs: pd.DataFrame, control_of: Mapping[str, str]) -> dict[Group, dict[str, Counts]]:
    """Every (main family, term, alpha)'s arms' take-up counts by block, from the runs table."""
    groups: dict[Group, dict[str, Counts]] = {}
    for family, family_arms in arms(runs, control_of).items():
        for name, arm in family_arms.items():
            for (term, alpha), runs_of in arm.groupby(["term", "alpha"]):
                groups.setdefault((family, term, float(alpha)), {})[name] = arm_counts(runs_of)
    return groups


def earlier_decisions(document: Mapping | None) -> dict[Group, dict[str, Decision]]:
    if document is None:
        return {}
    return {
        (g["family"], g["term"], float(g["alpha"])): {name: Decision(**d) for name, d in g["decisions"].items()} for g in document["groups"]
    }


def look_groups(runs: pd.DataFrame, control_of: Mapping[str, str], design: Design, look: int, previous: Mapping | None) -> list[dict]:
    """A look file's groups: each (main family, term, alpha) with its decisions and the arms the next look trains."""
    counts, before = group_counts(runs, control_of), earlier_decisions(previous)
    groups = []
    for group in sorted(set(counts) | set(before)):
        decisions = look_decisions(counts.get(group, {}), before.get(group, {}), design, look)
        family, term, alpha = group
        serialised = {name: decision.to_dict() for name, decision in decisions.items()}
        groups.append({"family": family, "term": term, "alpha": alpha, "decisions": serialised, "train_next": arms_to_train(decisions)})
    return groups
