"""Slurm as this pipeline meets it: which runs a job trains, read back from what Slurm shows of it (the job's
comment or its command), and whether a Slurm client here has no controller to talk to.

snakemake-executor-plugin-slurm sets a job's comment to rule_<rule>_wildcards_<values joined by '_'>; a group job
(the profile packs several runs into one) gets rule_<group>_<rules>, and its runs are named only in the command it
was submitted with, as snakemake's --target-jobs entries.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from argparse import ArgumentTypeError

from core.disentanglement.cli import parse_pairs
from experiments.synthetic_sequences.disentangled.grid import GridError, parse_run_path


def parse_job_comment(comment: str) -> dict:
    """A train_run job's parameters from what snakemake-executor-plugin-slurm records for it.

    The plugin sets each job's comment to rule_<rule>_wildcards_<values joined by '_'> and logs to
    .snakemake/slurm_logs/rule_<rule>/<the same values>/<jobid>.log. No wildcard value of a run
    holds an underscore, so the five values split back apart.
    """
    prefix = "rule_train_run_wildcards_"
    if not comment.startswith(prefix):
        raise GridError(f"job comment {comment!r} is not a train_run job's ({prefix}...)")
    values = comment[len(prefix) :].split("_")
    if len(values) != 5 or not values[4].isdigit():
        raise GridError(f"job comment {comment!r} does not hold family_term_mode_alpha_seed")
    return run_parameters(dict(zip(RUN_WILDCARDS, values, strict=True)))


RUN_WILDCARDS = ("family", "term", "mode", "alpha", "seed")
TARGET_JOB = re.compile(r"train_run:([^\s'\"]*)")


def run_parameters(values: dict[str, str]) -> dict:
    """A train_run job's wildcard values as Slurm shows them -> the run's parameters, checked as a run path is."""
    return parse_run_path("{family}/{term}_{mode}_{alpha}/seed{seed}".format(**values))


def runs_of_slurm_job(comment: str, command: str = "") -> list[dict]:
    """Every run a Slurm training job trains, with its parameters, from what Slurm shows of the job.

    A job of one run: its comment, rule_train_run_wildcards_<family_term_mode_alpha_seed> (parse_job_comment).
    A group job (comment rule_<group>_train_run; the profile packs runs so) holds several runs, named in the
    command it was submitted with as snakemake's `--target-jobs 'train_run:family=...,term=...,mode=...,
    alpha=...,seed=...'`: pass that command, from `sacct -j <id> -P -n -o SubmitLine` or, on a cluster
    without accounting, `scontrol write batch_script <id> -`.
    """
    if comment.startswith("rule_train_run_wildcards_"):
        return [parse_job_comment(comment)]
    runs = [parse_target_job(target) for target in TARGET_JOB.findall(command)]
    if not runs:
        raise GridError(f"job {comment!r}: its command names no train_run target job (--target-jobs train_run:...)")
    return runs


def parse_target_job(wildcards: str) -> dict:
    """'family=f,term=t,mode=m,alpha=a,seed=s' (one --target-jobs entry of train_run) -> the run's parameters."""
    try:
        values = parse_pairs(wildcards, str, what="wildcard=value")
    except ArgumentTypeError as err:
        raise GridError(f"target job train_run:{wildcards}: {err}") from err
    if sorted(values) != sorted(RUN_WILDCARDS):
        raise GridError(f"target job train_run:{wildcards} does not name exactly {', '.join(RUN_WILDCARDS)}")
    return run_parameters(values)


def slurm_client_without_controller() -> bool:
    """Slurm's client installed but no controller answering: every snakemake start then waits ~10 s in the slurm plugin."""
    if shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, timeout=15).returncode != 0
    except (OSError, subprocess.TimeoutExpired):
        return True
