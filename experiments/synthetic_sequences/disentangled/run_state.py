"""A run directory's state: the resume checkpoint, the stop signals, and outputs left by an earlier run.

resume.pt holds the step, the weights, the optimiser, the logged rows, the
settings and the sha256 of every input. A run resumes only from a state of the
same run: same settings, same inputs. Anything else (another run's state, a
state whose data, scores or reference were rebuilt since, a truncated file) is
set aside under a new name, with a one-line warning, and the run starts fresh.
"""

from __future__ import annotations

import datetime
import signal
import subprocess
import sys
from pathlib import Path

import torch

from core.disentanglement.artifacts import save_torch
from experiments.synthetic_sequences.disentangled.grid import RUN_OUTPUTS

RESUME_KEYS = ("step", "model", "optimizer", "rows", "settings", "inputs_sha256")


class StopRequested:
    """Turns SIGTERM / SIGUSR1 into a flag the loop checks after each step."""

    def __init__(self):
        self.signal: int | None = None
        for signum in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(signum, self._handle)

    def _handle(self, signum, frame) -> None:
        self.signal = signum


def save_resume(path: Path, model, optimizer, step: int, rows: list[dict], settings: dict, inputs_sha256: dict) -> None:
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(), "rows": rows}
    save_torch({**state, "settings": settings, "inputs_sha256": inputs_sha256}, path)


def resume_mismatch(state: object, settings: dict, inputs_sha256: dict) -> str | None:
    """Why `state` cannot continue the run with these settings and inputs, or None when it can."""
    if not isinstance(state, dict) or any(key not in state for key in RESUME_KEYS):
        return f"not a resume state of this trainer (it needs {', '.join(RESUME_KEYS)})"
    if changed := differing(state["settings"], settings):
        return f"its settings differ in {', '.join(changed)}"
    if changed := differing(state["inputs_sha256"], inputs_sha256):
        return f"its inputs changed since ({', '.join(changed)})"
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


def load_resume(path: Path, settings: dict, inputs_sha256: dict) -> dict | None:
    """The state to resume from, or None to start fresh (a state of another run is set aside with a warning)."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several unrelated types (OSError, UnpicklingError, RuntimeError) for a bad file
        reason = f"it cannot be read ({type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else 'no detail'})"
    else:
        reason = resume_mismatch(state, settings, inputs_sha256)
    if reason is None:
        return state
    aside = set_aside(path)
    print(f"warning: {path} set aside as {aside.name}: {reason}; the run starts from step 0", file=sys.stderr, flush=True)
    return None


def clear_outputs(run_dir: Path) -> None:
    """Remove what an earlier run left in `run_dir`, so no output of that run can pass for one of this run."""
    stale = [name for name in RUN_OUTPUTS if (run_dir / name).exists()]
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
