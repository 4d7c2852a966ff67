"""A sequential design on the run grid: which runs each look reads, which runs were trained, and the look files.

An arm is one side of a planned take-up contrast. Its group is (main family, term, alpha); its name is the mode
('mean', 'sum') for the main family's runs and the control's kind ('scale', 'balance') for a control family's.
Look k reads, of every arm open after look k-1 (every arm at look 1), its runs in the first `references` blocks
with the first `seeds` seeds of each (in the order the config lists them). A closed arm keeps the runs it had.

Each look's file (`design/look{k}.json` under the results folder) holds its decisions, the arms the next look
trains, the runs it read with the sha256 of their metrics files, the design it was made under, the seal of the look
before, when it was computed, and the sha256 of its own content. Before a look file is used (by the Snakefile, the
next look or the tables) it is checked against what it claims, and refused in one line naming the file and the
first disagreement:
  read_look          readable, its content matching its seal, made under the config's design, the look its name says
  check_look_runs    its previous_sha256 is the seal of the look before; every run it read still has its metrics file
                     and that file hashes as recorded; the runs are the ones the config assigns to the look
  (analysis/look_files.verified_look adds: its decisions are what look_groups makes of those runs.)

The first look also fixes the design for its results folder: `design.json` beside `design/` records it, and a config
whose design differs is refused even after the look files are deleted, unless design_reset is set (the record then
keeps the earlier design, and the looks name it) or the record is deleted by name. Torch- and pandas-free: the
Snakefile imports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, sha256_json, write_json
from experiments.synthetic_sequences.planning.design import Design, DesignError, Look
from experiments.synthetic_sequences.planning.grid import RunSpec
from experiments.synthetic_sequences.planning.record_shape import SHA256, check_shape
from experiments.synthetic_sequences.run_layout import metrics_path

LOOK_TEMPLATE = "design/look{look}.json"
DESIGN_RECORD = "design.json"  # under the results folder, beside design/: the designs its looks were read under
Group = tuple[str, str, float]  # (main family, term, alpha)


def arm_of(spec: RunSpec, control_of: Mapping[str, str]) -> tuple[Group, str]:
    """A run's arm: its group and name."""
    if spec.controls == "none":
        return (spec.family, spec.term, spec.alpha), spec.mode
    return (control_of[spec.family], spec.term, spec.alpha), spec.controls


def check_design_grid(design: Design, references: list[int], seeds: list[int], families: Mapping, seeds_per_job: int) -> None:
    """The grid a design trains into: the top-level blocks and seeds are the last look's (the most an arm trains), no
    family sets its own seeds, and every look ends on a whole training job (seeds_per_job)."""
    last = design.looks[-1]
    if (len(references), len(seeds)) != (last.references, last.seeds):
        raise DesignError(
            f"references: {len(references)} and seeds: {len(seeds)}, but the design's last look trains up to {last.references} "
            f"references x {last.seeds} seeds; set references: {last.references} and seeds: {last.seeds}, the most an arm trains"
        )
    if own := sorted(name for name, spec in families.items() if "seeds" in spec):
        raise DesignError(f"families.{own[0]}.seeds: in a sequential design the looks set every arm's seeds; remove it")
    if uneven := [look for look in design.looks if look.seeds % seeds_per_job]:
        raise DesignError(
            f"design.looks[{uneven[0].number - 1}]: {uneven[0].seeds} seeds is not a multiple of seeds_per_job {seeds_per_job}; "
            "a look ends on a whole training job"
        )


def look_specs(
    specs: Iterable[RunSpec],
    control_of: Mapping[str, str],
    references: list[int],
    seeds: list[int],
    look: Look,
    open_arms: Mapping[Group, Collection[str]] | None = None,
) -> list[RunSpec]:
    """The runs look `look` reads: every arm's at look 1 (open_arms None), else the open arms' only."""
    blocks, firsts = set(references[: look.references]), set(seeds[: look.seeds])
    chosen = []
    for spec in specs:
        group, arm = arm_of(spec, control_of)
        if spec.reference in blocks and spec.seed in firsts and (open_arms is None or arm in open_arms.get(group, ())):
            chosen.append(spec)
    return chosen


def open_arms_of(document: Mapping) -> dict[Group, list[str]]:
    """{group: the arms the next look trains} of a look file."""
    return {(g["family"], g["term"], float(g["alpha"])): list(g["train_next"]) for g in document["groups"] if g["train_next"]}


def trained_specs(
    specs: Iterable[RunSpec],
    control_of: Mapping[str, str],
    references: list[int],
    seeds: list[int],
    design: Design,
    documents: list[Mapping],
) -> list[RunSpec]:
    """Every run the design trained, given the look files read so far: each arm's runs of the last look it was open at."""
    specs = list(specs)
    trained = {spec.path: spec for spec in look_specs(specs, control_of, references, seeds, design.looks[0])}
    for look, document in zip(design.looks[1:], documents, strict=False):
        opened = open_arms_of(document)
        if not opened:
            break
        trained |= {spec.path: spec for spec in look_specs(specs, control_of, references, seeds, look, opened)}
    return [spec for spec in specs if spec.path in trained]


def design_record(design: Design) -> dict:
    """A design as a look file records it: JSON's types (lists, not tuples)."""
    return json.loads(json.dumps(asdict(design)))


def design_from_record(record: Mapping) -> Design:
    """The design a look file records (design_record's inverse)."""
    return Design(tuple(Look(**look) for look in record["looks"]), record["alpha_spending"], record["max_runs_per_arm"])


def look_document(
    look: int, design: Design, groups: list[dict], runs_read: Mapping[str, str], previous: Mapping | None, earlier_designs: list[dict]
) -> dict:
    """A look's file: what it decided and read, when, sealed with the sha256 of its content. earlier_designs: the
    designs this results folder was read under before a design_reset (the first look's; [] after)."""
    body = {
        "look": look,
        "design": design_record(design),
        "groups": groups,
        "runs_read": dict(runs_read),
        "previous_sha256": previous["sha256"] if previous else None,
        "earlier_designs": earlier_designs,
        # a recomputed look is a new file even where its decisions are the same, so everything after it is rebuilt
        "computed_at": datetime.now(UTC).isoformat(timespec="microseconds"),
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


RECOMPUTE = "delete it (and the looks after it) and rerun to recompute it from the runs on disk"
COUNTS = ("references", "seeds")
LOOK_ENTRY = {"type": "object", "required": list(COUNTS), "properties": dict.fromkeys(COUNTS, {"type": "integer"})}
DESIGN_SCHEMA = {  # design_record's fields
    "type": "object",
    "required": ["looks", "alpha_spending", "max_runs_per_arm"],
    "properties": {
        "looks": {"type": "array", "minItems": 1, "items": LOOK_ENTRY},
        "alpha_spending": {"type": "string"},
        "max_runs_per_arm": {"type": "integer"},
    },
}
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
ENTRY_FIELDS = {"design": DESIGN_SCHEMA, "sha256": SHA256, "first_look_at": {"type": "string"}}
DESIGN_ENTRY = {"type": "object", "required": list(ENTRY_FIELDS), "properties": ENTRY_FIELDS}
DESIGN_RECORD_SCHEMA = {"type": "object", "required": ["designs"], "properties": {"designs": {"type": "array", "items": DESIGN_ENTRY}}}


def read_look(path: str | Path, design: Design) -> dict:
    """A look's file, checked against itself: readable, unedited, of this design, the look its name says. Raises
    DesignError naming the file and what to do."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DesignError(f"{path}: not a readable look file ({err}); {RECOMPUTE}") from err
    check_shape(document, LOOK_SCHEMA, path, RECOMPUTE, DesignError)
    body = {name: value for name, value in document.items() if name != "sha256"}
    if document["sha256"] != sha256_json(body):
        raise DesignError(f"{path}: its content does not match its sha256 (edited by hand?); {RECOMPUTE}")
    if document["design"] != design_record(design):
        raise DesignError(
            f"{path}: made under another design than the config's; a design cannot change between looks: delete "
            f"{path.parent} (and the runs it trained, if they should not count) and rerun"
        )
    if document["look"] != look_number(path):
        raise DesignError(f"{path}: holds look {document['look']}, not the look its name says; {RECOMPUTE}")
    return document


def check_look_runs(document: Mapping, path: str | Path, previous: Mapping | None, expected_runs: Collection[str] | None) -> None:
    """A look file against the look before it and the runs it read; raises DesignError naming the file and the first
    disagreement. A run whose metrics file is missing is passed over (its extraction job writes it again, and the
    next reader checks it); expected_runs, where given, are the runs the config assigns to this look."""
    path = Path(path)
    wanted = previous["sha256"] if previous else None
    if document["previous_sha256"] != wanted:
        before = f"the seal of look {previous['look']} ({str(wanted)[:12]})" if previous else "none at look 1"
        raise DesignError(
            f"{path}: its previous_sha256 ({str(document['previous_sha256'])[:12]}) is not {before}; it follows another look; {RECOMPUTE}"
        )
    runs_read = document["runs_read"]
    if expected_runs is not None and set(runs_read) != set(expected_runs):
        extra, missing = sorted(set(runs_read) - set(expected_runs)), sorted(set(expected_runs) - set(runs_read))
        first = (
            f"it read {extra[0]}, which the config does not assign to it"
            if extra
            else f"it did not read {missing[0]}, which the config assigns to it"
        )
        raise DesignError(f"{path}: {first} ({len(extra)} extra, {len(missing)} missing of the config's {len(expected_runs)}); {RECOMPUTE}")
    results = results_of(path)
    for run, recorded in sorted(runs_read.items()):
        metrics = Path(metrics_path(results, run))
        if metrics.exists() and (digest := sha256_file(metrics)) != recorded:
            raise DesignError(
                f"{path}: {metrics} hashes {digest[:12]}, but the look read {recorded[:12]}: the look was made from other runs "
                f"(another experiment's look file, or runs changed since); {RECOMPUTE}"
            )


def design_digest(record: Mapping) -> str:
    return sha256_json(record)[:16]


def describe_design(record: Mapping) -> str:
    looks = ", ".join(f"{look['references']}x{look['seeds']}" for look in record["looks"])
    return (
        f"{record['alpha_spending']} spending, looks {looks}, at most {record['max_runs_per_arm']} runs per arm ({design_digest(record)})"
    )


def read_design_record(results: str | Path) -> list[dict]:
    """The designs a results folder's looks were read under, oldest first ([] before its first look)."""
    path = Path(results) / DESIGN_RECORD
    if not path.exists():
        return []
    advice = "restore it, or delete it to let any design start over"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DesignError(f"{path}: not a readable design record ({err}); {advice}") from err
    check_shape(record, DESIGN_RECORD_SCHEMA, path, advice, DesignError)
    return list(record["designs"])


def check_design_fixed(results: str | Path, design: Design, reset: bool) -> None:
    """Refuse a design other than the one the results folder's first look was read under, unless reset."""
    designs = read_design_record(results)
    if designs and designs[-1]["design"] != design_record(design) and not reset:
        path = Path(results) / DESIGN_RECORD
        raise DesignError(
            f"{path}: this results folder's looks were read under {describe_design(designs[-1]['design'])}; the config's "
            f"design is {describe_design(design_record(design))}. A sequential design cannot change once its data were "
            "read. To start over under the new design anyway, run with --config design_reset=True (the verdict will name "
            f"the earlier design) or delete {path}"
        )


def record_design(results: str | Path, design: Design, reset: bool) -> list[dict]:
    """At the first look: record the design for the results folder (check_design_fixed's rule), and return the designs
    read before it (earlier_designs of the look file)."""
    check_design_fixed(results, design, reset)
    designs, record = read_design_record(results), design_record(design)
    if not designs or designs[-1]["design"] != record:
        entry = {"design": record, "sha256": sha256_json(record), "first_look_at": datetime.now(UTC).isoformat(timespec="seconds")}
        designs.append(entry)
        write_json({"designs": designs}, Path(results) / DESIGN_RECORD)
    return designs[:-1]
