"""The run directory: where a run lives, what it holds, what marks it finished and where a chunk's resume state waits.

    {results}/runs/{family}/ref{reference}/{term}_{mode}_{alpha}[_b{beta}]/
        seed{seed}/                 one run (RUN_TEMPLATE) of the reference block whose z-free seed is {reference}
            run_config.json         its settings, nested by group (TrainConfig.to_dict())
            metrics.partial.jsonl   while it trains: the rows logged so far
            metrics.jsonl           one JSON record per logged train step and per validation point (key "split")
            model.pt                its final weights (a stopped run: those of its last good step)
            eval.json               the test-split evaluation
            metadata.json           written last; its `finished`, the time the run ended, marks the run finished,
                                    beside the sha256 of its inputs and of every other output
            resume.pt               in the first seed's directory of a chunk that is not done: the chunk's state
        seeds{first}-{last}.json    a chunk's record (CHUNK_TEMPLATE), written once all its seeds finished: the trainer
                                    seeds it trained, each one's directory and metadata.json's sha256 (write_chunk_record)

A run on a beta axis (a family's or run entry's `betas:`) carries its beta in its key, `raw_sum_0_b0.05`: each beta
is an arm of its own. A run without one has the key it always had, `raw_sum_0` (its beta is its family's).

Every run belongs to one reference: the z-free model of seed {reference} (REFERENCE_ARTIFACTS), whose scores, c_base
and warm start it reads and no other's. Term names hold no underscore and alpha is written canonically, so a path
parses back to its run's parameters, and a mean run and a sum run can never share a directory. The trainer,
extraction, the rules (through the plan, planning/plan.py) and Slurm recovery all read the layout from here. No torch
or pandas: the Snakefile imports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, write_json
from core.disentanglement.config import AGGREGATION_MODES, OPTIMISABLE_TERMS, parse_aggregation_mode
from experiments.synthetic_sequences.planning.record_shape import SHA256, read_record

RUNS_FOLDER = "runs"  # under the results folder
LOOK_TEMPLATE = "design/look{look}.json"  # a sequential design's look k, under the results folder (sequential/look_files.py)
REFERENCE_TEMPLATE = "ref{reference}"  # a reference block, named by its z-free seed
# {at_beta} is "" for a run without a beta axis, else AT_BETA filled: one template, and one training rule, for both
KEY_TEMPLATE = "{term}_{mode}_{alpha}{at_beta}"
AT_BETA = "_b{beta}"
RUN_TEMPLATE = "{family}/" + REFERENCE_TEMPLATE + "/" + KEY_TEMPLATE + "/seed{seed}"
CHUNK_TEMPLATE = "{family}/" + REFERENCE_TEMPLATE + "/" + KEY_TEMPLATE + "/seeds{chunk}"
# a reference block's artifacts under the results folder: its z-free model, its scores of the records, its c_base per mode
REFERENCE_ARTIFACTS = {
    "checkpoint": "zfree/" + REFERENCE_TEMPLATE + "/model.pt",
    "summary": "zfree/" + REFERENCE_TEMPLATE + "/model.json",
    "train_log": "zfree/" + REFERENCE_TEMPLATE + "/train_log.jsonl",
    "scores": "zfree/" + REFERENCE_TEMPLATE + "/scores/{split}.parquet",
    "scale": "reference/" + REFERENCE_TEMPLATE + "/{mode}.json",
}

METRICS_TEMPLATE = "metrics/{run}.parquet"  # under the results folder: a run's tidy metrics, as extraction writes them


def metrics_path(results: str | Path, run: str) -> str:
    """A run's metrics file, by its run path (RUN_TEMPLATE), under the results folder."""
    return f"{results}/{METRICS_TEMPLATE.format(run=run)}"


RUN_CONFIG = "run_config.json"
METRICS_LOG = "metrics.jsonl"
PARTIAL_METRICS_LOG = "metrics.partial.jsonl"
MODEL = "model.pt"
EVALUATION = "eval.json"
METADATA = "metadata.json"
RESUME = "resume.pt"
RUN_OUTPUTS = (RUN_CONFIG, METRICS_LOG, MODEL, EVALUATION, METADATA)  # what a finished run holds; metadata.json last
FINISHED = "finished"  # metadata.json's key: the ISO time the run finished
ENDED_AT_TAKE_UP = "ended_at_take_up"  # metadata.json's key, where it ended early: the step of its confirmed take-up


class GridError(ValueError):
    """A run grid, run key or run path that is not well formed; the message names the field."""


def run_file(name: str) -> property:
    return property(lambda layout: layout.path / name, doc=f"the run's {name}")


@dataclass(frozen=True)
class RunLayout:
    """The files of one run directory."""

    path: Path

    run_config = run_file(RUN_CONFIG)
    metrics_log = run_file(METRICS_LOG)
    partial_metrics_log = run_file(PARTIAL_METRICS_LOG)
    model = run_file(MODEL)
    evaluation = run_file(EVALUATION)
    metadata = run_file(METADATA)
    resume = run_file(RESUME)  # where a chunk whose first seed this run is keeps its state; a finished run has none

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def outputs(self) -> dict[str, Path]:
        return {name: self.path / name for name in RUN_OUTPUTS}


def chunk_resume_file(run_dirs: Sequence[str | Path]) -> Path:
    """A chunk's resume state: in its first seed's run directory."""
    return RunLayout(run_dirs[0]).resume


def finished_at(metadata: Mapping) -> datetime | None:
    """When the run finished, from its metadata.json, or None for a run that did not (false, null, '' or no key)."""
    try:
        return datetime.fromisoformat(metadata.get(FINISHED))
    except (TypeError, ValueError):
        return None


def plain_number(value: float, field: str, decimals: int) -> str:
    """A number as a run key spells it: no trailing zeros, no exponent; refused where `decimals` do not hold it exactly."""
    text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    if float(text) != value:
        raise GridError(f"{field}: {value!r} needs more than {decimals} decimals; use a value that prints exactly")
    return text


def format_alpha(alpha: float) -> str:
    """The canonical spelling of alpha in a run key: 0, 0.5, 1, 2.5 (no trailing zeros, no exponent for usual values)."""
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha < 0:
        raise GridError(f"alpha: {alpha!r} is not allowed; it must be a finite number >= 0")
    return plain_number(alpha, "alpha", 6)


def format_beta(beta: float) -> str:
    """The canonical spelling of a beta of a beta axis in a run key: 0.05, 0.0035, 2."""
    beta = float(beta)
    if not math.isfinite(beta) or beta <= 0:
        raise GridError(f"beta: {beta!r} is not allowed; it must be a finite number > 0")
    return plain_number(beta, "beta", 8)


def at_beta(beta: float | None) -> str:
    """The run key's beta suffix: '' off a beta axis (beta None), else '_b0.05'."""
    return "" if beta is None else AT_BETA.format(beta=format_beta(beta))


def run_key(term: str, mode: str, alpha: float, beta: float | None = None) -> str:
    """'tokcc_sum_1'; on a beta axis (beta given) 'tokcc_sum_1_b0.05'."""
    if term not in OPTIMISABLE_TERMS:
        raise GridError(f"term: {term!r} is not allowed; allowed values: {', '.join(OPTIMISABLE_TERMS)}")
    mode = parse_aggregation_mode(mode, "mode").value
    return KEY_TEMPLATE.format(term=term, mode=mode, alpha=format_alpha(alpha), at_beta=at_beta(beta))


def parse_run_key(key: str) -> tuple[str, str, float, float | None]:
    """'tokcc_sum_1' -> ('tokcc', 'sum', 1.0, None); 'tokcc_sum_1_b0.05' -> (..., 0.05); the inverse of run_key."""
    parts = key.split("_")
    if len(parts) not in (3, 4) or (len(parts) == 4 and not parts[3].startswith("b")):
        raise GridError(f"run key {key!r} is not term_mode_alpha or term_mode_alpha_b<beta>")
    term, mode, alpha_text = parts[:3]
    if term not in OPTIMISABLE_TERMS or mode not in AGGREGATION_MODES:
        raise GridError(
            f"run key {key!r}: term must be one of {', '.join(OPTIMISABLE_TERMS)} and mode one of {', '.join(AGGREGATION_MODES)}"
        )
    alpha = canonical_in_key(key, "alpha", alpha_text, format_alpha)
    beta = canonical_in_key(key, "beta", parts[3][1:], format_beta) if len(parts) == 4 else None
    return term, mode, alpha, beta


def canonical_in_key(key: str, name: str, text: str, spell) -> float:
    """A number of a run key, read back: refused where it is not one, or not spelt as `spell` spells it."""
    try:
        value = float(text)
        spelt = spell(value)
    except ValueError as err:  # GridError included: a number out of range
        raise GridError(f"run key {key!r}: {name} {text!r} is not an allowed number") from err
    if spelt != text:
        raise GridError(f"run key {key!r}: {name} is not written canonically ({spelt})")
    return value


def run_path(family: str, reference: int, term: str, mode: str, alpha: float, seed: int, beta: float | None = None) -> str:
    """The run's path under the runs folder: RUN_TEMPLATE filled, alpha (and beta, on a beta axis) written canonically."""
    key = run_key(term, mode, alpha, beta)
    return RUN_TEMPLATE.replace(KEY_TEMPLATE, key).format(family=family, reference=reference, seed=seed)


def chunk_name(seed: int, seeds_per_job: int) -> str:
    """The block of `seed`: '10-19' for seed 12 at 10 seeds per job."""
    if seeds_per_job < 1:
        raise GridError(f"seeds_per_job: {seeds_per_job} is not allowed; it must be >= 1")
    first = seed // seeds_per_job * seeds_per_job
    return f"{first}-{first + seeds_per_job - 1}"


def chunk_path(family: str, reference: int, term: str, mode: str, alpha: float, chunk: str, beta: float | None = None) -> str:
    """A training job's chunk under the runs folder: CHUNK_TEMPLATE filled as run_path fills RUN_TEMPLATE."""
    key = run_key(term, mode, alpha, beta)
    return CHUNK_TEMPLATE.replace(KEY_TEMPLATE, key).format(family=family, reference=reference, chunk=chunk)


def numbered(part: str, prefix: str) -> int | None:
    """'ref12' with prefix 'ref' -> 12; None for anything else."""
    digits = part[len(prefix) :]
    return int(digits) if part.startswith(prefix) and digits.isdigit() else None


def parse_run_path(path: str) -> dict:
    """'{family}/ref{reference}/{term}_{mode}_{alpha}[_b{beta}]/seed{seed}' (any prefix) -> its parameters; `beta`
    only for a run on a beta axis, so that run_path(**parameters) gives the path back."""
    parts = path.rstrip("/").split("/")
    if len(parts) < 4 or numbered(parts[-1], "seed") is None or numbered(parts[-3], "ref") is None:
        raise GridError(f"run path {path!r} does not end in family/ref<N>/term_mode_alpha/seed<N>")
    term, mode, alpha, beta = parse_run_key(parts[-2])
    parameters = {
        "family": parts[-4],
        "reference": numbered(parts[-3], "ref"),
        "term": term,
        "mode": mode,
        "alpha": alpha,
        "seed": numbered(parts[-1], "seed"),
    }
    return parameters if beta is None else {**parameters, "beta": beta}


def reference_artifact(name: str, reference: int, **fields) -> str:
    """A reference block's artifact under the results folder: REFERENCE_ARTIFACTS[name] filled."""
    return REFERENCE_ARTIFACTS[name].format(reference=reference, **fields)


def run_directory(results: str, path: str) -> str:
    """A run's directory under the results folder, from its path (RUN_TEMPLATE)."""
    return f"{results}/{RUNS_FOLDER}/{path}"


CHUNK_RECORD_SCHEMA = {  # write_chunk_record's record
    "type": "object",
    "required": ["seeds", "runs", "written"],
    "properties": {
        "seeds": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
        "runs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["run_dir", "metadata_sha256"],
                "properties": {"run_dir": {"type": "string"}, "metadata_sha256": SHA256},
            },
        },
        "written": {"type": "string"},
    },
}


def write_chunk_record(path: str | Path, run_dirs: Mapping[int, str | Path], written: str) -> None:
    """A chunk's record, written by its training job last, when every seed has finished: the trainer seeds it trained
    ({trainer seed: its run directory}) and the sha256 of each one's metadata.json."""
    runs = {}
    for seed, run_dir in run_dirs.items():
        runs[str(seed)] = {"run_dir": str(run_dir), "metadata_sha256": sha256_file(RunLayout(run_dir).metadata)}
    write_json({"seeds": list(run_dirs), "runs": runs, "written": written}, path)


def read_chunk_record(path: str | Path, advice: str) -> dict:
    """A chunk's record, checked for shape; `advice` ends a refusal."""
    record = read_record(path, CHUNK_RECORD_SCHEMA, advice, GridError)
    if sorted(record["runs"]) != sorted(map(str, record["seeds"])):
        raise GridError(f"{path}: its runs {sorted(record['runs'])} are not its seeds {record['seeds']}; {advice}")
    return record


def misplaced_metrics(runs_held: Mapping[str | Path, str]) -> list[str | Path]:
    """The metrics files, of {metrics file: the run its content names}, whose path names another run (METRICS_TEMPLATE
    ends in the run): a link to, or a copy of, another run's file."""
    return [path for path, run in runs_held.items() if not Path(path).with_suffix("").as_posix().endswith(run)]
