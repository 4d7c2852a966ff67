"""Every record the pipeline writes and reads back, with each top-level field deleted in turn and each changed to
another JSON type: refused in one line that names the file and the field, never a KeyError or TypeError."""

import hashlib
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.disentanglement.artifacts import sha256_json
from experiments.synthetic_sequences.analysis.records.metrics_files import RUN_COLUMNS, RUN_RECORD, RUN_RECORD_SCHEMA, read_metrics
from experiments.synthetic_sequences.analysis.records.run_files import METADATA_SCHEMA, read_finished_run
from experiments.synthetic_sequences.planning.bindings import GRID_FOLDER, GRID_SCHEMA, Binding, BindingError
from experiments.synthetic_sequences.planning.data_draws import RECORDS_SHA256, SUMMARY_SCHEMA, DrawError, read_summary
from experiments.synthetic_sequences.planning.record_shape import shape_error
from experiments.synthetic_sequences.planning.results_lock import LOCK_FILE, LOCK_SCHEMA, ResultsInUse, check_free, identity
from experiments.synthetic_sequences.run_layout import CHUNK_RECORD_SCHEMA, METADATA, RUN_OUTPUTS, GridError, read_chunk_record
from experiments.synthetic_sequences.sequential.design import Design, DesignError, Look, design_record
from experiments.synthetic_sequences.sequential.look_files import LOOK_SCHEMA, look_document, read_look
from experiments.synthetic_sequences.sequential.record import DESIGN_RECORD, DESIGN_RECORD_SCHEMA, read_design_record
from experiments.synthetic_sequences.splits import SPLITS

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


OUTPUT_BYTES = b"a finished run's output"  # every output but metadata.json, as the run metadata's hashes say


def run_metadata(folder: Path) -> tuple[Path, dict]:
    outputs = {name: hashlib.sha256(OUTPUT_BYTES).hexdigest() for name in RUN_OUTPUTS if name != METADATA}
    numerics = {"cpu_capability": "AVX2", "cpu_model": "a CPU", "threads": 1, "dtype": "float32", "torch": "2.13.0", "execution": None}
    record = {
        "finished": "2026-12-04T00:00:00+00:00",
        "outputs_sha256": outputs,
        "inputs_sha256": {"reference": "1" * 64},
        "train_diagnostics": {"tokens_mean": 6.5},
        "resolved": {"controls": "none", "beta": 0.05, "reconstruction_scale": 1.0},
        "numerics": numerics,
    }
    return folder / RUN / METADATA, record


def metrics_run_record(folder: Path) -> tuple[Path, dict]:
    run = {"family": "discrete", "reference": 0, "term": "raw", "mode": "sum", "alpha": 0.0, "seed": 0}
    return folder / "metrics.parquet", {"run": RUN, **run, "settings": {"optim.steps": 10}, "inputs_sha256": {"reference": "1" * 64}}


def data_summary(folder: Path) -> tuple[Path, dict]:
    split = {
        "records": 60,
        "y_length": {"mean": 6.5, "min": 2, "max": 12},
        "length_only_strategy_accuracy": {"overall": 0.7, "sort": 0.8},
        "by_task_strategy": [{"task": "sort", "strategy": "direct", "count": 30, "mean": 3.0, "min": 2, "max": 5}],
    }
    record = {"config": {"seed": 0, "n_train": 60}, "vocab_size": 30, RECORDS_SHA256: dict.fromkeys(SPLITS, "2" * 64)}
    return folder / "data" / "summary.json", {**record, **{name: json.loads(json.dumps(split)) for name in SPLITS}}


def chunk_record(folder: Path) -> tuple[Path, dict]:
    runs = {"0": {"run_dir": str(folder / RUN), "metadata_sha256": "3" * 64}}
    return folder / "runs" / "discrete" / "ref0" / "raw_sum_0" / "seeds0-0.json", {"seeds": [0], "runs": runs, "written": "2026-12-04"}


def write_run(path: Path, record: dict) -> None:
    for name in RUN_OUTPUTS:
        (path.parent / name).write_bytes(OUTPUT_BYTES)
    path.write_text(json.dumps(record))


def write_metrics_record(path: Path, record: dict) -> None:
    table = pa.table({column: ["x"] for column in RUN_COLUMNS})
    pq.write_table(table.replace_schema_metadata({RUN_RECORD: json.dumps(record)}), path)


RECORDS = {  # name: (a valid record and its path, the reader, the error it raises)
    "look file": (look_file, read_look_file, DesignError),
    "design record": (design_file, read_design_file, DesignError),
    "grid record": (grid_record, read_grid_record, BindingError),
    "results lock": (lock_file, read_lock_file, ResultsInUse),
    "run metadata": (run_metadata, lambda path: read_finished_run(path.parent), ValueError),
    "metrics run record": (metrics_run_record, lambda path: read_metrics([path]), ValueError),
    "data summary": (data_summary, lambda path: read_summary(path, "redraw it"), DrawError),
    "chunk record": (chunk_record, lambda path: read_chunk_record(path, "train the chunk again"), GridError),
}
WRITERS = {"run metadata": write_run, "metrics run record": write_metrics_record}  # the others are JSON files
# a field whose absence or wrong type has a message of its own, that says more than its shape
OWN_MESSAGES = {("run metadata", "finished"): "the run did not finish", ("run metadata", "outputs_sha256"): "the run did not finish"}
# a field the reader does without (an older run's metadata has no numerics; inputs_sha256 is held to the grid's inputs
# where the tables are bound): deleted, the record still reads; of another type, it is refused
OPTIONAL = {("run metadata", "inputs_sha256"), ("run metadata", "numerics")}
SCHEMAS = {
    "look file": LOOK_SCHEMA,
    "design record": DESIGN_RECORD_SCHEMA,
    "grid record": GRID_SCHEMA,
    "results lock": LOCK_SCHEMA,
    "run metadata": METADATA_SCHEMA,
    "metrics run record": RUN_RECORD_SCHEMA,
    "data summary": SUMMARY_SCHEMA,
    "chunk record": CHUNK_RECORD_SCHEMA,
}


def set_at(record: dict, field: tuple, value) -> None:
    """record[field[0]][field[1]]... = value."""
    for key in field[:-1]:
        record = record[key]
    record[field[-1]] = value


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
    WRITERS.get(name, lambda path, record: path.write_text(json.dumps(record)))(path, record)
    if change == "deleted" and (name, field) in OPTIONAL:
        read(path)
        return
    with pytest.raises(error) as refused:
        read(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message, message
    if (name, field) in OWN_MESSAGES:
        assert OWN_MESSAGES[name, field] in message, message
    else:
        assert f"field {field}" in message and ("is missing" if change == "deleted" else "not of type") in message, message


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_valid_record_has_no_shape_error_and_a_non_object_is_named(tmp_path, name):
    schema = SCHEMAS[name]
    _, record = RECORDS[name][0](tmp_path)
    assert shape_error(record, schema) is None
    assert shape_error([record], schema) == "the record is not of type object"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (("train", "y_length", "mean"), 20.0, "train.y_length has mean 20.0 outside [min 2, max 12]"),
        (("val", "length_only_strategy_accuracy", "overall"), 1.5, "field val.length_only_strategy_accuracy.overall is 1.5"),
        (("test", "records"), 0, "field test.records is 0"),
        (("config", "seed"), -1, "field config.seed is -1"),
        ((RECORDS_SHA256, "train"), "not a hash", "field records_sha256.train is 'not a hash', not a sha256"),
    ],
)
def test_a_data_summary_out_of_its_ranges_is_refused_naming_the_field(tmp_path, field, value, message):
    path, record = data_summary(tmp_path)
    set_at(record, field, value)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    with pytest.raises(DrawError) as refused:
        read_summary(path, "redraw it")
    assert str(refused.value).startswith(f"{path}: ") and message in str(refused.value) and str(refused.value).endswith("; redraw it")


def test_a_chunk_record_whose_runs_are_not_its_seeds_is_refused(tmp_path):
    path, record = chunk_record(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**record, "seeds": [0, 1]}))
    with pytest.raises(GridError, match=r"seeds0-0.json: its runs \['0'\] are not its seeds \[0, 1\]; train the chunk again$"):
        read_chunk_record(path, "train the chunk again")


@pytest.mark.parametrize(
    ("name", "field", "value", "message"),
    [
        ("grid record", ("runs", RUN, "seed"), -1, f"field runs.{RUN}.seed is -1"),
        ("grid record", ("runs", RUN, "alpha"), -0.5, f"field runs.{RUN}.alpha is -0.5"),
        ("metrics run record", ("reference",), -2, "field reference is -2"),
        ("run metadata", ("resolved", "beta"), 0, "field resolved.beta is 0"),
        ("run metadata", ("numerics", "threads"), 0, "field numerics.threads is 0"),
    ],
)
def test_a_run_parameter_out_of_its_range_is_refused_naming_the_field(tmp_path, name, field, value, message):
    make, read, error = RECORDS[name]
    path, record = make(tmp_path)
    set_at(record, field, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    WRITERS.get(name, lambda path, record: path.write_text(json.dumps(record)))(path, record)
    with pytest.raises(error) as refused:
        read(path)
    assert "\n" not in str(refused.value) and str(path) in str(refused.value) and message in str(refused.value)
