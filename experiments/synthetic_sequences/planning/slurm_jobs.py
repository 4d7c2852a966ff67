"""Slurm as this pipeline meets it: which runs a job trains, read back from what Slurm shows of it (the job's
comment or its command), and whether a Slurm client here has no controller to talk to.

A training job trains one chunk of an arm's seeds (chunks.py). snakemake-executor-plugin-slurm sets its comment to
rule_<rule>_wildcards_<values joined by '_'>; a group job (the profile packs several chunks into one) gets
rule_<group>_<rules>, and its chunks are named only in the command it was submitted with, as snakemake's
--target-jobs entries. A chunk's name covers a range of seed values; given the grid's run paths, only the runs of
the grid are returned.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from argparse import ArgumentTypeError
from collections.abc import Iterable

from core.disentanglement.cli import parse_pairs
from experiments.synthetic_sequences.planning.chunks import chunk_seed_range
from experiments.synthetic_sequences.run_layout import RUN_TEMPLATE, GridError, parse_run_path

CHUNK_WILDCARDS = ("family", "reference", "term", "mode", "alpha", "at_beta", "chunk")  # in the order of CHUNK_TEMPLATE
TARGET_JOB = re.compile(r"train_run:([^\s'\"]*)")
# the values joined by '_': none holds one but at_beta, which is '' off a beta axis and '_b<beta>' on one (a job
# submitted before beta axes has no at_beta value)
COMMENT_VALUES = re.compile(r"^([^_]+)_([^_]+)_([^_]+)_([^_]+)_([^_]+)(?:_((?:_b[^_]+)?))?_([^_]+)$")


def parse_job_comment(comment: str, grid: Iterable[str] | None = None) -> list[dict]:
    """The runs of a train_run job from what snakemake-executor-plugin-slurm records for it.

    The plugin sets each job's comment to rule_<rule>_wildcards_<values joined by '_'> and logs to
    .snakemake/slurm_logs/rule_<rule>/<the same values>/<jobid>.log. No wildcard value of a chunk but at_beta holds
    an underscore, and at_beta is '' or '_b<beta>' (COMMENT_VALUES), so the seven values split back apart.
    """
    prefix = "rule_train_run_wildcards_"
    if not comment.startswith(prefix):
        raise GridError(f"job comment {comment!r} is not a train_run job's ({prefix}...)")
    values = COMMENT_VALUES.match(comment[len(prefix) :])
    if values is None:
        raise GridError(f"job comment {comment!r} does not hold family_reference_term_mode_alpha_[_b<beta>]_chunk")
    return runs_of_chunk(dict(zip(CHUNK_WILDCARDS, values.groups(""), strict=True)), grid)


def runs_of_chunk(values: dict[str, str], grid: Iterable[str] | None = None) -> list[dict]:
    """A chunk's wildcard values as Slurm shows them -> its runs' parameters, each checked as a run path is; with
    `grid` (run paths), those of the grid only."""
    runs = [parse_run_path(RUN_TEMPLATE.format(**values, seed=seed)) for seed in chunk_seed_range(values["chunk"])]
    if grid is None:
        return runs
    known = {tuple(parse_run_path(path).values()) for path in grid}
    return [run for run in runs if tuple(run.values()) in known]


def runs_of_slurm_job(comment: str, command: str = "", grid: Iterable[str] | None = None) -> list[dict]:
    """Every run a Slurm training job trains, with its parameters, from what Slurm shows of the job.

    A job of one chunk: its comment, rule_train_run_wildcards_<family_reference_term_mode_alpha_at-beta_chunk> (parse_job_comment).
    A group job (comment rule_<group>_train_run; the profile packs chunks so) holds several chunks, named in the
    command it was submitted with as snakemake's `--target-jobs 'train_run:family=...,reference=...,term=...,mode=...,
    alpha=...,at_beta=...,chunk=...'`: pass that command, from `sacct -j <id> -P -n -o SubmitLine` or, on a cluster
    without accounting, `scontrol write batch_script <id> -`. Pass the grid's run paths (`grid`, e.g. the keys of
    results/grid.json's runs) to leave out the seed values of a chunk's range that the grid does not train.
    """
    grid = None if grid is None else list(grid)
    if comment.startswith("rule_train_run_wildcards_"):
        return parse_job_comment(comment, grid)
    runs = [run for target in TARGET_JOB.findall(command) for run in parse_target_job(target, grid)]
    if not runs:
        raise GridError(f"job {comment!r}: its command names no train_run target job (--target-jobs train_run:...)")
    return runs


def parse_target_job(wildcards: str, grid: Iterable[str] | None = None) -> list[dict]:
    """'family=f,reference=r,term=t,mode=m,alpha=a,at_beta=,chunk=c' (one --target-jobs entry of train_run) -> its runs'
    parameters; at_beta alone may be empty (off a beta axis)."""
    try:
        values = parse_pairs(wildcards.replace("at_beta=,", "").removesuffix(",at_beta="), str, what="wildcard=value")
    except ArgumentTypeError as err:
        raise GridError(f"target job train_run:{wildcards}: {err}") from err
    values.setdefault("at_beta", "")
    if sorted(values) != sorted(CHUNK_WILDCARDS):
        raise GridError(f"target job train_run:{wildcards} does not name exactly {', '.join(CHUNK_WILDCARDS)}")
    return runs_of_chunk(values, grid)


def slurm_client_without_controller() -> bool:
    """Slurm's client installed but no controller answering: every snakemake start then waits in the slurm plugin (bench/README.md)."""
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, timeout=15).returncode != 0
    except (OSError, subprocess.TimeoutExpired):
        return True
