"""The real snakemake CLI on the repository's Snakefile."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, timeout=300):
    return subprocess.run([*SNAKEMAKE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def write_config(tmp_path, **overrides):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for dotted, value in overrides.items():
        section, key = dotted.split(".")
        config[section][key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_lint_is_clean():
    run = snakemake("--lint")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Congratulations" in run.stdout + run.stderr


def test_dry_run_builds_one_reference_per_mode(tmp_path):
    run = snakemake("-n", "--config", f"results={tmp_path}")
    assert run.returncode == 0, run.stderr
    table = {line.split()[0]: int(line.split()[1]) for line in run.stdout.splitlines() if line.strip() and line.split()[-1].isdigit()}
    assert table["reference_scale"] == 2 and table["score_records"] == 2 and table["train_zfree"] == 1


@pytest.mark.parametrize(
    "override, message",
    [
        ({"reference.modes": ["Sum"]}, "'Sum' is not one of ['mean', 'sum']"),
        ({"data.length_overlap": 1.5}, "1.5 is greater than the maximum of 1"),
        ({"zfree.steps": 0}, "0 is less than the minimum of 1"),
        ({"data.min_size": 6}, "data.min_size (6) must be <= data.max_size (5)"),
    ],
)
def test_bad_config_fails_at_parse_time_naming_the_field(tmp_path, override, message):
    run = snakemake("-n", "--configfile", str(write_config(tmp_path, **override)), "--config", f"results={tmp_path / 'results'}")
    assert run.returncode != 0
    assert message in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_default_pipeline_runs_and_rerun_is_a_no_op(tmp_path):
    run = snakemake("--cores", "2", "--config", f"results={tmp_path}", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    references = {mode: json.loads((tmp_path / "reference" / f"{mode}.json").read_text()) for mode in ("mean", "sum")}
    assert references["mean"]["mode"] == "mean" and references["sum"]["mode"] == "sum"
    assert references["mean"]["scores_sha256"] == references["sum"]["scores_sha256"]
    assert references["sum"]["c_base"] > references["mean"]["c_base"] * references["mean"]["token_count"]["min"]
    zfree = json.loads((tmp_path / "zfree" / "model.json").read_text())
    assert zfree["val_nll_per_token"] < 0.5 * zfree["uniform_nll_per_token"]
    for rule in ("synthetic_sequences", "train_zfree"):
        assert (tmp_path / "benchmarks" / f"{rule}.tsv").is_file()
    again = snakemake("--cores", "2", "--config", f"results={tmp_path}")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
