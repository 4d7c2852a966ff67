"""Reading a finished run directory: every output checked against the hashes metadata.json holds, and the values
extraction reads checked for what they can be."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path

import msgspec

from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.metrics import bounds, standard_errors
from experiments.synthetic_sequences.planning.record_shape import SHA256, check_shape
from experiments.synthetic_sequences.run_layout import (
    EVALUATION,
    FINISHED,
    METADATA,
    METRICS_LOG,
    MODEL,
    RUN_CONFIG,
    RunLayout,
    finished_at,
)

RUN_CONFIG_GROUPS = ("reconstruction", "model", "run")  # the groups of run_config.json that extraction reads
EXTRACTED = (METADATA, EVALUATION, RUN_CONFIG, METRICS_LOG)  # the run files extraction reads
EVAL_SECTIONS = ("latent_usage", "strategy_separation", "samples")
NUMBER = {"type": "number"}
NUMERICS_FIELDS = {"cpu_capability": {"type": "string"}, "cpu_model": {"type": "string"}, "threads": {"type": "integer", "minimum": 1}}
NUMERICS_FIELDS |= {"dtype": {"type": "string"}, "torch": {"type": "string"}, "execution": {"type": ["object", "null"]}}
NUMERICS_FIELDS |= {"gaussian_cross_density": {"type": "string"}}  # absent in runs before it (information.py)
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
RESOLVED_FIELDS = {"controls": {"type": "string"}, "beta": POSITIVE, "reconstruction_scale": POSITIVE}
METADATA_SCHEMA = {  # what extraction reads of metadata.json (training/cvae_run.py writes it)
    "type": "object",
    "required": ["finished", "outputs_sha256", "train_diagnostics", "resolved"],  # inputs_sha256: checked where it is bound
    "properties": {
        "finished": {"type": "string"},
        "outputs_sha256": {"type": "object", "additionalProperties": SHA256},
        "inputs_sha256": {"type": "object", "additionalProperties": SHA256},
        "train_diagnostics": {"type": "object", "additionalProperties": NUMBER},
        "resolved": {"type": "object", "required": list(RESOLVED_FIELDS), "properties": RESOLVED_FIELDS},
        "numerics": {
            "type": ["object", "null"],
            "required": ["cpu_capability", "cpu_model", "threads", "dtype", "torch"],
            "properties": NUMERICS_FIELDS,
        },
    },
}

# the values the verdict and the tables read, and what each can be (a float's residue of -1e-9 is not a refusal)
SLACK = 1e-6
RANGES = bounds()
# a Monte Carlo estimate may lie outside its quantity's range by its own noise: by up to MC_SIGMAS standard errors
# (a chance of about 1e-9 per value when the estimator is right), not more
MC_SIGMAS = 6.0
STANDARD_ERRORS = standard_errors()
VALIDATION_KEYS = ("step", "mutual_information", "recon_nll_per_token")  # what the take-up event and convergence read


class LogLine(msgspec.Struct, gc=False):
    """What selecting a metrics log's rows reads of each line: its split (the rest is skipped, still parsed as JSON)."""

    split: str | None = None


LOG_LINES = msgspec.json.Decoder(list[LogLine])


def validation_rows(text: bytes, path: Path) -> list[dict]:
    """The validation rows of a metrics.jsonl, each line parsed as a JSON record and kept when its split is "val";
    each row checked to hold what the take-up event reads."""
    lines = text.removesuffix(b"\n").split(b"\n") if text else []
    rows = standard_validation_rows(lines)
    if rows is None:
        rows = [row for number, line in enumerate(lines, start=1) if (row := lenient_record(line, number, path)).get("split") == "val"]
    for row in rows:
        missing = [key for key in VALIDATION_KEYS if key not in row]
        if missing:
            raise ValueError(f"{path}: the validation row of step {row.get('step', '?')} lacks {', '.join(missing)}")
        check_values(row, path, f"validation row of step {row['step']}")
    return rows


def standard_validation_rows(lines: list[bytes]) -> list[dict] | None:
    """The validation rows of a log that is standard JSON, one record a line, or None. Only these rows become Python
    objects: building the train rows' too (hundreds of records) would double a run's extraction time."""
    try:
        splits = LOG_LINES.decode(b"[" + b",".join(lines) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(splits) != len(lines):
        return None
    return [msgspec.json.decode(lines[i]) for i, line in enumerate(splits) if line.split == "val"]


def lenient_record(line: bytes, number: int, path: Path) -> dict:
    """One line by the standard library's parser, which also reads the NaN and Infinity that json.dumps writes for a
    non-finite value (check_values then names it), and refuses anything else that is not one JSON record."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: line {number} is not valid JSON ({err}); each line of a metrics log is one record") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: line {number} is {record!r:.80}, not a JSON record; each line of a metrics log is one")
    return record


def check_values(section: dict, path: Path, where: str) -> None:
    """Refuse a non-finite or out-of-range value of a metric in RANGES, naming the file, the place and the key; a Monte
    Carlo estimate is held to its range widened by MC_SIGMAS of the standard error it carries beside it (an exact value,
    which carries none, to the range itself)."""
    for name, (low, high) in RANGES.items():
        value = section.get(name)
        if value is None or isinstance(value, bool):
            continue
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{path}: {where}: {name} = {value!r} is not a finite value in [{low:g}, {high:g}]")
        slack, noise = SLACK, ""
        if name in STANDARD_ERRORS and (error := section.get(STANDARD_ERRORS[name])) is not None:  # without one: exact
            if not isinstance(error, int | float) or isinstance(error, bool) or not math.isfinite(error) or error < 0:
                raise ValueError(f"{path}: {where}: {name} carries no finite standard error ({STANDARD_ERRORS[name]} = {error!r})")
            slack, noise = SLACK + MC_SIGMAS * error, f" widened by {MC_SIGMAS:g} Monte Carlo standard errors ({error:.3g})"
        if not low - slack <= value <= high + slack:
            raise ValueError(f"{path}: {where}: {name} = {value!r} is not a finite value in [{low:g}, {high:g}]{noise}")


def check_evaluation(evaluation: dict, path: Path) -> None:
    """eval.json holds every section extraction reads, with values in range."""
    missing = [name for name in EVAL_SECTIONS if not isinstance(evaluation.get(name), dict)]
    separation = evaluation.get("strategy_separation", {})
    missing += [f"strategy_separation.{name}" for name in ("overall", "within_task") if not isinstance(separation.get(name), dict)]
    if missing:
        raise ValueError(f"{path} lacks the section(s) {', '.join(missing)}: it was not written by this trainer's evaluation")
    check_values(evaluation["latent_usage"], path, "latent_usage")
    check_values(separation["overall"], path, "strategy_separation.overall")
    for task, values in separation["within_task"].items():
        check_values(values, path, f"strategy_separation.within_task.{task}")
    check_values(evaluation["samples"], path, "samples")


def parse_json(text: str | bytes, path: Path) -> dict:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from err


def read_json(path: str | Path) -> dict:
    return parse_json(Path(path).read_text(), Path(path))


def check_finished(metadata: dict, path: Path) -> None:
    """`finished` is the trainer's timestamp of the run's end: anything else (false, null, '') is an unfinished run."""
    if finished_at(metadata) is None:
        finished = metadata.get(FINISHED)
        raise ValueError(f"{path}: {FINISHED} is {finished!r}, not the time the run finished: the run did not finish")
    if not isinstance(metadata.get("outputs_sha256"), dict):
        raise ValueError(f"{path} has no outputs_sha256: the run did not finish")


def read_finished_run(run_dir: Path) -> dict[str, bytes]:
    """The bytes of the outputs extraction reads; refuses a run directory that is unfinished or holds another run's files.

    The trainer writes metadata.json last, with `finished` and the sha256 of every other output, so a directory
    mixing one run's eval.json with another's run_config.json, or holding a truncated model.pt, is caught here. Each
    file is read once; model.pt, which extraction does not read, is hashed as it streams.
    """
    layout = RunLayout(run_dir)
    if layout.resume.exists():
        raise ValueError(f"run directory {run_dir} holds {layout.resume.name}: the run is unfinished or was interrupted")
    missing = [name for name, path in layout.outputs.items() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"run directory {run_dir} lacks {', '.join(missing)}; is the run finished?")
    files = {name: layout.outputs[name].read_bytes() for name in EXTRACTED}
    metadata = parse_json(files[METADATA], layout.metadata)
    check_finished(metadata, layout.metadata)
    check_shape(metadata, METADATA_SCHEMA, layout.metadata, "it was not written by this trainer; train the run again")
    digests = {name: hashlib.sha256(files[name]).hexdigest() for name in EXTRACTED if name != METADATA}
    digests[MODEL] = sha256_file(layout.model)
    for name, digest in digests.items():
        if digest != metadata["outputs_sha256"].get(name):
            raise ValueError(f"{run_dir / name}: sha256 differs from metadata.json's outputs_sha256; it is not this run's {name}")
    return files


def parse_run_config(text: bytes, run_dir: Path) -> dict:
    """run_config.json, refused in one line when it lacks a settings group (an older trainer wrote flat settings)."""
    run_config = parse_json(text, RunLayout(run_dir).run_config)
    missing = [group for group in RUN_CONFIG_GROUPS if not isinstance(run_config.get(group), dict)]
    if missing:
        raise ValueError(
            f"{run_dir}/run_config.json lacks the settings group(s) {', '.join(missing)}: it was written by an older trainer "
            "with flat settings; train the run again"
        )
    return run_config


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def numerics_label(record: Mapping | None) -> str:
    """One line of what decides a run's floats: 'AVX2 kernels, AMD EPYC 7B13, 1 thread, float32, torch 2.13.0+cpu,
    eager, 1 seed per pass' (the execution path where the run recorded one)."""
    if not record:
        return "not recorded"
    kernels = record["cuda_device"] if "cuda_device" in record else f"{record['cpu_capability']} kernels"
    label = f"{kernels}, {record['cpu_model']}, {plural(record['threads'], 'thread')}, {record['dtype']}, torch {record['torch']}"
    if execution := record.get("execution"):
        label += f", {'compiled' if execution['compiled'] else 'eager'}, {plural(execution['seeds_per_pass'], 'seed')} per pass"
    return label


def execution_label(record: Mapping | None) -> str:
    """How a run's job trained its seeds, which does not move its floats: 'sequential, 2 seeds per process'."""
    execution = (record or {}).get("execution")
    if not execution:
        return "not recorded"
    return f"{execution['chunk_training']}, {plural(execution['seeds_per_process'], 'seed')} per process"
