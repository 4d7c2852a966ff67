"""One look of a sequential design: a decision for each planned take-up contrast, and the arms the next look trains.

    python -m experiments.synthetic_sequences.analysis.sequential --look 2 --design '{"kind": "sequential", ...}' \
        --control-of discrete-scale=discrete,discrete-balance=discrete --metrics results/metrics/...parquet ... \
        --previous results/design/look1.json --out results/design/look2.json

The look reads the runs' metrics files as extraction wrote them; the tables hold every run to the grid and the
current inputs once the design has stopped (bindings.py).

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

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.disentanglement.artifacts import sha256_file, write_json
from experiments.synthetic_sequences.analysis import inference
from experiments.synthetic_sequences.analysis.contrasts import (
    COMPARISON_NAMES,
    MARGINS,
    PRIMARY,
    Counts,
    arm_counts,
    arms,
    contrast_tables,
    takeup_p,
)
from experiments.synthetic_sequences.planning.design import EQUIVALENT, OPEN, UNDECIDED, Design, DesignError, parse_design
from experiments.synthetic_sequences.planning.grid import parse_control_of
from experiments.synthetic_sequences.planning.looks import Group, look_document, read_look


@dataclass(frozen=True)
class Decision:
    comparison: str  # "sum-mean"
    decision: str  # raises, lowers, or design's EQUIVALENT, OPEN, UNDECIDED
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


def planned(arms: Mapping[str, Counts]) -> list[str]:
    """The planned contrasts whose arms are both present, in COMPARISONS' order."""
    return [name for name in COMPARISON_NAMES if all(arm in arms for arm in name.split("-"))]


def holm_tested(arms: Mapping[str, Counts], names: list[str]) -> list[tuple[str, tuple[int, int, int, int], float, float]]:
    """Each named contrast's pooled (k_a, n_a, k_b, n_b), its take-up p (contrasts.takeup_p, stratified by block) and
    that p Holm-adjusted over the named contrasts."""
    tables = [contrast_tables(*(arms[arm] for arm in name.split("-"))) for name in names]
    p = [takeup_p(table)[0] for table in tables]
    adjusted = inference.adjust(p, "holm") if names else []
    pooled = [tuple(int(total) for total in np.sum(table, axis=0)) for table in tables]
    return list(zip(names, pooled, p, adjusted, strict=True))


def look_decisions(
    arms: Mapping[str, Counts],
    before: Mapping[str, Decision],
    design: Design,
    look: int,
    alpha: float = inference.ALPHA,
    margin: float = MARGINS[PRIMARY],
) -> dict[str, Decision]:
    """Every planned contrast's decision at `look`, from the open arms' counts by then (a closed arm's are not needed)
    and the decisions of the look before."""
    increment = design.increment(look, alpha)
    last = look == len(design.looks)
    readable = planned(arms)
    names = [name for name in COMPARISON_NAMES if name in before or name in readable]
    decisions = {name: before[name] for name in names if name in before and not before[name].open}
    still_open = [name for name in names if name not in decisions]
    if unread := [name for name in still_open if name not in readable]:
        raise ValueError(f"look {look}: contrast {unread[0]} is open, but the runs of its arms were not all read")
    for name, (k_a, n_a, k_b, n_b), p, adjusted in holm_tested(arms, still_open):
        estimate = k_a / n_a - k_b / n_b
        low, high = inference.newcombe(k_a, n_a, k_b, n_b, level=1 - 2 * increment)
        if adjusted <= increment:
            decision = "raises" if estimate > 0 else "lowers"
        elif -margin < low and high < margin:
            decision = EQUIVALENT
        else:
            decision = UNDECIDED if last else OPEN
        decisions[name] = Decision(name, decision, look, int(n_a), increment, float(estimate), low, high, p, float(adjusted))
    return {name: decisions[name] for name in names}


def arms_to_train(decisions: Mapping[str, Decision]) -> list[str]:
    """The arms of the contrasts still open, in the order they first appear in COMPARISONS."""
    arms = [arm for name, decision in decisions.items() if decision.open for arm in name.split("-")]
    return list(dict.fromkeys(arms))


def naive_decisions(arms: Mapping[str, Counts], alpha: float = inference.ALPHA) -> dict[str, str]:
    """What rereading the fixed verdict does at any n: Holm at the full alpha over every planned contrast."""
    decisions = {}
    for name, (k_a, n_a, k_b, n_b), _, adjusted in holm_tested(arms, planned(arms)):
        decisions[name] = OPEN if adjusted > alpha else "raises" if k_a / n_a > k_b / n_b else "lowers"
    return decisions


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


def main(argv: Sequence[str] | None = None) -> None:
    from experiments.synthetic_sequences.analysis.tables import read_metrics, runs_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--look", type=int, required=True, help="the look, from 1")
    parser.add_argument("--design", required=True, help="the config's design block, as JSON")
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--metrics", nargs="+", required=True, help="the metrics files of the runs this look reads")
    parser.add_argument("--previous", default=None, help="the look file of the look before (none at look 1)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        design = parse_design(json.loads(args.design))
        if design is None or not 1 <= args.look <= len(design.looks):
            raise DesignError(f"--look {args.look}: the design has looks 1..{len(design.looks) if design else 0}")
        if (args.previous is None) != (args.look == 1):
            raise DesignError(f"--previous: look {args.look} {'takes none' if args.look == 1 else 'needs the look file before it'}")
        previous = read_look(args.previous, design) if args.previous else None
        metrics, records = read_metrics(args.metrics)
        groups = look_groups(runs_table(metrics), parse_control_of(args.control_of), design, args.look, previous)
        runs_read = {held[0]["run"]: sha256_file(path) for path, held in records.items()}
        write_json(look_document(args.look, design, groups, runs_read, previous), Path(args.out))
    except OSError as err:
        sys.exit(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}")
    except ValueError as err:
        sys.exit(f"error: {err}")
    for group in groups:
        decided = ", ".join(f"{name} {d['decision']}" for name, d in group["decisions"].items())
        print(f"look {args.look}, {group['family']} {group['term']} alpha={group['alpha']:g}: {decided}", file=sys.stderr)


if __name__ == "__main__":
    main()
