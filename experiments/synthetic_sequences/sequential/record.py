"""design.json, the design record of a results folder: the designs its looks were read under, oldest first. Its one
home: written at the first look (record_design), read and checked here (read_design_record), and held against the
config's design at parse time (check_design_fixed).

The first look fixes the design for its results folder: a config whose design differs is refused even after the look
files are deleted, unless design_reset is set (the record then keeps the earlier design, and the looks name it) or the
record is deleted by name. Each entry is sealed with the sha256 of its design, and the last entry must be the design
look 1's file was made under, where that file exists: an edited record is refused, not believed. Torch- and
pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

from core.disentanglement.artifacts import sha256_json, write_json
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand
from experiments.synthetic_sequences.planning.record_shape import SHA256, check_shape, shape_error
from experiments.synthetic_sequences.run_layout import LOOK_TEMPLATE
from experiments.synthetic_sequences.sequential.curve_design import CURVE_RECORD_SCHEMA, CurveDesign, describe_record, record_of
from experiments.synthetic_sequences.sequential.design import DESIGN_SCHEMA, Design, DesignError

RESET_SETTING = "design_reset"  # the config key that lets a folder start over under another design
DESIGN_RECORD = "design.json"  # under the results folder, beside design/: the designs its looks were read under
RECORDED_DESIGN = {"anyOf": [CURVE_RECORD_SCHEMA, DESIGN_SCHEMA]}  # a curve design's record, or a contrast design's
ENTRY_FIELDS = {"design": RECORDED_DESIGN, "sha256": SHA256, "first_look_at": {"type": "string"}}
DESIGN_ENTRY = {"type": "object", "required": list(ENTRY_FIELDS), "properties": ENTRY_FIELDS}
DESIGN_RECORD_SCHEMA = {"type": "object", "required": ["designs"], "properties": {"designs": {"type": "array", "items": DESIGN_ENTRY}}}


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
    designs = list(record["designs"])
    for entry in designs:
        if entry["sha256"] != sha256_json(entry["design"]):
            raise DesignError(
                f"{path}: the design first read at {entry['first_look_at']} does not match its sha256 (edited by hand?); {advice}"
            )
    first_look = Path(results) / LOOK_TEMPLATE.format(look=1)
    if designs and (made_under := look_design(first_look)) is not None and made_under != designs[-1]["design"]:
        raise DesignError(
            f"{path}: its last design is {describe_record(designs[-1]['design'])}, but {first_look} was made under "
            f"{describe_record(made_under)}: the record is not its looks' (edited by hand?); {advice}"
        )
    return designs


def look_design(path: Path) -> dict | None:
    """The design a look file says it was made under; None where there is no such file or it is not readable (its own
    reader, sequential/look_files.read_look, refuses it when it is used)."""
    try:
        made_under = json.loads(path.read_text()).get("design")
    except (OSError, ValueError, AttributeError):
        return None
    return made_under if shape_error(made_under, RECORDED_DESIGN) is None else None


def check_design_fixed(results: str | Path, design: Design | CurveDesign, reset: bool, pilot: PilotCommand = DEFAULT_PILOT) -> None:
    """Refuse a design other than the one the results folder's first look was read under, unless reset. The advice
    starts over under the new design: the earlier looks go (they were read under the other design), and the pilot's
    own command runs with design_reset, or, forgetting the earlier design, without the record."""
    designs = read_design_record(results)
    if designs and designs[-1]["design"] != record_of(design) and not reset:
        path = Path(results) / DESIGN_RECORD
        looks = [str(folder)] if (folder := Path(results, LOOK_TEMPLATE).parent).exists() else []
        removal = f"rm -r {shlex.join(looks)}; then " if looks else ""
        raise DesignError(
            f"{path}: this results folder's looks were read under {describe_record(designs[-1]['design'])}; the config's "
            f"design is {describe_record(record_of(design))}. A sequential design cannot change once its data were "
            f"read. To start over under the new design anyway (the verdict names the earlier one): {removal}"
            f"{pilot.command(f'{RESET_SETTING}=True')}; or, forgetting the earlier design: "
            f"rm -r {shlex.join([*looks, str(path)])}; then {pilot.command()}"
        )


def record_design(results: str | Path, design: Design | CurveDesign, reset: bool, pilot: PilotCommand = DEFAULT_PILOT) -> list[dict]:
    """At the first look: record the design for the results folder (check_design_fixed's rule), and return the designs
    read before it (earlier_designs of the look file)."""
    check_design_fixed(results, design, reset, pilot)
    designs, record = read_design_record(results), record_of(design)
    if not designs or designs[-1]["design"] != record:
        entry = {"design": record, "sha256": sha256_json(record), "first_look_at": datetime.now(UTC).isoformat(timespec="seconds")}
        designs.append(entry)
        write_json({"designs": designs}, Path(results) / DESIGN_RECORD)
    return designs[:-1]
