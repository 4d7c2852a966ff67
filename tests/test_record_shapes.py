"""Every record the pipeline writes and reads back, with each top-level field deleted in turn and each changed to
another JSON type: refused in one line that names the file and the field, never a KeyError or TypeError."""

import json
import os
import time
from pathlib import Path

import pytest

from core.disentanglement.artifacts import sha256_json
from experiments.synthetic_sequences.planning.bindings import GRID_FOLDER, GRID_SCHEMA, Binding, BindingError
from experiments.synthetic_sequences.planning.design import Design, DesignError, Look
from experiments.synthetic_sequences.planning.looks import (
    DESIGN_RECORD,
    DESIGN_RECORD_SCHEMA,
    LOOK_SCHEMA,
    design_record,
    look_document,
    read_design_record,
    read_look,
)
from experiments.synthetic_sequences.planning.record_shape import shape_error
from experiments.synthetic_sequences.planning.results_lock import LOCK_FILE, LOCK_SCHEMA, ResultsInUse, check_free, identity

DESIGN = Design((Look(1, 1, 4), Look(2, 1, 8)), "pocock", 8)
RUN = "discrete/ref0/raw_sum_0/seed0"


def look_file(folder: Path) -> tuple[Path, dict]:
    group = {"family": "discrete", "term": "raw", "alpha": 0.0, "decisions": {"sum-mean": {"decision": "continue"}}, "train_next": ["sum"]}
    return folder / "design" / "look1.json", look_document(1, DESIGN, [group], {RUN: "0" * 64}, None, [])


def design_file(folder: Path) -> tuple[Path, dict]:
    record = design_record(DESIGN)
    return folder / DESIGN_RECORD, {"designs": [{"design": record, "sha256": sha256_json(record), "first_look_at": "2026-12-04"}]}


def grid_record(folder: Path) -> tuple[Path, dict]:
    run = {"family": "discrete", "reference": 0, "term": "raw", "mode": "sum", "alpha": 0.0, "seed": 0, "settings": {"optim.steps": 10}}
    return folder / GRID_FOLDER / "grid-0.json", {"runs": {RUN: run}}


def lock_file(folder: Path) -> tuple[Path, dict]:
    return folder / LOCK_FILE, {**identity(1), "started": "2026-12-04T00:00:00+00:00"}


def read_look_file(path):
    read_look(path, DESIGN)


def read_design_file(path):
    read_design_record(path.parent)


def read_grid_record(path):
    Binding.from_files(path, {})


def read_lock_file(path):
    old = time.time() - 60  # past the seconds another run may be writing it: stale, not in the making
    os.utime(path, (old, old))
    check_free(path.parent)


RECORDS = {  # name: (a valid record and its path, the reader, the error it raises)
    "look file": (look_file, read_look_file, DesignError),
    "design record": (design_file, read_design_file, DesignError),
    "grid record": (grid_record, read_grid_record, BindingError),
    "results lock": (lock_file, read_lock_file, ResultsInUse),
}


def other_type(value):
    """A value of another JSON type than `value`'s."""
    return [] if not isinstance(value, list) else "a string"


def cases():
    for name, (make, _, _) in RECORDS.items():
        _, record = make(Path("/unused"))
        for field in record:
            yield pytest.param(name, field, "deleted", id=f"{name}-{field}-deleted")
            yield pytest.param(name, field, "retyped", id=f"{name}-{field}-retyped")


@pytest.mark.parametrize(("name", "field", "change"), list(cases()))
def test_a_record_with_a_field_deleted_or_retyped_is_refused_naming_the_file_and_the_field(tmp_path, name, field, change):
    make, read, error = RECORDS[name]
    path, record = make(tmp_path)
    if change == "deleted":
        del record[field]
    else:
        record[field] = other_type(record[field])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    with pytest.raises(error) as refused:
        read(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and f"field {field}" in message, message
    assert ("is missing" if change == "deleted" else "not of type") in message, message


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_valid_record_has_no_shape_error_and_a_non_object_is_named(tmp_path, name):
    schema = {"look file": LOOK_SCHEMA, "design record": DESIGN_RECORD_SCHEMA, "grid record": GRID_SCHEMA, "results lock": LOCK_SCHEMA}[
        name
    ]
    _, record = RECORDS[name][0](tmp_path)
    assert shape_error(record, schema) is None
    assert shape_error([record], schema) == "the record is not of type object"
