"""A run directory's state: the resume checkpoint, the stop signals, and outputs left by an earlier run.

resume.pt holds the state of a chunk of seeds trained in lockstep: the step, the stacked
weights, the optimiser, the seeds that stopped on a non-finite loss, how many rows each
seed's metrics log had when it was saved, the settings and the sha256 of every input. A
chunk resumes only from a state of the same chunk: same seeds, same settings, same inputs,
metrics logs that still hold those rows. Anything else (another run's state, a state whose data,
scores or reference were rebuilt since, a truncated file) is set aside under a
new name, with a one-line warning, and the run starts fresh.

A running run appends its metrics rows to metrics.partial.jsonl as they come
(MetricsLog) and renames it metrics.jsonl when it finishes; a resumed run first
cuts it back to the rows its state had logged, so metrics.jsonl ends
byte-identical to an uninterrupted run's. The partial log is no declared
output: snakemake deletes a failed job's outputs before its retry, and the
retry needs the log to resume.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from core.disentanglement.artifacts import atomic_path, save_torch
from experiments.synthetic_sequences.run_layout import PARTIAL_METRICS_LOG, RunLayout

RESUME_KEYS = ("step", "model", "optimizer", "stopped", "rows_logged", "settings", "inputs_sha256")


class StopRequested:
    """Turns SIGTERM / SIGUSR1 (Slurm's) and SIGINT (Ctrl-C, which reaches snakemake's jobs too) into a flag the loop
    checks after each step: the step ends, the resume state is saved, and the trainer exits."""

    def __init__(self):
        self.signal: int | None = None
        for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.signal = signum


def save_resume(path: Path, step: int, model, optimizer, stopped: dict, rows_logged: dict, settings: dict, inputs_sha256: dict) -> None:
    """`stopped` {seed: step} and `rows_logged` {seed: rows}, seeds as strings."""
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "stopped": stopped, "rows_logged": rows_logged}
    save_torch({**state, "settings": settings, "inputs_sha256": inputs_sha256}, path)


def resume_mismatch(state: object, settings: dict, inputs_sha256: dict, logged_rows: dict[str, int]) -> str | None:
    """Why `state` cannot continue the chunk with these settings, inputs and metrics rows per seed, or None."""
    if not isinstance(state, dict) or any(key not in state for key in RESUME_KEYS):
        return f"not a resume state of this trainer (it needs {', '.join(RESUME_KEYS)})"
    if changed := differing(state["settings"], settings):
        return f"its settings differ in {', '.join(changed)}"
    if changed := differing(state["inputs_sha256"], inputs_sha256):
        return f"its inputs changed since ({', '.join(changed)})"
    for seed, rows in state["rows_logged"].items():
        if logged_rows.get(seed, 0) < rows:
            return f"seed {seed}'s {PARTIAL_METRICS_LOG} holds {logged_rows.get(seed, 0)} rows, fewer than the {rows} it had logged"
    return None


def differing(saved: dict, current: dict) -> list[str]:
    return sorted(name for name in saved.keys() | current.keys() if saved.get(name) != current.get(name))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def set_aside(path: Path) -> Path:
    """Rename `path` to a free name beside it, kept for inspection: resume.pt -> resume.pt.stale-20261130T163200Z."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    aside, n = path.with_name(f"{path.name}.stale-{stamp}"), 1
    while aside.exists():
        aside, n = path.with_name(f"{path.name}.stale-{stamp}-{n}"), n + 1
    path.rename(aside)
    return aside


def load_resume(path: Path, settings: dict, inputs_sha256: dict, partial_logs: dict[str, Path]) -> dict | None:
    """The state to resume from, or None to start fresh (a state of another chunk is set aside with a warning).

    Each seed's metrics.partial.jsonl (`partial_logs`, by seed) must still hold the rows the state had logged."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several unrelated types (OSError, UnpicklingError, RuntimeError) for a bad file
        reason = f"it cannot be read ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else 'no detail'})"
    else:
        logged = {seed: len(read_lines(log)) for seed, log in partial_logs.items()}
        reason = resume_mismatch(state, settings, inputs_sha256, logged)
    if reason is None:
        return state
    aside = set_aside(path)
    print(f"warning: {path} set aside as {aside.name}: {reason}; the chunk starts from step 0", file=sys.stderr, flush=True)
    return None


def clear_outputs(run_dir: Path) -> None:
    """Remove what an earlier run left in `run_dir`, so no output of that run can pass for one of this run."""
    stale = [name for name, path in RunLayout(run_dir).outputs.items() if path.exists()]
    for name in stale:
        (run_dir / name).unlink()
    if stale:
        print(f"removed an earlier run's {', '.join(stale)} from {run_dir}", file=sys.stderr, flush=True)


def git_commit() -> str:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent)
        return result.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def read_lines(path: Path) -> list[str]:
    """The complete lines of a text file (a last line without its newline was cut short), [] if there is none."""
    if not path.is_file():
        return []
    text = path.read_text()
    return [line + "\n" for line in text[: text.rfind("\n") + 1].split("\n")[:-1]]


class MetricsLog:
    """The metrics log of a running run, one JSON row per line, appended as rows come; `finish` names it for good.

    `keep` > 0 (a resumed run) first cuts the file back to its first `keep` rows, the ones the resume state had logged.
    """

    def __init__(self, path: Path, keep: int = 0):
        self.path, self.rows = path, keep
        with atomic_path(path) as tmp:  # a fresh run (keep 0) starts empty without reading what an earlier one left
            tmp.write_text("".join(read_lines(path)[:keep]) if keep else "")
        self._file = path.open("a")

    def append(self, row: dict) -> None:
        """Write `row` through to the file: a resume state may count it, and `tail -f` shows it, at once."""
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        self.rows += 1

    def finish(self, final_path: Path) -> list[dict]:
        """Close the log and rename it `final_path`; every row it holds, read back."""
        self._file.close()
        os.replace(self.path, final_path)
        return [json.loads(line) for line in read_lines(final_path)]
