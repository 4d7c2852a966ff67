"""Template recovery: every pilot run's parameters come back from what Slurm and Snakemake record."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake_executor_plugin_slurm.utils import get_job_wildcards

from experiments.synthetic_sequences.disentangled.grid import GridError, parse_job_comment, parse_run_path

ROOT = Path(__file__).resolve().parents[1]


def dry_run_train_jobs(configfile, results):
    """(wildcard values in the job's own order, run directory) of every train_run job of a forced dry run."""
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forceall", "--configfile", configfile, "--config", f"results={results}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    jobs, rule, output = [], None, None
    for line in run.stdout.splitlines():
        stripped = line.strip()
        if line.startswith(("rule ", "localrule ")):
            rule = stripped.split()[-1].rstrip(":")
        elif stripped.startswith("output:"):
            output = stripped.split(":", 1)[1].split(",")[0].strip()
        elif stripped.startswith("wildcards:") and rule == "train_run":
            values = [item.split("=", 1)[1] for item in stripped.split(":", 1)[1].split(", ")]
            jobs.append((values, str(Path(output).parent)))
    return jobs


@pytest.mark.parametrize("configfile", ["config/pilot.yaml", "config/config.yaml"])
def test_every_run_is_recovered_from_its_job_comment_log_path_and_run_directory(configfile, tmp_path):
    jobs = dry_run_train_jobs(configfile, tmp_path)
    assert len(jobs) == (60 if "pilot" in configfile else 12)
    for values, run_dir in jobs:
        wildcard_str = get_job_wildcards(SimpleNamespace(wildcards=values))  # the plugin's own function
        comment = f"rule_train_run_wildcards_{wildcard_str}"
        log_dir = f".snakemake/slurm_logs/rule_train_run/{wildcard_str}"
        from_comment = parse_job_comment(comment)
        assert from_comment == parse_job_comment(f"rule_train_run_wildcards_{Path(log_dir).name}")
        assert from_comment == parse_run_path(run_dir)
        assert from_comment["mode"] in ("mean", "sum") and from_comment["mode"] in comment


@pytest.mark.parametrize(
    "comment", ["rule_score_records_wildcards_val", "rule_train_run_wildcards_a_b", "rule_train_run_wildcards_f_dist_Sum_0_1"]
)
def test_foreign_comments_are_refused(comment):
    with pytest.raises(GridError):
        parse_job_comment(comment)
