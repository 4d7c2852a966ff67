"""One trainer per run directory: an exclusive lock held while a run trains.

Two trainers in one directory (an orphaned trainer after snakemake was SIGKILLed, and its --rerun-incomplete retry)
would rename each other's metrics log and interleave their outputs. The lock is an fcntl lock on `.train.lock` in
the run directory: the kernel drops it when its process dies, however it dies, so a stale lock file from a dead
trainer is taken over (with a notice naming it), and a live one is refused, naming its PID and host.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".train.lock"


class RunDirectoryBusy(ValueError):
    """Another trainer holds the run directory."""


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    path = run_dir / LOCK_FILE
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "an unknown process"
            raise RunDirectoryBusy(f"run directory {run_dir} is being trained by {holder} (lock {path}); wait for it or stop it") from None
        handle.seek(0)
        previous = handle.read().strip()
        if previous:
            print(f"taking over {path}: its holder, {previous}, has ended", file=sys.stderr, flush=True)
        handle.seek(0)
        handle.truncate()
        handle.write(f"PID {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()  # a clean end leaves no holder behind
            fcntl.flock(handle, fcntl.LOCK_UN)
