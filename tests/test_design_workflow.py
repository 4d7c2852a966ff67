"""A sequential design end to end at tiny settings: the looks run as checkpoints, each look trains only the arms its
predecessor left open, the tables read the runs trained and the verdict states the design.

At 10 steps no run takes the latent up, so every arm reads 0 of n and the decisions follow from n alone: 0 of n
against 0 of n is "equivalent" once Newcombe's interval at the look's level fits inside +-0.3, which at 9 runs per
arm and Pocock's 0.031 it does (+-0.279), and at 2 runs it does not.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from test_workflow import snakemake

SETTINGS = {"steps": 10, "eval_every": 5, "eval_prompts_per_code": 2}
TINY = {
    "data": {"n_train": 200, "n_val": 60, "n_test": 60},
    "references": 1,
    "zfree": {"steps": 30},
    "families": {
        "discrete": {"settings": SETTINGS},
        "discrete-scale": {"settings": SETTINGS},
        "discrete-balance": None,
    },
}


def design_config(folder, looks, spending, seeds_per_job, removed=()):
    """A tiny config of one reference block whose looks have `looks` seeds each; returns its path."""
    config = {
        **TINY,
        "families": {**TINY["families"], **dict.fromkeys(removed)},
        "seeds": looks[-1],
        "seeds_per_job": seeds_per_job,
        "design": {
            "kind": "sequential",
            "looks": [{"references": 1, "seeds": s} for s in looks],
            "alpha_spending": spending,
            "max_runs_per_arm": looks[-1],
        },
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_design(folder, looks, spending, seeds_per_job, removed=()):
    path = design_config(folder, looks, spending, seeds_per_job, removed)
    return path, snakemake("--cores", "2", "--configfile", str(path), "--config", f"results={folder / 'results'}", timeout=900)


def trained_runs(results):
    return sorted(str(path.parent.relative_to(results / "runs")) for path in (results / "runs").rglob("metadata.json"))


@pytest.fixture(scope="module")
def two_looks(tmp_path_factory):
    """Mean, sum and scale; looks at 2 and 4 seeds: nothing is decided at look 1, so look 2 trains every arm."""
    folder = tmp_path_factory.mktemp("two_looks")
    config, run = run_design(folder, [2, 4], "obrien-fleming", 2)
    assert run.returncode == 0, run.stderr[-4000:]
    return config, folder / "results"


def test_each_look_reads_the_runs_its_predecessor_left_open_and_the_tables_read_them_all(two_looks):
    _, results = two_looks
    first, second = (json.loads((results / "design" / f"look{k}.json").read_text()) for k in (1, 2))
    (group,) = first["groups"]
    assert {name: d["decision"] for name, d in group["decisions"].items()} == dict.fromkeys(
        ["sum-mean", "scale-mean", "sum-scale"], "continue"
    )
    assert sorted(group["train_next"]) == ["mean", "scale", "sum"]
    assert len(first["runs_read"]) == 3 * 2 and len(second["runs_read"]) == 3 * 4
    assert second["previous_sha256"] == first["sha256"]
    assert {d["decision"] for d in second["groups"][0]["decisions"].values()} == {"undecided"}
    assert trained_runs(results) == sorted(second["runs_read"])
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    assert len(runs) == 12
    verdict = (results / "tables" / "verdict.md").read_text()
    assert "## Sequential design" in verdict and "2 of 2 looks done, obrien-fleming alpha spending" in verdict
    assert "undecided at 4 runs per arm" in verdict
    assert "The sequential design above set the runs; its decisions stand." in verdict
    assert "--config seeds=" not in verdict


def test_a_rerun_has_nothing_to_do_and_a_look_edited_by_hand_is_refused(two_looks):
    config, results = two_looks
    rerun = snakemake("-n", "--configfile", str(config), "--config", f"results={results}")
    assert rerun.returncode == 0 and "Nothing to be done" in rerun.stdout + rerun.stderr, rerun.stdout[-2000:]
    look = results / "design" / "look1.json"
    document = json.loads(look.read_text())
    document["groups"][0]["train_next"] = ["sum"]
    look.write_text(json.dumps(document))
    refused = snakemake("-n", "--configfile", str(config), "--config", f"results={results}")
    assert refused.returncode != 0
    assert "look1.json: its content does not match its sha256 (edited by hand?)" in refused.stdout + refused.stderr
    assert "InputFunctionException" not in refused.stdout + refused.stderr  # refused as the Snakefile is parsed


def test_a_look_that_decides_every_contrast_ends_the_design(tmp_path):
    """Mean and sum, 9 then 18 seeds in lockstep chunks of 9, Pocock: look 1 reads equivalent, and look 2 never trains."""
    _, run = run_design(tmp_path, [9, 18], "pocock", 9, removed=["discrete-scale"])
    assert run.returncode == 0, run.stderr[-4000:]
    results = tmp_path / "results"
    first = json.loads((results / "design" / "look1.json").read_text())
    assert first["groups"][0]["decisions"]["sum-mean"]["decision"] == "equivalent"
    assert first["groups"][0]["train_next"] == []
    assert not (results / "design" / "look2.json").exists()
    assert len(trained_runs(results)) == 18 and all(run.endswith(tuple(f"seed{s}" for s in range(9))) for run in trained_runs(results))
    assert len(pd.read_parquet(results / "tables" / "runs.parquet")) == 18
    assert "1 of 2 looks done, pocock alpha spending" in (results / "tables" / "verdict.md").read_text()
