"""A sequential design end to end at tiny settings: the looks run as checkpoints, each look trains only the arms its
predecessor left open, the tables read the runs trained and the verdict states the design.

At 10 steps no run takes the latent up, so every arm reads 0 of n and the decisions follow from n alone: 0 of n
against 0 of n is "equivalent" once Newcombe's interval at the look's level fits inside +-0.3, which at 9 runs per
arm and Pocock's 0.031 it does (+-0.279), and at 4 or 8 runs at a third of it it does not.

The look files are checked against what they claim (a resealed edit, another experiment's file, a deleted look or
design folder, a forced look), the design is fixed by the first look, and a second run on the results folder is
refused while the first holds it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from test_plan import load, load_files
from test_workflow import ROOT, SNAKEMAKE, snakemake

from core.disentanglement.artifacts import sha256_json
from experiments.synthetic_sequences.analysis.records.metrics_files import write_metrics
from experiments.synthetic_sequences.planning.pilot_command import SLURM, PilotCommand
from experiments.synthetic_sequences.planning.results_lock import identity
from experiments.synthetic_sequences.run_layout import GridError, metrics_path
from experiments.synthetic_sequences.sequential.design import DesignError
from experiments.synthetic_sequences.sequential.stage import TRAIN_GROUP, check_design_packing

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


def design_config(folder, looks, spending, seeds_per_job, removed=(), maximum=None):
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
            "max_runs_per_arm": maximum or looks[-1],
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


LOOKS, SPENDING, PER_JOB = [4, 8], "pocock", 4


@pytest.fixture(scope="module")
def two_looks(tmp_path_factory):
    """Mean, sum and scale; Pocock looks at 4 and 8 seeds: nothing is decided at look 1, so look 2 trains every arm.
    (At 2 seeds, as before, Boschloo's smallest p, 0.125, could not reach any look's alpha: refused at parse time.)"""
    folder = tmp_path_factory.mktemp("two_looks")
    config, run = run_design(folder, LOOKS, SPENDING, PER_JOB)
    assert run.returncode == 0, run.stderr[-4000:]
    return config, folder / "results"


@pytest.fixture
def copied(two_looks, tmp_path):
    """A copy of the finished design's results and its config, to change without touching the module's."""
    config, results = two_looks
    shutil.copytree(results, tmp_path / "results")
    return config, tmp_path / "results"


def rerun(config, results, *args):
    return snakemake("--cores", "2", "--configfile", str(config), "--config", f"results={results}", *args, timeout=600)


def lines(run):
    return run.stdout + run.stderr


def look(results, k):
    return json.loads((results / "design" / f"look{k}.json").read_text())


def reseal(path, change):
    document = json.loads(path.read_text())
    document.pop("sha256")
    change(document)
    path.write_text(json.dumps({**document, "sha256": sha256_json(document)}))


def without_time(document):
    """A look's content apart from when it was computed (and the seals that the time enters)."""
    return {key: value for key, value in document.items() if key not in ("computed_at", "sha256", "previous_sha256")}


def test_each_look_reads_the_runs_its_predecessor_left_open_and_the_tables_read_them_all(two_looks):
    _, results = two_looks
    first, second = (json.loads((results / "design" / f"look{k}.json").read_text()) for k in (1, 2))
    (group,) = first["groups"]
    assert {name: d["decision"] for name, d in group["decisions"].items()} == dict.fromkeys(
        ["sum-mean", "scale-mean", "sum-scale"], "continue"
    )
    assert sorted(group["train_next"]) == ["mean", "scale", "sum"]
    assert len(first["runs_read"]) == 3 * 4 and len(second["runs_read"]) == 3 * 8
    assert second["previous_sha256"] == first["sha256"]
    assert {d["decision"] for d in second["groups"][0]["decisions"].values()} == {"undecided"}
    assert trained_runs(results) == sorted(second["runs_read"])
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    assert len(runs) == 24
    verdict = (results / "tables" / "verdict.md").read_text()
    assert "## Sequential design" in verdict and "2 of 2 looks done, pocock alpha spending" in verdict
    assert "undecided at 8 runs per arm" in verdict
    assert "at most 0.05 (union bound)" in verdict and "not simultaneously" in verdict
    assert "An earlier design was read first" not in verdict
    assert json.loads((results / "design.json").read_text())["designs"][0]["design"] == first["design"]
    assert "The sequential design above set the runs; its decisions stand." in verdict
    assert "--config seeds=" not in verdict


def test_a_rerun_has_nothing_to_do_and_a_look_edited_by_hand_is_refused(copied):
    config, results = copied
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


@pytest.mark.slow  # 18 runs of its own, about 2 minutes: the default run's design e2e is the two_looks fixture's
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


def test_a_resealed_look_that_does_not_follow_from_its_runs_is_refused(copied):
    """The case the issue tried: sum - mean 'raises' with a made-up p and interval, nothing left to train, resealed."""
    config, results = copied

    def forge(document):
        decision = document["groups"][0]["decisions"]["sum-mean"]
        decision.update(decision="raises", p=0.0001, ci_low=0.5, ci_high=1.0)
        document["groups"][0]["train_next"] = []

    reseal(results / "design" / "look1.json", forge)
    refused = rerun(config, results, "-n")
    assert refused.returncode != 0
    assert "look1.json: discrete raw alpha=0 sum-mean: decision 'raises' in the file, 'continue' from its runs" in lines(refused)


def test_a_look_file_of_another_experiment_is_refused(copied):
    """Another experiment's look 1 under the same design names the same run paths, but its metrics are other files:
    here their sha256, as another data seed's runs would hash."""
    config, results = copied
    reseal(results / "design" / "look1.json", lambda d: d["runs_read"].update({run: "0" * 64 for run in d["runs_read"]}))
    refused = rerun(config, results, "-n")
    assert refused.returncode != 0
    assert "but the look read 000000000000: the look was made from other runs" in lines(refused)


@pytest.mark.parametrize("deleted", ["design/look1.json", pytest.param("design", marks=pytest.mark.slow)])
def test_a_deleted_look_is_recomputed_with_the_looks_after_it_and_the_tables(copied, deleted):
    config, results = copied
    before = [look(results, k) for k in (1, 2)]
    verdict_time = (results / "tables" / "verdict.md").stat().st_mtime_ns
    shutil.rmtree(results / deleted) if deleted == "design" else (results / deleted).unlink()
    run = rerun(config, results)
    assert run.returncode == 0, lines(run)[-3000:]
    after = [look(results, k) for k in (1, 2)]
    assert [without_time(d) for d in after] == [without_time(d) for d in before]
    assert all(a["computed_at"] != b["computed_at"] for a, b in zip(after, before, strict=True))  # both recomputed
    assert after[1]["previous_sha256"] == after[0]["sha256"]
    assert (results / "tables" / "verdict.md").stat().st_mtime_ns > verdict_time
    assert "Nothing to be done" in lines(rerun(config, results, "-n"))


def test_a_look_recomputed_after_metrics_files_were_edited_reads_the_runs_not_the_edits(copied):
    """The case the issue tried: took_up set to 1 in four sum runs' metrics files after the looks; the refusal's
    advice (delete the looks, rerun) recomputes them from the runs themselves, which refuse the edited files with the
    command that re-extracts them; following it gives back the looks of the runs."""
    config, results = copied
    before = [without_time(look(results, k)) for k in (1, 2)]
    edited = [Path(metrics_path(results, f"discrete/ref0/raw_sum_0/seed{seed}")) for seed in range(4)]
    for path in edited:
        frame = pd.read_parquet(path)
        frame.loc[frame.metric == "took_up", "value"] = 1.0
        frame.attrs["run_record"] = json.loads(pq.read_schema(path).metadata[b"run_record"])
        write_metrics(frame, path)
    refused = rerun(config, results, "-n")
    assert refused.returncode != 0 and "the look was made from other runs" in lines(refused)
    pilot = f"snakemake --cores 2 --configfile {config} --config results={results}"
    looks = f"{results}/design/look1.json {results}/design/look2.json"
    assert f"recompute it from the runs on disk: rm {looks}; then {pilot}" in lines(refused)
    subprocess.run(["rm", *looks.split()], check=True)  # the advice, word for word
    recomputed = snakemake(*shlex.split(pilot)[1:])
    assert recomputed.returncode != 0
    # the look's refusal, on the console (show-failed-logs) as in its log
    assert "error: 4 metrics files are not what extracting their runs gives today, the first " in lines(recomputed)
    log = (results / "logs" / "design_look" / "look1.log").read_text()
    assert "took_up (run): 1.0 in the file, 0.0 from the run" in log
    advised = f"snakemake --cores 2 tables --forcerun extract_metrics --configfile {config} --config results={results}"
    assert log.rstrip().endswith(f"re-extract without retraining: {advised}")
    followed = snakemake(*shlex.split(advised)[1:])
    assert followed.returncode == 0, lines(followed)[-3000:]
    assert [without_time(look(results, k)) for k in (1, 2)] == before
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    assert len(runs) == 24 and runs.took_up.sum() == 0  # at 10 steps no run takes the latent up (module docstring)


@pytest.mark.slow
def test_a_forced_look_rebuilds_the_tables(copied):
    config, results = copied
    verdict_time = (results / "tables" / "verdict.md").stat().st_mtime_ns
    run = rerun(config, results, "--forcerun", "design_look")
    assert run.returncode == 0, lines(run)[-3000:]
    assert (results / "tables" / "verdict.md").stat().st_mtime_ns > verdict_time
    assert "Nothing to be done" in lines(rerun(config, results, "-n"))


def test_a_design_is_fixed_by_its_first_look_even_after_its_look_files_go(copied, tmp_path):
    config, results = copied
    changed = design_config(tmp_path, LOOKS, SPENDING, PER_JOB, maximum=9)  # the same looks, another max_runs_per_arm
    shutil.rmtree(results / "design")
    refused = rerun(changed, results, "-n")
    assert refused.returncode != 0
    assert "design.json: this results folder's looks were read under pocock spending, looks 1x4, 1x8, at most 8" in lines(refused)
    # the advice, followed word for word: the pilot's own command with design_reset=True (no looks are left to remove)
    advice = lines(refused).split("To start over under the new design anyway (the verdict names the earlier one): ")[1]
    command = shlex.split(advice.split("; or, forgetting")[0])
    assert command == ["snakemake", "--cores", "2", "--configfile", str(changed), "--config", f"results={results}", "design_reset=True"]
    reset = snakemake(*command[1:], timeout=600)
    assert reset.returncode == 0, lines(reset)[-3000:]
    verdict = (results / "tables" / "verdict.md").read_text()
    assert "An earlier design was read first**: pocock spending, looks 1x4, 1x8, at most 8 runs per arm" in verdict
    assert [entry["design"]["max_runs_per_arm"] for entry in json.loads((results / "design.json").read_text())["designs"]] == [8, 9]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("references=[0,1]", "references: ['0', '1'] holds text ('0'), not whole numbers: snakemake's --config reads"),
        ("seeds=[0,1]", "seeds: ['0', '1'] holds text ('0')"),
        ("design_reset=true", "design_reset: 'true' is text; write design_reset=True"),
    ],
)
def test_a_bad_list_from_the_command_line_is_refused_in_one_line(two_looks, override, message):
    config, results = two_looks
    refused = snakemake("-n", "--configfile", str(config), "--config", f"results={results}", override)
    assert refused.returncode != 0 and message in lines(refused)
    assert "is not valid under any of the given schemas" not in lines(refused)  # no schema dump


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("references", [0, 0], "references: [0, 0] repeats 0; each z-free seed may appear once"),
        ("references", [-1, 2], "references: -1 in [-1, 2] is outside 0..1000"),
        ("references", [5000], "references: 5000 in [5000] is outside 0..1000"),
        ("seeds", [3, 3, 4], "seeds: [3, 3, 4] repeats 3; each seed may appear once"),
        ("seeds", 0, "seeds: 0 is not a count from 1 to 1048576"),
    ],
)
def test_a_bad_list_in_a_config_file_is_refused_in_one_line(tmp_path, key, value, message):
    with pytest.raises(ValueError) as refused:  # the message is the check
        load(tmp_path, {key: value})
    assert message in str(refused.value)
    assert "is not valid under any of the given schemas" not in str(refused.value)


def test_a_look_that_can_decide_nothing_is_refused_before_any_job(tmp_path):
    path = design_config(tmp_path, [2, 1000], "obrien-fleming", 1)
    with pytest.raises(DesignError) as refused:
        load_files(tmp_path, [str(path)])
    assert "design.looks[0]: look 1 spends alpha" in str(refused.value)
    assert "it would train its runs and decide nothing" in str(refused.value)
    assert not (tmp_path / "results").exists()


def test_a_profile_that_packs_a_designs_training_jobs_is_refused_before_any_job(tmp_path):
    """A design's looks are checkpoints, after which snakemake 9 packs group jobs again and submits a chunk twice. The
    shipped profile packs group `train`, which a design's training rule is not in; a profile that puts train_run in a
    group of its own is refused, with the shipped profile's command for this pilot."""
    path = design_config(tmp_path, LOOKS, SPENDING, PER_JOB)
    settings = f"results={tmp_path / 'results'}"
    packed = ("--cores", "1", "--groups", "train_run=mine", "--group-components", "mine=2")
    refused = snakemake(*packed, "--configfile", str(path), "--config", settings)
    assert refused.returncode != 0
    line = next(line for line in lines(refused).splitlines() if "group-components mine=2:" in line)
    assert "your profile packs train_run (groups: train_run=mine), and a sequential design (design.kind: sequential)" in line
    assert line.endswith(PilotCommand((str(path),), (settings,)).command(runner=SLURM))
    assert not (tmp_path / "results").exists()


def test_the_packing_check_refuses_only_a_group_of_train_run_packed_over_one():
    check_design_packing("curve", {}, {TRAIN_GROUP: 2})  # the shipped profile: the design's training rule has no group
    check_design_packing("curve", {"train_run": "mine"}, {"mine": 1})
    check_design_packing("curve", {"other_rule": "mine"}, {"mine": 4})
    with pytest.raises(
        GridError, match=r"^group-components mine=3: .* a curve design \(design.kind: curve\) .* snakemake --profile slurm$"
    ):
        check_design_packing("curve", {"train_run": "mine"}, {"mine": 3})


def test_a_results_folder_another_live_run_holds_is_refused(two_looks, tmp_path):
    """The lock lies in the results folder, so it holds across working directories and --nolock; a dry run writes
    nothing and is not held back by it."""
    config, results = two_looks
    arguments = ["--nolock", "--configfile", str(config), "--config", f"results={results}"]
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {**identity(holder.pid), "started": "2026-12-03T00:00:00+00:00"}
        (results / ".snakemake-run.lock").write_text(json.dumps(lock))
        refused = snakemake("--cores", "1", *arguments)
        assert refused.returncode != 0
        assert f"is in use by another snakemake run (pid {holder.pid} on {socket.gethostname()}" in lines(refused)
        dry = snakemake("-n", *arguments)
        assert dry.returncode == 0 and "Nothing to be done" in lines(dry), lines(dry)[-2000:]
    finally:
        holder.kill()
        holder.wait()
    freed = snakemake("--cores", "1", *arguments)  # its process is gone
    assert freed.returncode == 0 and "Nothing to be done" in lines(freed), lines(freed)[-2000:]
    (results / ".snakemake-run.lock").unlink()  # with nothing to do, snakemake never starts, so never takes it over


def test_a_finished_run_leaves_no_lock(two_looks):
    _, results = two_looks
    assert not (results / ".snakemake-run.lock").exists()


@pytest.mark.slow
def test_a_design_killed_during_its_second_look_s_training_ends_as_an_uninterrupted_one(two_looks, tmp_path):
    """SIGKILL to snakemake and its jobs once look 2's first training job has started; then --unlock and a rerun with
    --rerun-incomplete. The look files (apart from when they were computed) and the runs table are the uninterrupted
    design's."""
    _, reference = two_looks
    config = design_config(tmp_path, LOOKS, SPENDING, PER_JOB)
    results = tmp_path / "results"
    arguments = ["--cores", "2", "--configfile", str(config), "--config", f"results={results}"]
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    first = subprocess.Popen(
        [*SNAKEMAKE, *arguments], cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600
    while not list((results / "logs" / "train_run").rglob("seeds4-7.log")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert (results / "design" / "look1.json").exists() and not (results / "design" / "look2.json").exists()
    assert snakemake("--unlock", *arguments).returncode == 0
    run = snakemake(*arguments, "--rerun-incomplete", timeout=900)
    assert run.returncode == 0, lines(run)[-3000:]
    # the runs' metrics files name their own results folder, so their sha256 differ between the two folders
    same = [{**without_time(look(results, k)), "runs_read": sorted(look(results, k)["runs_read"])} for k in (1, 2)]
    assert same == [{**without_time(look(reference, k)), "runs_read": sorted(look(reference, k)["runs_read"])} for k in (1, 2)]
    runs, uninterrupted = (pd.read_parquet(folder / "tables" / "runs.parquet") for folder in (results, reference))
    pd.testing.assert_frame_equal(runs, uninterrupted)
