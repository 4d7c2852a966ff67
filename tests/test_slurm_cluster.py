"""The pipeline through `snakemake --profile slurm` on a live single-node Slurm cluster.

Needs the test cluster (scripts/slurm-test-cluster/start, as root); .ci/run starts it. Locally:
    scripts/slurm-test-cluster/start && python -m pytest -m slurm -s; scripts/slurm-test-cluster/stop
The cluster runs accounting (slurmdbd). The smoke run polls job status with the profile's default, sacct; the
default pilot, whose test cancels a job, polls with squeue, the path for clusters without accounting (with sacct,
snakemake-executor-plugin-slurm 2.8 reads a scancel'ed job's "CANCELLED by <uid>" as still running and waits
forever). The node declares two stand-in GPUs, so a GPU request is scheduled and allocated on this CPU-only machine.
"""

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from experiments.synthetic_sequences.disentangled.grid import parse_job_comment

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slurm
CANCELLED_RUN = "discrete/raw_sum_0/seed0"
CANCELLED_COMMENT = "rule_train_run_wildcards_discrete_raw_sum_0_0"


def slurm_jobs() -> list[tuple[int, str, str]]:
    """(job id, comment, state) of every job squeue still knows (MinJobAge keeps finished ones for an hour)."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%k|%T"], capture_output=True, text=True, timeout=30, check=True).stdout
    return [(int(i), comment, state) for i, comment, state in (line.split("|") for line in out.splitlines())]


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(2)
    queue = "\n".join(f"  {job} {comment} {state}" for job, comment, state in slurm_jobs())
    raise TimeoutError(f"gave up waiting {timeout:.0f} s for {what}; the queue holds:\n{queue}")


@pytest.fixture(scope="module")
def cluster():
    if subprocess.run(["sinfo", "-h"], capture_output=True, timeout=30).returncode != 0:
        pytest.fail("no Slurm controller answers; start one with scripts/slurm-test-cluster/start")


def test_default_pilot_runs_on_slurm_with_one_job_per_rule_instance_and_a_retry(cluster, tmp_path):
    results = tmp_path / "results"
    before = max((job for job, _, _ in slurm_jobs()), default=0)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm"),
        *("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"),
        *("--config", f"results={results}"),
    ]
    started = time.monotonic()
    log = open(tmp_path / "snakemake.log", "w")  # noqa: SIM115 - closed below, after the run
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # preempt one training job once it is training: Slurm's scancel, as a time limit or preemption would
        train_log = results / "logs" / "train_run" / f"{CANCELLED_RUN}.log"
        wait_for(lambda: train_log.is_file() and "step " in train_log.read_text(), 1200, f"{CANCELLED_RUN} to start training")
        running = [job for job, comment, state in slurm_jobs() if comment == CANCELLED_COMMENT and state == "RUNNING"]
        assert len(running) == 1
        subprocess.run(["scancel", str(running[0])], check=True, timeout=30)
        status = process.wait(timeout=2400)
    finally:
        if process.poll() is None:  # snakemake does not exit on SIGTERM; take the whole session down
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
    wall = time.monotonic() - started
    assert status == 0, (tmp_path / "snakemake.log").read_text()[-4000:]

    jobs = [(job, comment, state) for job, comment, state in slurm_jobs() if job > before]
    print(f"\nslurm integration: {len(jobs)} Slurm jobs, {wall:.0f} s wall")
    per_comment = collections.Counter(comment for _, comment, _ in jobs)
    assert per_comment.pop(CANCELLED_COMMENT) == 2, "the preempted job was not resubmitted exactly once"
    assert all(count == 1 for count in per_comment.values()), [c for c, n in per_comment.items() if n > 1]
    expected_rules = {"train_zfree": 1, "train_run": 12}  # the seconds-long rules are localrules
    seen_rules = collections.Counter()
    for comment in [*per_comment, CANCELLED_COMMENT]:
        rule = comment.removeprefix("rule_").split("_wildcards_")[0]
        seen_rules[rule] += 1
    assert dict(seen_rules) == expected_rules
    states = {state for job, comment, state in jobs if comment != CANCELLED_COMMENT}
    assert states == {"COMPLETED"}
    assert sorted(state for _, comment, state in jobs if comment == CANCELLED_COMMENT) == ["CANCELLED", "COMPLETED"]

    # the same tables as a local run, and every run's parameters recovered from its Slurm comment
    for table in ("runs", "aggregate", "mean_vs_sum", "confounds", "verdict"):
        for ext in ("parquet", "csv", "md"):
            assert (results / "tables" / f"{table}.{ext}").stat().st_size > 0
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    recovered = {tuple(parse_job_comment(c).values()) for c in [*per_comment, CANCELLED_COMMENT] if c.startswith("rule_train_run_")}
    table_runs = {(r.family, r.term, r.mode, r.alpha, r.seed) for r in runs.itertuples()}
    assert recovered == table_runs
    resumed = pd.read_json(results / "runs" / CANCELLED_RUN / "metadata.json", typ="series")
    assert resumed["resumed_from_step"] >= 1, "the retried training job did not resume from its preemption checkpoint"


def sacct_jobs(first: int) -> list[dict]:
    """Accounting's record of every job from id `first` on: id, name, comment, state, requested and allocated TRES."""
    fields = ("JobID", "JobName", "Comment", "State", "ReqTRES", "AllocTRES")
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-1days", "-o", ",".join(fields)], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    jobs = [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]
    return [job for job in jobs if int(job["JobID"]) >= first]


def test_a_gpu_request_is_allocated_and_the_trainer_falls_back_to_cpu(cluster, tmp_path):
    """config/smoke.yaml asks one GPU per training job; the status checks use the profile's default, sacct."""
    results = tmp_path / "results"
    first = max((job for job, _, _ in slurm_jobs()), default=0) + 1
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm", "--configfile", "config/smoke.yaml"),
        *("--slurm-init-seconds-before-status-checks", "5"),
        *("--config", f"results={results}"),
    ]
    started = time.monotonic()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    trainings = [job for job in sacct_jobs(first) if job["Comment"].startswith("rule_train_run_")]
    print(f"\nslurm GPU smoke run: {len(sacct_jobs(first))} Slurm jobs, {time.monotonic() - started:.0f} s wall")
    assert len(trainings) == 4
    for job in trainings:
        assert "gres/gpu=1" in job["ReqTRES"].split(","), job
        assert "gres/gpu=1" in job["AllocTRES"].split(","), job
        assert job["State"] == "COMPLETED", job
        params = parse_job_comment(job["Comment"])
        log = results / "logs" / "train_run" / params["family"] / f"raw_{params['mode']}_0" / "seed0.log"
        notices = [line for line in log.read_text().splitlines() if line.startswith("device auto:")]
        assert notices == ["device auto: no CUDA device is visible to this process; training on cpu"]
