"""Template recovery: every pilot run's parameters come back from what Slurm and Snakemake record of its chunk's job."""

import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from snakemake_executor_plugin_slurm.utils import get_job_wildcards
from snakemake_interface_executor_plugins.utils import TargetSpec, encode_target_jobs_cli_args
from test_plan import load_files

from experiments.synthetic_sequences.planning.slurm_jobs import CHUNK_WILDCARDS, parse_job_comment, runs_of_slurm_job
from experiments.synthetic_sequences.run_layout import GridError, parse_run_path, run_path

ROOT = Path(__file__).resolve().parents[1]


def fixed_design(configfile, folder):
    """The config file as a fixed design on 1 block: a sequential design records its grid per look, at run time."""
    config = yaml.safe_load((ROOT / configfile).read_text())
    if "design" not in config:
        return configfile
    del config["design"]
    path = folder / "fixed.yaml"
    path.write_text(yaml.safe_dump({**config, "references": 1}))
    return str(path)


def dry_run_train_jobs(configfile, folder):
    """(wildcard values in the job's own order, the chunk's run directories) of every train_run job of a forced dry run,
    and the runs of the grid's record; a sequential design's config is read as a fixed design on 1 block."""
    configfile = fixed_design(configfile, folder)
    results = folder / "results"
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--configfile", configfile, "--config", f"results={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    grid = list(load_files(folder, [configfile]).grid_document["runs"])  # what rule record_grid writes (a dry run writes nothing)
    jobs, rule = [], None
    for line in run.stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith(("rule ", "localrule ")):  # a training job is a member of group job `train` (indented)
            rule = stripped.split()[-1].rstrip(":")
        elif stripped.startswith("wildcards:") and rule == "train_run":
            values = dict(item.strip().split("=", 1) for item in stripped.split(":", 1)[1].split(", "))
            arm = "{family}/ref{reference}/{term}_{mode}_{alpha}{at_beta}".format(**values)
            first, last = map(int, values["chunk"].split("-"))
            runs = [path for path in grid if path.startswith(f"{arm}/seed") and first <= int(path.rsplit("seed", 1)[1]) <= last]
            jobs.append((list(values.values()), runs))
    return jobs, grid


@pytest.fixture(scope="module")
def train_jobs(tmp_path_factory):
    """dry_run_train_jobs, once per config file for the module."""
    return cache(lambda configfile: dry_run_train_jobs(configfile, tmp_path_factory.mktemp("dry_run")))


# the pilot as a fixed design on 1 block: 20 arms x 2 chunks of 2 seeds; curve.yaml on 1 of its blocks: 92 arms on a
# beta axis, each its own chunk (at_beta '_b<beta>'), the others' at_beta empty
@pytest.mark.parametrize(
    ("configfile", "chunks", "config"),
    [("config/pilot.yaml", 40, {}), ("config/config.yaml", 20, {}), ("config/curve.yaml", 92, {"references": [21]})],
)
def test_every_run_is_recovered_from_its_jobs_comment_and_log_path(configfile, chunks, config, train_jobs, tmp_path):
    if config:  # cut to fewer blocks: snakemake's --config reads a list as text
        cut = tmp_path / "cut.yaml"
        cut.write_text(yaml.safe_dump({**yaml.safe_load((ROOT / configfile).read_text()), **config}))
        configfile = str(cut)
    jobs, grid = train_jobs(configfile)
    assert len(jobs) == chunks and sorted(run for _, runs in jobs for run in runs) == sorted(grid)
    for values, runs in jobs:
        wildcard_str = get_job_wildcards(SimpleNamespace(wildcards=values))  # the plugin's own function
        comment = f"rule_train_run_wildcards_{wildcard_str}"
        log_dir = Path(".snakemake/slurm_logs/rule_train_run") / wildcard_str  # where the plugin writes the job's log
        from_comment = parse_job_comment(comment, grid)
        assert from_comment == [parse_run_path(run) for run in runs]  # the runs the dry run gives the job, from outside
        assert parse_job_comment(f"rule_train_run_wildcards_{log_dir.name}", grid) == from_comment
        assert all(run["mode"] in ("mean", "sum") and f"_{run['mode']}_" in comment for run in from_comment)


# `sacct -j 5 -P -n -o SubmitLine` of a group job of config/smoke.yaml on the test cluster (paths shortened)
GROUP_SUBMIT_LINE = (
    "sbatch --parsable --job-name 06fcd332-4353-4351-8839-cbaf117dddf9 --output /w/.snakemake/slurm_logs/"
    "group_train_train_run/%j.log --export=ALL --comment rule_train_train_run -p debug -t 20 --mem 2000 "
    "--cpus-per-task=1 -D /w --gpus=1 --wrap=/w/.venv/bin/python -m snakemake --snakefile '/w/Snakefile' "
    "--target-jobs 'train_run:family=discrete,reference=0,term=raw,mode=mean,alpha=0,chunk=0-0' "
    "'train_run:family=discrete,reference=0,term=raw,mode=sum,alpha=0,chunk=0-0' --allowed-rules train_run "
    "--local-groupid 'c5ddfaab-4e31-5f78-86b3-248fd3a745cf' --cores 'all' --attempt 1 --wait-for-files "
    "'/tmp/g1/reference/ref0/mean.json' --config 'results=/tmp/g1' --executor slurm-jobstep --jobs 1 --mode 'remote'"
)


def test_a_group_jobs_runs_are_recovered_from_its_submit_line():
    assert runs_of_slurm_job("rule_train_train_run", GROUP_SUBMIT_LINE) == [
        {"family": "discrete", "reference": 0, "term": "raw", "mode": "mean", "alpha": 0.0, "seed": 0},
        {"family": "discrete", "reference": 0, "term": "raw", "mode": "sum", "alpha": 0.0, "seed": 0},
    ]


@pytest.mark.parametrize("configfile", ["config/pilot.yaml", "config/config.yaml"])
def test_every_run_is_recovered_from_a_group_jobs_command(configfile, train_jobs):
    """The command snakemake writes for a group of every chunk, quoted as the plugin quotes it, names them all."""
    jobs, grid = train_jobs(configfile)
    targets = encode_target_jobs_cli_args([TargetSpec("train_run", dict(zip(CHUNK_WILDCARDS, v, strict=True))) for v, _ in jobs])
    command = f"python -m snakemake --target-jobs {' '.join(map(shlex.quote, targets))} --allowed-rules train_run"
    assert runs_of_slurm_job("rule_train_train_run", command, grid) == [parse_run_path(run) for _, runs in jobs for run in runs]
    # one chunk per job: the comment alone names its runs; the command is not needed
    values, runs = jobs[0]
    assert runs_of_slurm_job(f"rule_train_run_wildcards_{'_'.join(values)}", grid=grid) == [parse_run_path(run) for run in runs]


def test_a_chunk_names_the_seeds_of_its_range_and_the_grid_keeps_its_own():
    comment = "rule_train_run_wildcards_discrete_0_raw_sum_0_10-13"
    assert [run["seed"] for run in runs_of_slurm_job(comment)] == [10, 11, 12, 13]
    assert [run["seed"] for run in runs_of_slurm_job(comment, grid=["discrete/ref0/raw_sum_0/seed12"])] == [12]


@pytest.mark.parametrize(
    "command",
    [
        "python -m snakemake --target-jobs 'train_zfree:' --allowed-rules train_zfree",
        "python -m snakemake --target-jobs 'train_run:family=discrete,term=raw,mode=sum,alpha=0'",
        "python -m snakemake --target-jobs 'train_run:family=discrete,term=raw,mode=Sum,alpha=0,chunk=0-0'",
        "python -m snakemake --target-jobs 'train_run:family=discrete,term=raw,mode=sum,alpha=0,seed=0'",
    ],
)
def test_a_group_command_without_whole_train_run_targets_is_refused(command):
    with pytest.raises(GridError):
        runs_of_slurm_job("rule_train_train_run", command)


@pytest.mark.parametrize(
    "comment",
    [
        "rule_score_records_wildcards_val",
        "rule_train_run_wildcards_a_b",
        "rule_train_run_wildcards_f_dist_Sum_0_0-1",
        "rule_train_run_wildcards_f_dist_sum_0_3-1",
        "rule_train_run_wildcards_f_dist_sum_0_1",
        "rule_train_run_wildcards_f_0_dist_sum_0__c0.1_0-1",
        "rule_train_run_wildcards_f_0_dist_sum_0__b0.10_0-1",
    ],
)
def test_foreign_comments_are_refused(comment):
    with pytest.raises(GridError):
        parse_job_comment(comment)


def test_a_group_commands_chunks_on_and_off_a_beta_axis_are_recovered():
    """snakemake writes an empty wildcard as `at_beta=` in --target-jobs: a chunk off an axis; `at_beta=_b0.05` on one."""
    command = (
        "python -m snakemake --target-jobs 'train_run:family=f,reference=0,term=raw,mode=sum,alpha=0,at_beta=_b0.05,chunk=0-1' "
        "'train_run:family=f,reference=0,term=raw,mode=mean,alpha=0,at_beta=,chunk=2-2' --allowed-rules train_run"
    )
    assert [run_path(**run) for run in runs_of_slurm_job("rule_train_train_run", command)] == [
        "f/ref0/raw_sum_0_b0.05/seed0",
        "f/ref0/raw_sum_0_b0.05/seed1",
        "f/ref0/raw_mean_0/seed2",
    ]
    assert [run["beta"] for run in parse_job_comment("rule_train_run_wildcards_f_0_raw_sum_0__b0.05_0-0")] == [0.05]
