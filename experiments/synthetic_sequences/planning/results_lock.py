"""One snakemake run at a time on a results folder, whichever working directory it starts from.

Snakemake's own lock and its record of incomplete files live in the working directory's .snakemake/, so two runs
from two working directories (or one with --nolock) would write one results folder at once, and a second run from
the same directory meets the first one's incomplete files with advice (--rerun-incomplete) that would race it. The
run that executes jobs holds `.snakemake-run.lock` in the results folder from its start to its end; a run that finds
the lock held by a live run is refused, as the Snakefile is parsed, in one line. A dry run writes nothing and needs
no lock.

The lock names its process by more than its pid, which the kernel hands out again: the host, the boot (Linux's
boot id) and the process's start time since boot (/proc/<pid>/stat). A lock whose process is gone, or whose pid now
belongs to another process (after a reboot or a container restart, pid 1 is always alive), is taken over with a line
saying so. An empty or garbled lock is another run's half-written one for STALE_AFTER_S seconds, and stale after:
refused, naming the file to delete. Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from experiments.synthetic_sequences.planning.record_shape import shape_error

LOCK_FILE = ".snakemake-run.lock"
STALE_AFTER_S = 10  # a lock is written in one call: an unreadable one older than this is no run's
LOCK_SCHEMA = {
    "type": "object",
    "required": ["pid", "host", "boot_id", "process_start", "started"],
    "properties": {
        "pid": {"type": "integer", "minimum": 1},
        "host": {"type": "string"},
        "boot_id": {"type": ["string", "null"]},
        "process_start": {"type": ["integer", "null"]},
        "started": {"type": "string"},
    },
}


class ResultsInUse(RuntimeError):
    """Another live run holds the results folder, or a broken lock stands in the way."""


def lock_path(results: str | Path) -> Path:
    return Path(results) / LOCK_FILE


def boot_id() -> str | None:
    """This boot's id (Linux); None where the system has none to read."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat); None where it is gone or
    the system has no /proc."""
    try:
        return start_from_stat(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return None


def start_from_stat(stat: str) -> int:
    """Field 22 (starttime) of a /proc/<pid>/stat line. The command name, field 2, is in parentheses and may hold
    spaces and parentheses itself, so the fields are counted from after its last ")"."""
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a pid no process of any system can have (over pid_t)
        return False
    except PermissionError:  # a live process of another user
        return True
    return True


def identity(pid: int) -> dict:
    """What names process `pid` on this host: the lock's content for it (less `started`)."""
    return {"pid": pid, "host": socket.gethostname(), "boot_id": boot_id(), "process_start": process_start(pid)}


def read_lock(path: Path) -> dict:
    """The lock's record, its every field of its type (LOCK_SCHEMA); ValueError naming the field otherwise."""
    record = json.loads(path.read_text())
    if (problem := shape_error(record, LOCK_SCHEMA)) is not None:
        raise ValueError(problem)
    return record


def same_process(held: dict) -> bool:
    """Whether the lock's process is still running on this host: its pid alive and, where the lock and this system
    name them, the same boot and the same start time."""
    if not alive(held["pid"]):
        return False
    now = identity(held["pid"])
    return all(held[key] is None or now[key] is None or held[key] == now[key] for key in ("boot_id", "process_start"))


def holder(results: str | Path) -> dict | None:
    """Who holds the results folder: the lock's record, or None where it is free (no lock, our own, or one whose
    process is gone from this host). ResultsInUse for a lock that cannot be read."""
    path = lock_path(results)
    try:
        held = read_lock(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # json's JSONDecodeError is a ValueError
        return unreadable(path, error)
    if held["host"] != socket.gethostname():
        return held  # nothing on this host can tell whether another host's run lives
    if held["pid"] == os.getpid() or not same_process(held):
        return None
    return held


def unreadable(path: Path, error: Exception) -> None:
    """A lock that is not a record: another run's, being written, for STALE_AFTER_S seconds; stale after."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:  # its writer removed it meanwhile
        return None
    detail = f"{path} is not a lock record ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
    if age < STALE_AFTER_S:
        raise ResultsInUse(f"results: {detail}, written {age:.0f} s ago: another run is taking it; try again in a few seconds")
    advice = f"If no snakemake run is writing {path.parent}, delete {path}"
    raise ResultsInUse(f"results: {detail}, written {age:.0f} s ago: a stale lock. {advice}")


def check_free(results: str | Path) -> None:
    """Refuse a results folder another live run holds, naming it."""
    if (held := holder(results)) is not None:
        raise ResultsInUse(
            f"results: {results} is in use by another snakemake run (pid {held['pid']} on {held['host']}, since "
            f"{held['started']}); wait for it to end. If no run is going on (one that died on another host), "
            f"delete {lock_path(results)}"
        )


def acquire(results: str | Path) -> None:
    """Hold the results folder for this process (check_free first; a dead run's lock is replaced)."""
    check_free(results)
    path = lock_path(results)
    try:
        previous = read_lock(path)
    except (OSError, ValueError):  # none, or one that vanished since check_free
        previous = None
    if previous is not None and previous["pid"] != os.getpid():  # free, so its process is gone from this host
        reason = "has ended" if not alive(previous["pid"]) else "is now another process (another boot or start time)"
        print(f"results lock: taking over {path}: its run, pid {previous['pid']} since {previous['started']}, {reason}", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {**identity(os.getpid()), "started": datetime.now(UTC).isoformat(timespec="seconds")}
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
        if read_lock(path)["pid"] == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass
