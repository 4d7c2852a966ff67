"""One snakemake run at a time on a results folder, whichever working directory it starts from.

Snakemake's own lock and its record of incomplete files live in the working directory's .snakemake/, so two runs
from two working directories (or one with --nolock) would write one results folder at once, and a second run from
the same directory meets the first one's incomplete files with advice (--rerun-incomplete) that would race it. The
run that executes jobs holds `.snakemake-run.lock` in the results folder (its pid, host and start) from its start to
its end; a run that finds the lock held by a live process is refused, as the Snakefile is parsed, in one line. A lock
left by a run that died (its pid gone on this host) is taken over. Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

LOCK_FILE = ".snakemake-run.lock"


class ResultsInUse(RuntimeError):
    """Another live run holds the results folder."""


def lock_path(results: str | Path) -> Path:
    return Path(results) / LOCK_FILE


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a live process of another user
        return True
    return True


def holder(results: str | Path) -> dict | None:
    """Who holds the results folder: the lock's content, or None where it is free (no lock, or one whose process is
    gone from this host, or our own)."""
    try:
        held = json.loads(lock_path(results).read_text())
        pid, host = int(held["pid"]), str(held["host"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return {"pid": "?", "host": "?", "started": "?"}  # unreadable: another writer's, half-written
    if pid == os.getpid() or (host == socket.gethostname() and not alive(pid)):
        return None
    return held


def check_free(results: str | Path) -> None:
    """Refuse a results folder another live run holds, naming it."""
    if (held := holder(results)) is not None:
        raise ResultsInUse(
            f"results: {results} is in use by another snakemake run (pid {held['pid']} on {held['host']}, since "
            f"{held.get('started', '?')}); wait for it to end. If no run is going on (one that died on another host), "
            f"delete {lock_path(results)}"
        )


def acquire(results: str | Path) -> None:
    """Hold the results folder for this process (check_free first; a dead run's lock is replaced)."""
    check_free(results)
    path = lock_path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {"pid": os.getpid(), "host": socket.gethostname(), "started": datetime.now(UTC).isoformat(timespec="seconds")}
    path.unlink(missing_ok=True)  # free: absent, a dead run's, or our own
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:  # another run took it between the check and now
        check_free(results)
        raise
    with os.fdopen(descriptor, "w") as handle:
        json.dump(mine, handle)


def release(results: str | Path) -> None:
    """Let go of the results folder, if this process holds it."""
    path = lock_path(results)
    try:
        if int(json.loads(path.read_text())["pid"]) == os.getpid():
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass
