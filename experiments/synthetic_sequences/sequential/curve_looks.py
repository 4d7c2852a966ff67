"""A curve design's look file, its one home: each curve's reading at the look, why it stopped or where its next stage
trains, written here (this module's CLI, the checkpoint design_look), read and checked, and recomputed from its
runs.

The file is a look file (sequential/look_files.py: `design/look{k}.json`, sealed with the sha256 of its content, the
runs it read with their metrics files' sha256, the seal of the look before) whose groups are curves: per (family,
term, alpha), `decisions.curve` holds the look's figures (its runs, the look's alpha, k with its interval at the
look's level, the parallelism p, the reading at the look's level, the population fit) and `decision`, the reason it
stopped (curve_design.STOPS) or "continue"; `train_next` the modes the next stage trains, `next_betas` their betas.
A curve that stopped is carried into every later look as it was. Refused in one line naming the file, as look_files
refuses a look: edited, made under another design, following another look, read from other runs; and, where
recomputed, one whose figures its runs do not give (every decision, reading and placement the same, numbers within
RECOMPUTE_TOLERANCE, so that a look computed on another CPU still reads as its own).

    python -m experiments.synthetic_sequences.sequential.curve_looks --look 2 --design '{"kind": "curve", ...}' \
        --spans '{"discrete/raw/0": [0.013, 0.63]}' --metrics results/metrics/...parquet ... \
        --previous results/design/look1.json --out results/design/look2.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, write_json
from core.disentanglement.cli import refusals_exit
from experiments.synthetic_sequences.planning.bindings import check_placed
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand, add_pilot_flags
from experiments.synthetic_sequences.run_layout import metrics_path
from experiments.synthetic_sequences.sequential.curve_design import (
    CURVE,
    CURVE_RECORD_SCHEMA,
    CurveDesign,
    curve_design_from_record,
    fixed_beta,
    fixed_index,
    informative_betas,
    stop_reason,
)
from experiments.synthetic_sequences.sequential.design import OPEN, DesignError
from experiments.synthetic_sequences.sequential.look_files import (
    LOOK_SCHEMA,
    check_look_runs,
    look_document,
    read_look,
    recompute_advice,
    results_of,
)
from experiments.synthetic_sequences.sequential.looks import refuse_missing_runs
from experiments.synthetic_sequences.sequential.record import record_design

MODES = ("mean", "sum")
# a look's figures recomputed under another float path (BLAS threads, another CPU's kernels) moved by at most 1.6e-6
# relative, or 1.3e-8 absolute on an SD of 0.00044 where the likelihood is flat (bench/look_float_drift.py); a run
# whose take-up differs moves them by far more than this
RECOMPUTE_TOLERANCE = {"rel_tol": 1e-4, "abs_tol": 1e-6}
Curve = tuple[str, str, float]  # (main family, term, alpha)
CURVE_GROUP_SCHEMA = {
    "type": "object",
    "required": ["family", "term", "alpha", "decisions", "train_next", "next_betas"],
    "properties": {
        **dict.fromkeys(("family", "term"), {"type": "string"}),
        "alpha": {"type": "number"},
        "decisions": {"type": "object", "required": ["curve"]},
        "train_next": {"type": "array", "items": {"enum": list(MODES)}},
        "next_betas": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}},
    },
}
CURVE_LOOK_SCHEMA = {  # a look file's (look_files.LOOK_SCHEMA) with curves for groups, and their spans
    **LOOK_SCHEMA,
    "required": [*LOOK_SCHEMA["required"], "spans"],
    "properties": {
        **LOOK_SCHEMA["properties"],
        "design": CURVE_RECORD_SCHEMA,
        "groups": {"type": "array", "items": CURVE_GROUP_SCHEMA},
        "spans": {"type": "object", "additionalProperties": {"type": "array", "minItems": 2, "maxItems": 2}},
    },
}


def curve_name(curve: Curve) -> str:
    """'discrete/raw/0': a curve as --spans and a look file's spans name it."""
    return f"{curve[0]}/{curve[1]}/{curve[2]:g}"


def open_curves(document: Mapping | None) -> list[Curve]:
    """The curves a look leaves open, those the next stage trains."""
    return [(g["family"], g["term"], float(g["alpha"])) for g in document["groups"] if g["train_next"]] if document else []


def curve_runs(runs, curve: Curve):
    """A curve's runs in a runs table: its family, term and alpha, in mean and sum."""
    family, term, alpha = curve
    return runs[(runs.family == family) & (runs.term == term) & (runs.alpha == float(alpha)) & runs["mode"].isin(MODES)]


def read_curve(runs, design: CurveDesign, look: int, before: int, span: Sequence[float]) -> tuple[dict, dict]:
    """One curve's decision at look `look` from its runs (a runs table's mean and sum rows, every stage so far) and
    the runs it had at the look before (`before`), and the betas its next stage trains per mode ({} once it stops)."""
    from experiments.synthetic_sequences.analysis.statistics import population_curves as population
    from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves, reading
    from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA

    curves = Curves.of(runs)
    count = len(runs)
    room = count + design.stage_runs() <= design.budget
    alpha = design.increment(count, before, ALPHA, last=not room)
    fit = population.fit_population(curves)
    low, high = population.log_k_interval(curves, fit, level=1 - alpha)
    parallel_p = population.parallelism_p(curves, fit)
    reason = stop_reason(design, fit.log_k, low, high, parallel_p, alpha, room)
    decision = {
        "decision": reason or OPEN,
        "look": look,
        "runs": count,
        "alpha": alpha,
        "log_k": fit.log_k,
        "log_low": low,
        "log_high": high,
        "parallel_p": parallel_p,
        "reading": reading(low, high, parallel_p, alpha),
        "fit": [fit.intercept, fit.slope, fit.mode_effect, fit.sd_block, fit.sd_mode],
    }
    if reason:
        return decision, {}
    return decision, {mode: informative_betas(*decision["fit"][:3], s, span, design.placement) for s, mode in enumerate(MODES)}


def curve_groups(runs, design: CurveDesign, look: int, previous: Mapping | None, spans: Mapping[str, Sequence[float]]) -> list[dict]:
    """Every curve's group at look `look`: the open ones read from `runs` (a runs table), the stopped ones carried."""
    carried = {(g["family"], g["term"], float(g["alpha"])): g for g in previous["groups"]} if previous else {}
    groups = []
    for name in sorted(spans):
        family, term, alpha = name.split("/")
        curve = (family, term, float(alpha))
        if previous is not None and curve not in open_curves(previous):
            groups.append(carried[curve])
            continue
        own = curve_runs(runs, curve)
        before = carried[curve]["decisions"]["curve"]["runs"] if curve in carried else 0
        decision, next_betas = read_curve(own, design, look, before, spans[name])
        group = {"family": family, "term": term, "alpha": float(alpha), "decisions": {"curve": decision}}
        groups.append({**group, "train_next": sorted(next_betas), "next_betas": next_betas})
    return groups


def check_same(recorded: list[Mapping], recomputed: list[Mapping], path: Path, pilot: PilotCommand) -> None:
    """A look file's groups against those its runs give: every field equal, numbers within RECOMPUTE_TOLERANCE."""

    def close(filed, made, where: str) -> str | None:
        if isinstance(filed, Mapping) and isinstance(made, Mapping):
            if set(filed) != set(made):
                return f"{where}: fields {sorted(filed)} in the file, {sorted(made)} from its runs"
            return next((found for key in sorted(filed) if (found := close(filed[key], made[key], f"{where}.{key}"))), None)
        if isinstance(filed, list) and isinstance(made, list) and len(filed) == len(made):
            return next((found for i, pair in enumerate(zip(filed, made, strict=True)) if (found := close(*pair, f"{where}[{i}]"))), None)
        if isinstance(filed, float | int) and isinstance(made, float | int) and not isinstance(filed, bool):
            same = filed == made or (math.isnan(filed) and math.isnan(made)) or math.isclose(filed, made, **RECOMPUTE_TOLERANCE)
            return None if same else f"{where}: {filed!r} in the file, {made!r} from its runs"
        return None if filed == made else f"{where}: {filed!r} in the file, {made!r} from its runs"

    if difference := close(json.loads(json.dumps(list(recorded))), json.loads(json.dumps(recomputed)), "groups"):
        raise DesignError(f"{path}: {difference}; the file does not follow from its runs; {recompute_advice(path, pilot)}")


def placement_error(group: Mapping, span: Sequence[float]) -> str | None:
    """How a curve's group departs from what a look can write, in words, or None: its look and run counts whole
    numbers; a curve that stopped places nothing, an open one two betas per mode of the fixed set, exactly as
    curve_design.fixed_beta spells them, ascending, within its span widened tenfold (informative_betas' hold), and
    trains the modes it places."""
    decision = group["decisions"]["curve"]
    if miscounted := [field for field in ("look", "runs") if type(decision.get(field)) is not int]:
        return f"decisions.curve.{miscounted[0]} is {decision.get(miscounted[0])!r}, not a whole number"
    if (decision.get("decision") == OPEN) != bool(group["next_betas"]) or group["train_next"] != sorted(group["next_betas"]):
        return f"decision {decision.get('decision')!r} with next stage {group['next_betas']} (train_next {group['train_next']})"
    lowest, highest = fixed_index(min(span) / 10), fixed_index(max(span) * 10)
    for mode, betas in group["next_betas"].items():
        fixed = [beta for beta in betas if beta == fixed_beta(fixed_index(beta)) and lowest <= fixed_index(beta) <= highest]
        if mode not in MODES or len(betas) != 2 or fixed != betas or betas[0] >= betas[1]:
            return f"next_betas.{mode} {betas}: not two ascending betas of the design's fixed set within its span's hold"
    return None


def check_placements(document: Mapping, path: Path, spans: Mapping, pilot: PilotCommand) -> None:
    """Refuse a look file whose groups no look writes (placement_error), before its next stage is planned from it."""
    for group in document["groups"]:
        name = curve_name((group["family"], group["term"], float(group["alpha"])))
        if name not in spans:
            raise DesignError(f"{path}: a group for {name}, which is not a curve of the config; {recompute_advice(path, pilot)}")
        if problem := placement_error(group, spans[name]):
            raise DesignError(f"{path}: {name}: {problem}; {recompute_advice(path, pilot)}")


def checked_curve_look(
    path: str | Path, design: CurveDesign, spans: Mapping, previous: Mapping | None, recompute: bool, pilot: PilotCommand = DEFAULT_PILOT
) -> dict:
    """A curve look's file that may be used: unedited, of this design and these spans, following `previous`, read from
    the runs on disk; with `recompute`, its groups are what its runs give (the Snakefile's parse does not refit: the
    next look and the tables do)."""
    document = read_look(path, design, pilot, CURVE_LOOK_SCHEMA)
    if document["spans"] != {name: list(span) for name, span in spans.items()}:
        raise DesignError(f"{path}: made for other curves than the config's (spans); {recompute_advice(path, pilot)}")
    check_placements(document, Path(path), spans, pilot)
    check_look_runs(document, path, previous, None, pilot)
    if recompute:
        from experiments.synthetic_sequences.analysis.records.metrics_files import read_metrics, runs_table

        paths = [metrics_path(results_of(path), run) for run in sorted(document["runs_read"])]
        if missing := [metrics for metrics in paths if not Path(metrics).exists()]:
            refuse_missing_runs(path, missing, len(paths), pilot)
        runs = runs_table(read_metrics(paths)[0])
        check_same(document["groups"], curve_groups(runs, design, document["look"], previous, spans), Path(path), pilot)
    return document


def read_curve_looks(paths: Sequence[str | Path], pilot: PilotCommand = DEFAULT_PILOT, recompute: bool = True) -> list[dict]:
    """A curve design's look files, in order, each checked against the one before and (with `recompute`) recomputed
    from its runs, under the design and spans the first records."""
    if not paths:
        return []
    try:
        first = json.loads(Path(paths[0]).read_text())
        design, spans = curve_design_from_record(first["design"]), first["spans"]
    except (KeyError, TypeError, ValueError) as err:
        raise DesignError(f"{paths[0]}: not a readable curve look file ({err})") from err
    documents: list[dict] = []
    for path in paths:
        documents.append(checked_curve_look(path, design, spans, documents[-1] if documents else None, recompute, pilot))
    return documents


def curve_stops(looks: Sequence[Mapping]) -> list[dict]:
    """Per curve, as the last look leaves it: why it stopped (or "open after look k"), the look that decided, its runs,
    the look's alpha, log k with its interval at the look's level, and the reading there: the design's answer."""
    stops = []
    for group in looks[-1]["groups"] if looks else ():
        decision = group["decisions"]["curve"]
        stopped = decision["decision"] if decision["decision"] != OPEN else f"open after look {decision['look']}"
        stops.append(
            {
                "family": group["family"],
                "term": group["term"],
                "alpha": float(group["alpha"]),
                **{f"design_{key}": decision[key] for key in ("look", "runs", "alpha", "log_k", "log_low", "log_high", "reading")},
                "design_stop": stopped,
            }
        )
    return stops


def is_curve_look(path: str | Path) -> bool:
    """Whether a look file is a curve design's (its design's kind), so that the tables read it here."""
    try:
        return json.loads(Path(path).read_text())["design"].get("kind") == CURVE
    except (OSError, ValueError, KeyError, AttributeError):
        return False


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--look", type=int, required=True, help="the look, from 1")
    parser.add_argument("--design", required=True, help="the curve design, as its look files record it (JSON)")
    parser.add_argument("--spans", required=True, help="JSON: {family/term/alpha: [lowest, highest beta]} of every curve")
    parser.add_argument("--metrics", nargs="+", required=True, help="the metrics files of the runs this look reads")
    parser.add_argument("--previous", nargs="*", default=[], help="the look files of every look before, in order (none at look 1)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--design-reset", action="store_true", help="look 1 may follow another design (config design_reset)")
    add_pilot_flags(parser)
    args = parser.parse_args(argv)
    with refusals_exit():
        design, spans = curve_design_from_record(json.loads(args.design)), json.loads(args.spans)
        if len(args.previous) != args.look - 1:
            raise DesignError(f"--previous: look {args.look} reads the {args.look - 1} look file(s) before it, got {len(args.previous)}")
        pilot = PilotCommand.of_flags(args)
        earlier: list[dict] = []
        for path in args.previous:
            earlier.append(checked_curve_look(path, design, spans, earlier[-1] if earlier else None, True, pilot))
        previous = earlier[-1] if earlier else None
        designs_before = record_design(results_of(args.out), design, args.design_reset, pilot) if args.look == 1 else []
        from experiments.synthetic_sequences.analysis.records.metrics_files import check_extracted, read_metrics, runs_table

        metrics, records = read_metrics(args.metrics, pilot)
        check_placed(records, pilot)  # a link to another run's file would drop its run and count another twice
        check_extracted(records, results_of(args.out), pilot)
        groups = curve_groups(runs_table(metrics), design, args.look, previous, spans)
        runs_read = {held[0]["run"]: sha256_file(path) for path, held in records.items()}
        write_json(look_document(args.look, design, groups, runs_read, previous, designs_before, spans=spans), Path(args.out))
    for group in groups:
        decision = group["decisions"]["curve"]
        where = f"look {args.look}, {group['family']} {group['term']} alpha={group['alpha']:g}"
        print(f"{where}: {decision['decision']} at {decision['runs']} runs, next {group['next_betas']}", file=sys.stderr)


if __name__ == "__main__":
    main()
