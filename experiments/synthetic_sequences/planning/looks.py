"""A sequential design on the run grid: which runs each look reads, which runs were trained, and the look files.

An arm is one side of a planned take-up contrast. Its group is (main family, term, alpha); its name is the mode
('mean', 'sum') for the main family's runs and the control's kind ('scale', 'balance') for a control family's.
Look k reads, of every arm open after look k-1 (every arm at look 1), its runs in the first `references` blocks
with the first `seeds` seeds of each (in the order the config lists them). A closed arm keeps the runs it had.

Each look's file (`design/look{k}.json` under the results folder) holds its decisions, the arms the next look
trains, the runs it read with the sha256 of their metrics files, the design it was made under, and the sha256 of
its own content: read_look refuses a file whose content does not match it (edited by hand) or that was made under
another design. Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from core.disentanglement.artifacts import sha256_json
from experiments.synthetic_sequences.planning.design import Design, DesignError, Look
from experiments.synthetic_sequences.planning.grid import RunSpec

LOOK_TEMPLATE = "design/look{look}.json"
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


def look_document(look: int, design: Design, groups: list[dict], runs_read: Mapping[str, str], previous: Mapping | None) -> dict:
    """A look's file: what it decided and read, sealed with the sha256 of its content."""
    body = {
        "look": look,
        "design": design_record(design),
        "groups": groups,
        "runs_read": dict(runs_read),
        "previous_sha256": previous["sha256"] if previous else None,
    }
    return {**body, "sha256": sha256_json(body)}


def read_look(path: str | Path, design: Design) -> dict:
    """A look's file, checked: unedited, of this design. Raises DesignError naming the file and what to do."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
        body = {name: value for name, value in document.items() if name != "sha256"}
        sealed = document.get("sha256") == sha256_json(body)
    except (OSError, ValueError) as err:
        raise DesignError(f"{path}: not a readable look file ({err}); delete it and rerun to recompute the look") from err
    if not sealed:
        raise DesignError(f"{path}: its content does not match its sha256 (edited by hand?); delete it and rerun to recompute the look")
    if document["design"] != design_record(design):
        raise DesignError(
            f"{path}: made under another design than the config's; a design cannot change between looks: delete "
            f"{path.parent} (and the runs it trained, if they should not count) and rerun"
        )
    return document
