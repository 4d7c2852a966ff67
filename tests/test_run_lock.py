"""One trainer per run directory: a second one is refused naming the holder; a dead holder's lock is taken over."""

import os
import socket
import time

import pytest

from experiments.synthetic_sequences.training.run_lock import LOCK_FILE, RunDirectoryBusy, run_lock
from tests.conftest import hold_run_lock


@pytest.fixture
def holder(tmp_path):
    """Another process holding tmp_path's run lock."""
    process = hold_run_lock(tmp_path)
    yield process
    process.kill()
    process.wait()


def test_a_second_trainer_is_refused_naming_the_holder(tmp_path, holder):
    with pytest.raises(RunDirectoryBusy, match=rf"is being trained by PID {holder.pid} on {socket.gethostname()}"), run_lock(tmp_path):
        pass


def test_the_lock_of_a_killed_holder_is_taken_over_with_a_notice(tmp_path, holder, capsys):
    holder.kill()
    holder.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the kernel drops the lock with the process
        try:
            with run_lock(tmp_path):
                break
        except RunDirectoryBusy:
            time.sleep(0.05)
    assert f"taking over {tmp_path / LOCK_FILE}: its holder, PID {holder.pid}" in capsys.readouterr().err


def test_a_clean_end_leaves_no_holder_and_no_notice(tmp_path, capsys):
    with run_lock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"PID {os.getpid()} on {socket.gethostname()}\n"
    with run_lock(tmp_path):
        pass
    assert (tmp_path / LOCK_FILE).read_text() == "" and "taking over" not in capsys.readouterr().err
