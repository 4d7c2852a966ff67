"""Reading a finished run directory: every file extraction reads, checked against the hashes metadata.json holds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from experiments.synthetic_sequences.disentangled.grid import RESUME_FILE, RUN_OUTPUTS

RUN_CONFIG_GROUPS = ("reconstruction", "model", "run")  # the groups of run_config.json that extraction reads
EXTRACTED = ("metadata.json", "eval.json", "run_config.json", "metrics.jsonl")  # the run files extraction reads
VALIDATION_ROW = '{"split": "val"'  # how the trainer's write_jsonl starts a validation row


def validation_lines(text: str) -> list[str]:
    """The validation rows of a metrics.jsonl, found by string search: the train rows, one per step, are never
    split or parsed (they made up nearly all of a run's extraction time)."""
    lines, start = [], text.find(VALIDATION_ROW)
    while start != -1:
        end = text.find("\n", start)
        lines.append(text[start:] if end == -1 else text[start:end])
        start = -1 if end == -1 else text.find(VALIDATION_ROW, end)
    return lines


def parse_json(text: str | bytes, path: Path) -> dict:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from err


def read_json(path: str | Path) -> dict:
    return parse_json(Path(path).read_text(), Path(path))


def read_finished_run(run_dir: Path) -> dict[str, bytes]:
    """The bytes of the outputs extraction reads; refuses a run directory that is unfinished or holds another run's files.

    The trainer writes metadata.json last, with `finished` and the sha256 of every other output, so a directory
    mixing one run's eval.json with another's run_config.json is caught here. Each file is read once; model.pt, which
    extraction does not read, is only required to exist.
    """
    if (run_dir / RESUME_FILE).exists():
        raise ValueError(f"run directory {run_dir} holds {RESUME_FILE}: the run is unfinished or was interrupted")
    missing = [name for name in RUN_OUTPUTS if not (run_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"run directory {run_dir} lacks {', '.join(missing)}; is the run finished?")
    files = {name: (run_dir / name).read_bytes() for name in EXTRACTED}
    metadata = parse_json(files["metadata.json"], run_dir / "metadata.json")
    if "finished" not in metadata or "outputs_sha256" not in metadata:
        raise ValueError(f"{run_dir / 'metadata.json'} has no 'finished' or 'outputs_sha256' field: the run did not finish")
    for name in EXTRACTED:
        if name != "metadata.json" and hashlib.sha256(files[name]).hexdigest() != metadata["outputs_sha256"].get(name):
            raise ValueError(f"{run_dir / name}: sha256 differs from metadata.json's outputs_sha256; it is not this run's {name}")
    return files


def parse_run_config(text: bytes, run_dir: Path) -> dict:
    """run_config.json, refused in one line when it lacks a settings group (an older trainer wrote flat settings)."""
    run_config = parse_json(text, run_dir / "run_config.json")
    missing = [group for group in RUN_CONFIG_GROUPS if not isinstance(run_config.get(group), dict)]
    if missing:
        raise ValueError(
            f"{run_dir}/run_config.json lacks the settings group(s) {', '.join(missing)}: it was written by an older trainer "
            "with flat settings; train the run again"
        )
    return run_config
