"""The pipeline through `snakemake --profile slurm` on a live single-node Slurm cluster.

Needs the test cluster (scripts/slurm-test-cluster/start, as root); .ci/run starts it. Locally:
    scripts/slurm-test-cluster/start && python -m pytest -m slurm -s -n 0; scripts/slurm-test-cluster/stop
The default trains up to 4 seeds of an arm per chunk, one after another (seeds_per_job: 4, chunk_training:
sequential; 2 per chunk at its 2 seeds), and the profile packs 2 chunks into one Slurm job (a snakemake group
job); the tests read each job's runs back from its submit line in accounting. The
cluster runs accounting (slurmdbd). The smoke runs poll job status with the profile's default, sacct; the default
pilot, whose test cancels a job, polls with squeue, the path for clusters without accounting (with sacct,
snakemake-executor-plugin-slurm 2.8 reads a scancel'ed job's "CANCELLED by <uid>" as still running and waits
forever). The node declares two stand-in GPUs, so a GPU request is scheduled and allocated on this CPU-only machine.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from core.disentanglement.config import parse_aggregation_mode
from experiments.synthetic_sequences.planning.bindings import GRID_FOLDER
from experiments.synthetic_sequences.planning.grid import RunSpec
from experiments.synthetic_sequences.planning.slurm_jobs import runs_of_slurm_job
from experiments.synthetic_sequences.run_layout import parse_run_path

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slurm
# The default pilot at its own settings on one reference block that test_workflow.py's slow `pipeline` (blocks 0 and
# 1) does not train: no run of CI's trains twice.
PILOT_REFERENCES = [2]
CANCELLED_RUN = f"discrete/ref{PILOT_REFERENCES[0]}/raw_sum_0/seed0"
CANCELLED_PARAMS = parse_run_path(CANCELLED_RUN)
ZFREE_JOB = "rule_train_zfree_wildcards_"  # the plugin's comment of a reference block's z-free job, then the block
DEFAULT_CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
CHUNK_RUNTIME = DEFAULT_CONFIG["resources"]["train_run"]["runtime"]  # minutes
PER_JOB = DEFAULT_CONFIG["seeds_per_job"]


def spec_of(run: dict) -> RunSpec:
    """A run found on the cluster (its parameters as a path or job comment gives them), as the grid's spec."""
    found = {key: value for key, value in run.items() if key != "reference"}
    return RunSpec(model="", beta=0.0, controls="", block=run["reference"], **{**found, "mode": parse_aggregation_mode(run["mode"])})


def chunks_of(runs: list[dict]) -> set[str]:
    """The chunks (training jobs) a Slurm job's runs trained in."""
    return {spec_of(run).chunk_path(PER_JOB) for run in runs}


CANCELLED_SPEC = spec_of(CANCELLED_PARAMS)


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


def test_default_pilot_runs_on_slurm_in_packed_jobs_and_a_cancelled_pack_resumes(cluster, tmp_path):
    """The profile packs 2 chunks of 2 seeds per Slurm job; one pack is cancelled mid-training, retried, and resumes.

    The default pilot at its own settings on one reference block (PILOT_REFERENCES): 8 runs in 4 chunks, so 2 packs
    and the retried one. More blocks would add packs of the same shape; the slow tests train the default on 2 other
    blocks locally (test_workflow.py's `pipeline`), and test_slurm_recovery.py recovers every run of all 5 blocks from
    its job's comment and submit line."""
    results = tmp_path / "results"
    (tmp_path / "blocks.yaml").write_text(yaml.safe_dump({"references": PILOT_REFERENCES}))
    first = next_job_id()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm"),
        *("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"),
        *("--configfile", str(tmp_path / "blocks.yaml"), "--config", f"results={results}"),
    ]
    started = time.monotonic()
    log = open(tmp_path / "snakemake.log", "w")  # noqa: SIM115 - closed below, after the run
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # preempt the pack holding one run once that run trains: Slurm's scancel, as a time limit or preemption would
        train_log = results / "logs" / "train_run" / f"{CANCELLED_SPEC.chunk_path(PER_JOB)}.log"  # its chunk's log
        wait_for(lambda: train_log.is_file() and "step " in train_log.read_text(), 1200, f"{CANCELLED_RUN} to start training")
        running = [job for job in sacct_jobs(first) if job["State"] == "RUNNING" and CANCELLED_PARAMS in runs_of(job)]
        assert len(running) == 1, running
        subprocess.run(["scancel", running[0]["JobID"]], check=True, timeout=30)
        status = process.wait(timeout=2400)
    finally:
        if process.poll() is None:  # snakemake does not exit on SIGTERM; take the whole session down
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
    wall = time.monotonic() - started
    assert status == 0, (tmp_path / "snakemake.log").read_text()[-4000:]

    jobs = sacct_jobs(first)
    print(f"\nslurm integration: {len(jobs)} Slurm jobs, {wall:.0f} s wall")
    # the seconds-long rules are localrules; each reference block's z-free model is one job
    zfree_jobs = sorted(job["Comment"] for job in jobs if job["Comment"].startswith(ZFREE_JOB))
    assert zfree_jobs == sorted(f"{ZFREE_JOB}{r}" for r in PILOT_REFERENCES)
    packs = [job for job in jobs if not job["Comment"].startswith(ZFREE_JOB)]
    cancelled = [job for job in packs if job["State"].startswith("CANCELLED")]
    completed = [job for job in packs if job["State"] == "COMPLETED"]
    grid = grid_runs(results)
    assert len(cancelled) == 1 and len(completed) == len(packs) - 1, [(j["JobID"], j["State"]) for j in packs]
    assert len(grid) == 8 and sorted(len(runs_of(job, grid)) for job in completed) == [4] * 2, "8 runs in packs of 2 chunks of 2 seeds"
    assert [runs_of(job, grid) for job in completed].count(runs_of(cancelled[0], grid)) == 1, "the cancelled pack was not retried once"
    for job in packs:  # sized for members in sequence: one chunk's CPU and memory, the chunks' summed time
        assert "cpu=1" in job["ReqTRES"].split(",") and "mem=2000M" in job["ReqTRES"].split(","), job
        minutes = len(chunks_of(runs_of(job, grid))) * CHUNK_RUNTIME
        assert job["Timelimit"] == f"{minutes // 60:02d}:{minutes % 60:02d}:00", job

    # the same tables as a local run, and every run's parameters recovered from what Slurm shows of its pack
    for table in ("runs", "aggregate", "takeup", "mean_vs_sum", "confounds", "verdict"):
        for ext in ("parquet", "csv", "md"):
            assert (results / "tables" / f"{table}.{ext}").stat().st_size > 0
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    recovered = sorted(tuple(run.values()) for job in completed for run in runs_of(job, grid))
    assert recovered == sorted((r.family, r.reference, r.term, r.mode, r.alpha, r.seed) for r in runs.itertuples())
    resumed = pd.read_json(results / "runs" / CANCELLED_RUN / "metadata.json", typ="series")
    assert resumed["resumed_from_step"] >= 1, "the retried pack did not resume the run from its preemption checkpoint"


ACCOUNTING_FIELDS = ("JobID", "Comment", "State", "Timelimit", "ReqTRES", "AllocTRES", "SubmitLine")


def sacct_jobs(first: int, steps: bool = False) -> list[dict]:
    """Accounting's record of every job from id `first` on (with `steps`, their steps too)."""
    out = subprocess.run(
        ["sacct", *([] if steps else ["-X"]), "-n", "-P", "-S", "now-1days", "-o", ",".join(ACCOUNTING_FIELDS)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    jobs = [dict(zip(ACCOUNTING_FIELDS, line.split("|", len(ACCOUNTING_FIELDS) - 1), strict=True)) for line in out.splitlines()]
    return [job for job in jobs if int(job["JobID"].split(".")[0]) >= first]


def next_job_id() -> int:
    return max((int(job["JobID"]) for job in sacct_jobs(0)), default=0) + 1


def runs_of(job: dict, grid: list[str] | None = None) -> list[dict]:
    """The runs a Slurm job trained; without `grid`, every seed of its chunks' ranges (a chunk of up to 4 seeds
    names all 4 even where the grid trains fewer)."""
    return runs_of_slurm_job(job["Comment"], job["SubmitLine"], grid)


def grid_runs(results: Path) -> list[str]:
    """Every run path of the grid records a finished pipeline wrote (a sequential design writes one per look)."""
    return sorted({path for record in (results / GRID_FOLDER).glob("*.json") for path in json.loads(record.read_text())["runs"]})


@pytest.mark.parametrize("runs_per_job", [4, 1])
def test_a_gpu_request_is_allocated_and_the_trainer_falls_back_to_cpu(cluster, tmp_path, runs_per_job):
    """config/smoke.yaml asks one GPU per training run (one seed per chunk), packed 4 chunks per job or 1.

    The status checks use the profile's default, sacct."""
    results = tmp_path / "results"
    first = next_job_id()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm", "--configfile", "config/smoke.yaml"),
        *("--slurm-init-seconds-before-status-checks", "5", "--group-components", f"train={runs_per_job}"),
        *("--config", f"results={results}"),
    ]
    started = time.monotonic()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-4000:]
    wall = time.monotonic() - started
    print(f"\nslurm GPU smoke run, {runs_per_job} run(s) per job: {len(sacct_jobs(first))} Slurm jobs, {wall:.0f} s wall")
    trainings = [job for job in sacct_jobs(first) if not job["Comment"].startswith(ZFREE_JOB)]
    assert len(trainings) == 4 // runs_per_job
    steps = sacct_jobs(first, steps=True)
    for job in trainings:
        assert "gres/gpu=1" in job["ReqTRES"].split(","), job
        assert "gres/gpu=1" in job["AllocTRES"].split(","), job
        assert job["State"] == "COMPLETED", job
        members = [step for step in steps if step["JobID"].startswith(f"{job['JobID']}.") and step["JobID"][-1].isdigit()]
        assert len(members) == runs_per_job and all("gres/gpu=1" in step["AllocTRES"] for step in members), members
        assert len(runs_of(job, grid_runs(results))) == runs_per_job
        for params in runs_of(job, grid_runs(results)):
            log = results / "logs" / "train_run" / f"{chunks_of([params]).pop()}.log"
            notices = [line for line in log.read_text().splitlines() if line.startswith("device auto:")]
            assert notices == ["device auto: no CUDA device is visible to this process; training on cpu"]


def test_a_sequential_design_runs_its_looks_on_slurm(cluster, tmp_path):
    """The tiny two-look design of test_design_workflow through the shipped profile, as it is: each look's training
    runs are Slurm jobs, unpacked (a design's training jobs have no group: sequential/stage.check_design_packing), the
    looks themselves run where snakemake runs (localrules), and the tables read every look's runs."""
    from test_design_workflow import LOOKS, PER_JOB, SPENDING, design_config

    config, results = design_config(tmp_path, LOOKS, SPENDING, PER_JOB), tmp_path / "results"
    first = next_job_id()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm"),
        *("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"),
        *("--configfile", str(config), "--config", f"results={results}"),
    ]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    second = json.loads((results / "design" / "look2.json").read_text())
    assert len(second["runs_read"]) == 24 and len(pd.read_parquet(results / "tables" / "runs.parquet")) == 24
    jobs = sacct_jobs(first)
    assert not any("design_look" in job["Comment"] for job in jobs), "the looks run where snakemake runs"
    packs = [job for job in jobs if not job["Comment"].startswith(ZFREE_JOB)]
    trained = sorted(tuple(run.values()) for job in packs if job["State"] == "COMPLETED" for run in runs_of(job, grid_runs(results)))
    assert len(trained) == len(set(trained)) == 24, "every run of both looks trained once, in a Slurm job"


def test_a_curve_design_runs_its_looks_on_slurm_with_the_shipped_profile(cluster, tmp_path):
    """The tiny two-look curve design of test_shipped_configs through `snakemake --profile slurm` as shipped (its
    group-components packs the fixed design's training jobs): stage 1's 10 runs and the 4 that look 1 placed each train
    once, in a Slurm job of one chunk, the looks run where snakemake runs, and the tables count all 14 runs."""
    from test_shipped_configs import CURVE_DESIGN_RUNS, tiny_curve_design_files

    results = tmp_path / "results"
    pilot = tiny_curve_design_files(tmp_path, results)
    first = next_job_id()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [
        *(sys.executable, "-m", "snakemake", "--profile", "slurm"),
        *("--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"),
        *("--configfile", *pilot.configfiles),
    ]
    started = time.monotonic()
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert len(json.loads((results / "design" / "look2.json").read_text())["runs_read"]) == CURVE_DESIGN_RUNS
    assert len(pd.read_parquet(results / "tables" / "runs.parquet")) == CURVE_DESIGN_RUNS
    jobs = sacct_jobs(first)
    assert not any("design_look" in job["Comment"] for job in jobs), "the looks run where snakemake runs"
    packs = [job for job in jobs if not job["Comment"].startswith(ZFREE_JOB)]
    grid = grid_runs(results)
    assert all(len(runs_of(job, grid)) == 1 for job in packs), [runs_of(job, grid) for job in packs]
    trained = sorted(tuple(run.values()) for job in packs if job["State"] == "COMPLETED" for run in runs_of(job, grid))
    assert len(trained) == len(set(trained)) == CURVE_DESIGN_RUNS, "every run of both stages trained once, in a Slurm job"
    print(f"curve design on Slurm: {time.monotonic() - started:.0f} s, {len(jobs)} Slurm jobs")
