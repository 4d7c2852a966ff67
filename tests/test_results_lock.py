"""The results folder's lock (planning/results_lock.py): a live run is refused by name; a lock whose process is gone,
or whose pid now names another process, is taken over with a line; a broken lock is refused as stale once it is old."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from experiments.synthetic_sequences.planning.results_lock import (
    LOCK_FILE,
    STALE_AFTER_S,
    ResultsInUse,
    acquire,
    boot_id,
    check_free,
    identity,
    process_start,
    release,
    start_from_stat,
)


@pytest.fixture
def sleeper():
    """A live process of this host that is not a snakemake run."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def write_lock(folder, **fields):
    record = {"started": "2026-12-04T00:00:00+00:00", **fields}
    (folder / LOCK_FILE).write_text(json.dumps(record))
    return folder / LOCK_FILE


def age(path, seconds):
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_start_time_is_read_after_a_command_name_with_spaces_and_parentheses():
    fields = " ".join(str(n) for n in range(3, 53))  # fields 3..52 of a stat line, each its own number
    assert start_from_stat(f"4242 (a) (b c)) {fields}") == 22
    assert start_from_stat(f"7 (python3) {fields}") == 22


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="no /proc on this system")
def test_a_later_process_has_a_later_start_and_the_same_boot(sleeper):
    assert process_start(sleeper.pid) >= process_start(os.getpid())
    assert boot_id() and identity(sleeper.pid)["boot_id"] == boot_id()


def test_a_live_run_is_refused_naming_its_pid_host_and_start(tmp_path, sleeper):
    write_lock(tmp_path, **identity(sleeper.pid))
    with pytest.raises(ResultsInUse, match=rf"in use by another snakemake run \(pid {sleeper.pid} on {socket.gethostname()}, since 2026"):
        check_free(tmp_path)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="no /proc on this system")
@pytest.mark.parametrize("field", ["process_start", "boot_id"])
def test_a_live_pid_that_is_another_process_is_taken_over_with_a_line(tmp_path, sleeper, capsys, field):
    """pid 1 after a container restart, say: alive, but not the process that wrote the lock."""
    record = identity(sleeper.pid)
    record[field] = record[field] + 1 if field == "process_start" else "another boot"
    write_lock(tmp_path, **record)
    check_free(tmp_path)
    acquire(tmp_path)
    assert f"taking over {tmp_path / LOCK_FILE}: its run, pid {sleeper.pid} since 2026-12-04T00:00:00+00:00, is now another process" in (
        capsys.readouterr().err
    )
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    release(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_lock_whose_process_ended_is_taken_over_with_a_line(tmp_path, sleeper, capsys):
    record = identity(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    write_lock(tmp_path, **record)
    acquire(tmp_path)
    assert f"its run, pid {sleeper.pid} since 2026-12-04T00:00:00+00:00, has ended" in capsys.readouterr().err


def test_a_lock_whose_pid_no_system_can_have_is_a_dead_runs_and_taken_over(tmp_path, capsys):
    """99999999999 is over any pid_t: os.kill raises OverflowError for it, and no process of this host has it."""
    path = write_lock(tmp_path, pid=99999999999, host=socket.gethostname(), boot_id=boot_id(), process_start=None)
    acquire(tmp_path)
    assert (
        f"results lock: taking over {path}: its run, pid 99999999999 since 2026-12-04T00:00:00+00:00, has ended" in capsys.readouterr().err
    )
    assert json.loads(path.read_text())["pid"] == os.getpid()


def test_another_hosts_lock_is_believed(tmp_path):
    write_lock(tmp_path, pid=1, host="elsewhere", boot_id=None, process_start=None)
    with pytest.raises(ResultsInUse, match=r"pid 1 on elsewhere.*delete .*\.snakemake-run\.lock"):
        check_free(tmp_path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "Expecting value"),
        ('{"pid": 12', "Expecting"),
        ("[1, 2]", "the record is not of type object"),
        ('{"pid": 1, "host": "h", "started": "s", "process_start": 5}', "field boot_id is missing"),
        ('{"pid": "1", "host": "h", "started": "s", "process_start": 5, "boot_id": null}', "field pid is '1', not of type integer"),
        ('{"pid": true, "host": "h", "started": "s", "process_start": 5, "boot_id": null}', "field pid is True, not of type integer"),
    ],
    ids=["empty", "half-written", "a list", "a field missing", "a pid as text", "a pid as a bool"],
)
def test_a_broken_lock_is_a_run_taking_it_at_first_and_stale_after(tmp_path, content, reason):
    path = tmp_path / LOCK_FILE
    path.write_text(content)
    with pytest.raises(ResultsInUse, match=r"another run is taking it; try again in a few seconds") as fresh:
        check_free(tmp_path)
    assert f"{path} is not a lock record ({reason}" in str(fresh.value)
    age(path, STALE_AFTER_S + 5)
    with pytest.raises(ResultsInUse, match=rf"a stale lock\. If no snakemake run is writing {tmp_path}, delete {path}$"):
        check_free(tmp_path)
    with pytest.raises(ResultsInUse):
        acquire(tmp_path)
    assert path.read_text() == content  # nothing taken over


def test_a_free_folder_is_taken_and_released(tmp_path):
    check_free(tmp_path)
    acquire(tmp_path)
    assert json.loads((tmp_path / LOCK_FILE).read_text()) | {"started": None} == {**identity(os.getpid()), "started": None}
    check_free(tmp_path)  # our own lock
    release(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()
