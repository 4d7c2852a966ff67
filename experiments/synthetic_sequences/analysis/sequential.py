"""One look of a sequential design: a decision for each planned take-up contrast, and the arms the next look trains.

At look k the design tests at its increment alpha_k (planning/design.py). Over the planned contrasts still open:

  different    (raises / lowers) Holm at alpha_k over the open contrasts rejects p_a = p_b, with the take-up test of
               the fixed verdict (contrasts.takeup_p: Boschloo with one reference block, the exact test stratified
               by block with several)
  equivalent   the Newcombe interval of the pooled runs at level 1 - 2 alpha_k lies inside +-margin: TOST at alpha_k
  continue     neither, before the last look
  undecided    neither, at the last look ("undecided at N")

A decided contrast stays decided, with the look that decided it. An arm trains at the next look while any contrast it
belongs to is open. Take-up is the primary endpoint and the only one that steers the design.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis import inference
from experiments.synthetic_sequences.analysis.contrasts import BLOCK, COMPARISONS, MARGINS, PRIMARY, takeup_p
from experiments.synthetic_sequences.planning.design import Design

OPEN, UNDECIDED, EQUIVALENT = "continue", "undecided", "equivalent"
DECISIONS = ("raises", "lowers", EQUIVALENT, OPEN, UNDECIDED)


@dataclass(frozen=True)
class Decision:
    comparison: str  # "sum-mean"
    decision: str  # one of DECISIONS
    look: int  # the look that made it (the current one while open)
    runs_per_arm: int
    alpha: float  # the look's increment
    estimate: float
    ci_low: float  # Newcombe at level 1 - 2 alpha
    ci_high: float
    p: float
    p_adjusted: float  # Holm over the contrasts open at this look

    @property
    def open(self) -> bool:
        return self.decision == OPEN

    def to_dict(self) -> dict:
        return asdict(self)


Counts = Mapping[int, tuple[int, int]]  # an arm's (runs that took up, runs) by reference block


def arm_counts(runs: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """An arm's take-up counts by block, from its rows of the runs table."""
    return {int(block): (int(group[PRIMARY].sum()), len(group)) for block, group in runs.groupby(BLOCK)}


def contrast_tables(a: Counts, b: Counts) -> list[tuple[int, int, int, int]]:
    """(k_a, n_a, k_b, n_b) in every block both arms have, as contrasts.block_tables gives them."""
    return [(*a[block], *b[block]) for block in sorted(set(a) & set(b))]


def planned(arms: Mapping[str, Counts]) -> list[str]:
    """The planned contrasts whose arms are both present, in COMPARISONS' order."""
    return [f"{a}-{b}" for a, b in COMPARISONS if a in arms and b in arms]


def look_decisions(
    arms: Mapping[str, Counts],
    before: Mapping[str, Decision],
    design: Design,
    look: int,
    alpha: float = inference.ALPHA,
    margin: float = MARGINS[PRIMARY],
) -> dict[str, Decision]:
    """Every planned contrast's decision at `look`, given the arms' counts by then and the decisions of the look before."""
    increment = design.increment(look, alpha)
    last = look == len(design.looks)
    decisions = {name: before[name] for name in planned(arms) if name in before and not before[name].open}
    still_open = [name for name in planned(arms) if name not in decisions]
    tables = {name: contrast_tables(*(arms[arm] for arm in name.split("-"))) for name in still_open}
    p = {name: takeup_p(tables[name])[0] for name in still_open}
    adjusted = dict(zip(still_open, inference.adjust([p[name] for name in still_open], "holm"), strict=True)) if still_open else {}
    for name in still_open:
        k_a, n_a, k_b, n_b = np.sum(tables[name], axis=0)
        estimate = k_a / n_a - k_b / n_b
        low, high = inference.newcombe(k_a, n_a, k_b, n_b, level=1 - 2 * increment)
        if adjusted[name] <= increment:
            decision = "raises" if estimate > 0 else "lowers"
        elif -margin < low and high < margin:
            decision = EQUIVALENT
        else:
            decision = UNDECIDED if last else OPEN
        decisions[name] = Decision(name, decision, look, int(n_a), increment, float(estimate), low, high, p[name], float(adjusted[name]))
    return {name: decisions[name] for name in planned(arms)}


def arms_to_train(decisions: Mapping[str, Decision]) -> list[str]:
    """The arms of the contrasts still open, in the order they first appear in COMPARISONS."""
    arms = [arm for name, decision in decisions.items() if decision.open for arm in name.split("-")]
    return list(dict.fromkeys(arms))


def naive_decisions(arms: Mapping[str, Counts], alpha: float = inference.ALPHA) -> dict[str, str]:
    """What rereading the fixed verdict does at any n: Holm at the full alpha over every planned contrast."""
    names = planned(arms)
    tables = {name: contrast_tables(*(arms[arm] for arm in name.split("-"))) for name in names}
    adjusted = inference.adjust([takeup_p(tables[name])[0] for name in names], "holm")
    decisions = {}
    for name, p in zip(names, adjusted, strict=True):
        k_a, n_a, k_b, n_b = np.sum(tables[name], axis=0)
        decisions[name] = OPEN if p > alpha else "raises" if k_a / n_a > k_b / n_b else "lowers"
    return decisions
