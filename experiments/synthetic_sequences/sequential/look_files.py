"""A look file of a sequential design, its one home: written here (look_document, by this module's CLI), read and
checked against itself (read_look), against the look before and the runs it read (check_look_runs), and its
decisions recomputed from those runs by the code that made them (verified_look). The Snakefile, the next look and the
tables read look files only through here.

Each look's file (`design/look{k}.json` under the results folder, run_layout.LOOK_TEMPLATE) holds its decisions, the
arms the next look trains, the runs it read with the sha256 of their metrics files, the design it was made under, the
seal of the look before, when it was computed, and the sha256 of its own content. Before it is used it is refused in
one line naming the file and the first disagreement:
  read_look          readable, of the shape LOOK_SCHEMA gives, its content matching its seal, made under the config's
                     design, the look its name says
  check_look_runs    its previous_sha256 is the seal of the look before; every run it read still has its metrics file
                     and that file hashes as recorded; the runs are the ones the config assigns to the look
  verified_look      and its decisions are what look_groups makes of those runs

    python -m experiments.synthetic_sequences.sequential.look_files --look 2 --design '{"kind": "sequential", ...}' \
        --control-of discrete-scale=discrete,discrete-balance=discrete --metrics results/metrics/...parquet ... \
        --previous results/design/look1.json --out results/design/look2.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, sha256_json, write_json
from core.disentanglement.cli import refusals_exit
from experiments.synthetic_sequences.analysis.records.metrics_files import check_extracted, read_metrics, runs_table
from experiments.synthetic_sequences.planning.bindings import check_placed
from experiments.synthetic_sequences.planning.grid import parse_control_of
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand, add_pilot_flags
from experiments.synthetic_sequences.planning.record_shape import SHA256, check_shape
from experiments.synthetic_sequences.run_layout import LOOK_TEMPLATE, metrics_path
from experiments.synthetic_sequences.sequential.curve_design import CurveDesign, record_of
from experiments.synthetic_sequences.sequential.decisions import look_groups
from experiments.synthetic_sequences.sequential.design import (
    DESIGN_SCHEMA,
    Design,
    DesignError,
    design_from_record,
    parse_design,
)
from experiments.synthetic_sequences.sequential.looks import refuse_missing_runs
from experiments.synthetic_sequences.sequential.record import record_design


def recompute_advice(path: str | Path, pilot: PilotCommand) -> str:
    """How to recompute a look from the runs on disk: it and the looks after it go (the targets ask for every look
    file, so they are made again), then the pilot's own command."""
    path = Path(path)
    number = look_number(path) or 0
    later = sorted((other for other in path.parent.glob("*.json") if (look_number(other) or 0) > number), key=look_number)
    return f"recompute it from the runs on disk: rm {shlex.join(map(str, [path, *later]))}; then {pilot.command()}"


GROUP_SCHEMA = {  # sequential.look_groups' entries
    "type": "object",
    "required": ["family", "term", "alpha", "decisions", "train_next"],
    "properties": {
        **dict.fromkeys(("family", "term"), {"type": "string"}),
        "alpha": {"type": "number"},
        "decisions": {"type": "object", "additionalProperties": {"type": "object", "required": ["decision"]}},
        "train_next": {"type": "array", "items": {"type": "string"}},
    },
}
LOOK_SCHEMA = {  # look_document's fields
    "type": "object",
    "required": ["look", "design", "groups", "runs_read", "previous_sha256", "earlier_designs", "computed_at", "sha256"],
    "properties": {
        "look": {"type": "integer", "minimum": 1},
        "design": DESIGN_SCHEMA,
        "groups": {"type": "array", "items": GROUP_SCHEMA},
        "runs_read": {"type": "object", "additionalProperties": SHA256},
        "previous_sha256": {**SHA256, "type": ["string", "null"]},  # the pattern applies to a string only
        "earlier_designs": {"type": "array"},
        "computed_at": {"type": "string"},
        "sha256": SHA256,
    },
}


def look_document(
    look: int,
    design: Design | CurveDesign,
    groups: list[dict],
    runs_read: Mapping[str, str],
    previous: Mapping | None,
    earlier_designs: list[dict],
    **more: object,
) -> dict:
    """A look's file: what it decided and read, when, sealed with the sha256 of its content. earlier_designs: the
    designs this results folder was read under before a design_reset (the first look's; [] after); `more`: a design's
    own fields (a curve design's spans)."""
    body = {
        "look": look,
        "design": record_of(design),
        "groups": groups,
        "runs_read": dict(runs_read),
        "previous_sha256": previous["sha256"] if previous else None,
        "earlier_designs": earlier_designs,
        # a recomputed look is a new file even where its decisions are the same, so everything after it is rebuilt
        "computed_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        **more,
    }
    return {**body, "sha256": sha256_json(body)}


def results_of(look_path: str | Path) -> Path:
    """The results folder a look file lies in (LOOK_TEMPLATE)."""
    return Path(look_path).parents[len(Path(LOOK_TEMPLATE).parts) - 1]


def look_number(look_path: str | Path) -> int | None:
    """The look a file's name says it is (look3.json: 3)."""
    pattern = re.escape(Path(LOOK_TEMPLATE).name).replace(re.escape("{look}"), "([0-9]+)")
    match = re.fullmatch(pattern, Path(look_path).name)
    return int(match.group(1)) if match else None


def read_look(path: str | Path, design: Design | CurveDesign, pilot: PilotCommand = DEFAULT_PILOT, schema: Mapping = LOOK_SCHEMA) -> dict:
    """A look's file, checked against itself: readable, unedited, of this design, the look its name says (of the
    shape `schema` gives: a curve design's look has its own). Raises DesignError naming the file and what to do."""
    path = Path(path)
    recompute = recompute_advice(path, pilot)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DesignError(f"{path}: not a readable look file ({err}); {recompute}") from err
    check_shape(document, schema, path, recompute, DesignError)
    body = {name: value for name, value in document.items() if name != "sha256"}
    if document["sha256"] != sha256_json(body):
        raise DesignError(f"{path}: its content does not match its sha256 (edited by hand?); {recompute}")
    if document["design"] != record_of(design):
        raise DesignError(
            f"{path}: made under another design than the config's; a design cannot change between looks: its looks go "
            f"(and the runs they trained too, if those should not count): rm -r {shlex.quote(str(path.parent))}; then {pilot.command()}"
        )
    if type(document["look"]) is not int or document["look"] != look_number(path):  # 2.0 is no look number
        raise DesignError(f"{path}: holds look {document['look']}, not the look its name says; {recompute}")
    return document


def check_look_runs(
    document: Mapping,
    path: str | Path,
    previous: Mapping | None,
    expected_runs: Collection[str] | None,
    pilot: PilotCommand = DEFAULT_PILOT,
) -> None:
    """A look file against the look before it and the runs it read; raises DesignError naming the file and the first
    disagreement. A run whose metrics file is missing is passed over (its extraction job writes it again, and the
    next reader checks it); expected_runs, where given, are the runs the config assigns to this look."""
    path = Path(path)
    recompute = recompute_advice(path, pilot)
    wanted = previous["sha256"] if previous else None
    if document["previous_sha256"] != wanted:
        before = f"the seal of look {previous['look']} ({str(wanted)[:12]})" if previous else "none at look 1"
        raise DesignError(
            f"{path}: its previous_sha256 ({str(document['previous_sha256'])[:12]}) is not {before}; it follows another look; {recompute}"
        )
    runs_read = document["runs_read"]
    if expected_runs is not None and set(runs_read) != set(expected_runs):
        extra, missing = sorted(set(runs_read) - set(expected_runs)), sorted(set(expected_runs) - set(runs_read))
        first = (
            f"it read {extra[0]}, which the config does not assign to it"
            if extra
            else f"it did not read {missing[0]}, which the config assigns to it"
        )
        raise DesignError(f"{path}: {first} ({len(extra)} extra, {len(missing)} missing of the config's {len(expected_runs)}); {recompute}")
    results = results_of(path)
    for run, recorded in sorted(runs_read.items()):
        metrics = Path(metrics_path(results, run))
        if metrics.is_symlink():  # the pipeline writes every metrics file itself: a link stands for some other file
            raise DesignError(
                f"{metrics} is a link (to {os.readlink(metrics)}), not the metrics file of run {run} that {path} read; extract "
                f"it again from its run: rm {shlex.quote(str(metrics))}; then {pilot.command()}"
            )
        if metrics.exists() and (digest := sha256_file(metrics)) != recorded:
            raise DesignError(
                f"{path}: {metrics} hashes {digest[:12]}, but the look read {recorded[:12]}: the look was made from other runs "
                f"(another experiment's look file, or runs changed since); {recompute}"
            )


def verified_look(
    path: str | Path,
    design: Design,
    control_of: Mapping[str, str],
    previous: Mapping | None,
    expected_runs: Collection[str] | None = None,
    require_runs: bool = True,
    pilot: PilotCommand = DEFAULT_PILOT,
) -> dict:
    """A look file that may be used: read_look and check_look_runs, then its decisions recomputed
    from the runs it read with look_groups, the function that made them. Raises DesignError naming the file and the
    first disagreement. With require_runs False (the Snakefile, while extraction may still rewrite a metrics file),
    a look some of whose metrics files are missing is not recomputed; the job that reads it next checks it whole."""
    document = read_look(path, design, pilot)
    check_look_runs(document, path, previous, expected_runs, pilot)
    paths = [metrics_path(results_of(path), run) for run in sorted(document["runs_read"])]
    if missing := [metrics for metrics in paths if not Path(metrics).exists()]:
        if require_runs:
            refuse_missing_runs(path, missing, len(paths), pilot)
        return document
    counts = runs_table(read_metrics(paths)[0])
    groups = json.loads(json.dumps(look_groups(counts, control_of, design, document["look"], previous)))
    if sha256_json(groups) != sha256_json(document["groups"]):
        difference = first_difference(document["groups"], groups)
        raise DesignError(f"{path}: {difference}; the file does not follow from its runs; {recompute_advice(path, pilot)}")
    return document


def verified_looks(
    paths: Sequence[str | Path], design: Design, control_of: Mapping[str, str], pilot: PilotCommand = DEFAULT_PILOT
) -> list[dict]:
    """Looks 1..k in order, each verified against the one before it."""
    documents: list[dict] = []
    for path in paths:
        documents.append(verified_look(path, design, control_of, documents[-1] if documents else None, pilot=pilot))
    return documents


def first_difference(recorded: list[Mapping], recomputed: list[Mapping]) -> str:
    """The first place where a look file's groups and those its runs give differ, in words."""

    def by_group(groups: list[Mapping]) -> dict:
        return {(g["family"], g["term"], float(g["alpha"])): g for g in groups}

    have, want = by_group(recorded), by_group(recomputed)
    for key in sorted(set(have) | set(want)):
        where = f"{key[0]} {key[1]} alpha={key[2]:g}"
        if key not in have or key not in want:
            return f"group {where} is {'in its runs but not in the file' if key in want else 'in the file but not in its runs'}"
        for name in sorted(set(have[key]["decisions"]) | set(want[key]["decisions"])):
            filed, made = have[key]["decisions"].get(name, {}), want[key]["decisions"].get(name, {})
            for field in sorted(set(filed) | set(made), key=lambda field: (field != "decision", field)):
                if json.dumps(filed.get(field)) != json.dumps(made.get(field)):
                    return f"{where} {name}: {field} {filed.get(field)!r} in the file, {made.get(field)!r} from its runs"
        if have[key]["train_next"] != want[key]["train_next"]:
            return f"{where}: train_next {have[key]['train_next']} in the file, {want[key]['train_next']} from its runs"
    return "its groups are not those its runs give"


def read_looks(paths: Sequence[str | Path], control_of: dict[str, str], pilot: PilotCommand = DEFAULT_PILOT) -> list[dict]:
    """A sequential design's look files, verified in order (verified_looks) under the design the first records."""
    if not paths:
        return []
    try:
        design = design_from_record(json.loads(Path(paths[0]).read_text())["design"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{paths[0]}: not a readable look file ({err})") from err
    return verified_looks(paths, design, control_of, pilot)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--look", type=int, required=True, help="the look, from 1")
    parser.add_argument("--design", required=True, help="the config's design block, as JSON")
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--metrics", nargs="+", required=True, help="the metrics files of the runs this look reads")
    parser.add_argument("--previous", nargs="*", default=[], help="the look files of every look before, in order (none at look 1)")
    parser.add_argument("--design-reset", action="store_true", help="look 1 may follow another design (config design_reset)")
    parser.add_argument("--out", required=True)
    add_pilot_flags(parser)
    args = parser.parse_args(argv)
    with refusals_exit():
        design = parse_design(json.loads(args.design))
        if design is None or not 1 <= args.look <= len(design.looks):
            raise DesignError(f"--look {args.look}: the design has looks 1..{len(design.looks) if design else 0}")
        if len(args.previous) != args.look - 1:
            raise DesignError(f"--previous: look {args.look} reads the {args.look - 1} look file(s) before it, got {len(args.previous)}")
        control_of, pilot = parse_control_of(args.control_of), PilotCommand.of_flags(args)
        earlier = verified_looks(args.previous, design, control_of, pilot)
        previous = earlier[-1] if earlier else None
        designs_before = record_design(results_of(args.out), design, args.design_reset, pilot) if args.look == 1 else []
        metrics, records = read_metrics(args.metrics, pilot)
        check_placed(records, pilot)  # a link to another run's file would drop its run and count another twice
        check_extracted(records, results_of(args.out), pilot)  # "recompute the look from the runs" means the runs
        groups = look_groups(runs_table(metrics), control_of, design, args.look, previous)
        runs_read = {held[0]["run"]: sha256_file(path) for path, held in records.items()}
        write_json(look_document(args.look, design, groups, runs_read, previous, designs_before), Path(args.out))
    for group in groups:
        decided = ", ".join(f"{name} {d['decision']}" for name, d in group["decisions"].items())
        print(f"look {args.look}, {group['family']} {group['term']} alpha={group['alpha']:g}: {decided}", file=sys.stderr)


if __name__ == "__main__":
    main()
