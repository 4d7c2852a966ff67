"""Which seeds of an arm train together: the run grid cut into seed chunks, one training job each.

An arm (family, term, mode, alpha and, on a beta axis, beta) of one reference block trains its seeds in blocks of
`seeds_per_job` consecutive seed values: block k
holds the arm's seeds in [k * seeds_per_job, (k + 1) * seeds_per_job) and is named by that range, e.g. seeds0-9.
A chunk's name and members depend only on the seed values, so adding seeds adds chunks, and a block that gains
seeds keeps its name: its job reruns, and the trainer keeps the seeds it finished before and trains only the new.
A chunk's record lives beside its runs (run_layout.CHUNK_TEMPLATE): the workflow's record that its seeds finished.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from experiments.synthetic_sequences.planning.grid import RunSpec, training_seed
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand
from experiments.synthetic_sequences.run_layout import (
    CHUNK_TEMPLATE,
    RUNS_FOLDER,
    GridError,
    RunLayout,
    parse_run_path,
    read_chunk_record,
    run_directory,
)

TRAIN_RULE = "train_run"  # the rule that trains a chunk of runs (rules/train.smk)
CHUNK_PATTERN = r"[0-9]+-[0-9]+"
CHUNK_NAME = re.compile(f"^({CHUNK_PATTERN})$")


def chunk_grid(specs: Iterable[RunSpec], seeds_per_job: int) -> dict[str, list[RunSpec]]:
    """Every chunk of the grid by its path, its runs in seed order."""
    chunks: dict[str, list[RunSpec]] = {}
    for spec in specs:
        chunks.setdefault(spec.chunk_path(seeds_per_job), []).append(spec)
    return {path: sorted(runs, key=lambda spec: spec.seed) for path, runs in chunks.items()}


def chunk_seed_range(name: str) -> range:
    """'10-19' -> range(10, 20): the seed values a chunk's name covers."""
    if not CHUNK_NAME.match(name):
        raise GridError(f"chunk {name!r} is not first-last (two seed values)")
    first, last = (int(part) for part in name.split("-"))
    if last < first:
        raise GridError(f"chunk {name!r}: its last seed comes before its first")
    return range(first, last + 1)


def chunk_record(results: str, chunk: str) -> str:
    """A chunk's record under the results folder (CHUNK_TEMPLATE filled, as chunk_path gives it)."""
    return f"{results}/{RUNS_FOLDER}/{chunk}.json"


def chunk_records_holding(run_dir: str | Path) -> list[Path]:
    """The chunk records on disk beside a run directory whose seed range holds its seed, whatever seeds_per_job made
    them: what to force (--forcerun) for snakemake to train the run again."""
    run_dir = Path(run_dir)
    seed = parse_run_path(str(run_dir))["seed"]
    prefix = CHUNK_TEMPLATE.rsplit("/", 1)[1].format(chunk="")
    return sorted(
        path
        for path in run_dir.parent.glob(f"{prefix}*.json")
        if CHUNK_NAME.match(name := path.stem.removeprefix(prefix)) and seed in chunk_seed_range(name)
    )


def retrain_advice(entries: list[str], results: str, pilot: PilotCommand) -> str:
    """How to retrain the runs named at the start of each entry ('family/key/seedN (why)'): their chunks forced
    (chunk_records_holding), since snakemake takes a chunk's record for its work; the trainer retrains each
    seed that is not finished with the current settings and inputs, and keeps the others. Runs without a chunk record
    on disk (copied in by hand) are retrained by forcing every training job."""
    records = sorted({str(path) for entry in entries for path in chunk_records_holding(run_directory(results, entry.split(" ")[0]))})
    return f"Retrain them: {pilot.command(flags=['--forcerun', *(records or [TRAIN_RULE])])}"


def check_chunks_trained(results: str, chunks: Mapping[str, list[RunSpec]], pilot: PilotCommand) -> None:
    """Refuse a chunk record of a run that is gone (its record names the run's seed, but the run directory or its
    metadata.json is not there): snakemake takes the record for the chunk's work, so it would neither retrain the run
    nor let the tables drop it. A run the record does not name (a chunk that gained seeds) is snakemake's to train.
    The advice removes those records and forces their chunks, with the pilot's own command (a missing record alone is
    not made again where its runs' metrics exist); the trainer keeps each of their seeds that is finished."""
    gone, records = [], []
    for chunk, specs in chunks.items():
        path = chunk_record(results, chunk)
        if not Path(path).exists():
            continue
        removal = f"rm {shlex.quote(path)}; then {pilot.command(flags=['--forcerun', path])}"
        trained = set(read_chunk_record(path, f"its chunk trains again: {removal}")["seeds"])
        missing = [
            spec.path
            for spec in specs
            if training_seed(spec.block, spec.seed) in trained and not RunLayout(run_directory(results, spec.path)).metadata.exists()
        ]
        if missing:
            gone += missing
            records.append(path)
    if gone:
        named = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
        raise GridError(
            f"{len(gone)} run(s) are gone or unfinished, but the records of the chunks they trained in say they trained "
            f"({named}). Train them again: rm {shlex.join(records)}; then {pilot.command(flags=['--forcerun', *records])}"
        )
