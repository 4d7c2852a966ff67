"""The real snakemake CLI on the repository's Snakefile."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from report_checks import check_report
from test_plan import overridden

from core.disentanglement.scores import read_scores
from experiments.synthetic_sequences.analysis.records.metrics_files import write_metrics
from experiments.synthetic_sequences.planning.bindings import GRID_FOLDER
from experiments.synthetic_sequences.planning.plan_tables import TABLES
from experiments.synthetic_sequences.planning.slurm_jobs import slurm_client_without_controller
from experiments.synthetic_sequences.run_layout import chunk_name, metrics_path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, timeout=300):
    # the rules call `python`: make it this interpreter, as an activated environment would
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # Test workers run snakemake side by side in this one working directory, each on a results folder of its own.
    # Snakemake's working-directory lock races between them (one lists a lock file another is removing:
    # FileNotFoundError .snakemake/locks/0.input.lock); the pipeline's own results lock still holds each folder.
    unlocked = () if "--unlock" in args else ("--nolock",)
    return subprocess.run([*SNAKEMAKE, *unlocked, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def write_config(tmp_path, overrides):
    """config.yaml with values replaced at (key, key, ..., index) paths (test_plan.overridden)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(overridden(overrides)))
    return path


def test_lint_is_clean():
    run = snakemake("--lint")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Congratulations" in run.stdout + run.stderr


def dry_run_jobs(*args):
    """(rule, inputs, outputs, shell command) of every job a forced dry run would execute."""
    run = snakemake("-n", "--forceall", "--printshellcmds", *args)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    jobs, current = [], None
    for line in run.stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith(("rule ", "localrule ")):  # a training job is a member of group job `train` (indented)
            current = {"rule": stripped.split()[-1].rstrip(":"), "input": [], "output": [], "shell": ""}
            jobs.append(current)
        elif current is not None and stripped.startswith(("input:", "output:")):
            key, _, files = stripped.partition(":")
            current[key] = [f.strip() for f in files.split(",")]
        elif current is not None and stripped.startswith("Shell command:"):
            current["shell"] = stripped.removeprefix("Shell command:").strip()
    return jobs


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/pilot.yaml", "config/note.yaml"])
def test_dry_run_wires_every_run_to_the_reference_of_its_own_mode(tmp_path, configfile):
    jobs = dry_run_jobs("--configfile", configfile, "--config", f"results={tmp_path}")
    trainings = [job for job in jobs if job["rule"] == "train_run"]
    assert trainings
    for job in trainings:
        block, key = job["output"][0].split("/")[-3:-1]  # runs/{family}/ref{r}/{term}_{mode}_{alpha}/seeds{chunk}.json
        references = [path for path in job["input"] if "/reference/" in path]
        assert references == [f"{tmp_path}/reference/{block}/{key.split('_')[1]}.json"]
    modes = {job["output"][0].rsplit("/", 1)[-1] for job in jobs if job["rule"] == "reference_scale"}
    assert modes == {"mean.json", "sum.json"}


def test_a_dry_run_works_from_another_working_directory(tmp_path):
    """`--directory` elsewhere, with a config/config.yaml there: the schema is read from beside the Snakefile."""
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    run = snakemake("--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "-n", "--quiet")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def test_dry_run_wires_every_job_to_the_artifacts_of_its_own_reference_block(tmp_path):
    """With 2 reference blocks, no job reads another block's z-free model, scores or c_base."""
    (tmp_path / "blocks.yaml").write_text("references: [3, 5]\nseeds: 2\n")
    jobs = dry_run_jobs("--configfile", str(tmp_path / "blocks.yaml"), "--config", f"results={tmp_path}")
    block_of = {"train_zfree": {}, "score_records": {}, "reference_scale": {}, "train_run": {}}
    for job in jobs:
        if job["rule"] not in block_of:
            continue
        (block,) = {part for path in job["output"] for part in path.split("/") if re.fullmatch(r"ref[0-9]+", part)}
        read = {part for path in job["input"] for part in path.split("/") if re.fullmatch(r"ref[0-9]+", part)}
        assert read <= {block}, (job["rule"], job["input"])
        block_of[job["rule"]][job["output"][0]] = block
        if job["rule"] == "train_run":
            checkpoints = [path for path in job["input"] if path.endswith("model.pt")]
            assert checkpoints == [f"{tmp_path}/zfree/{block}/model.pt"]  # the warm start of its own block
            mode = job["output"][0].split("/")[-2].split("_")[1]
            assert {f"{tmp_path}/zfree/{block}/scores/{split}.parquet" for split in ("train", "val")} <= set(job["input"])
            assert [path for path in job["input"] if "/reference/" in path] == [f"{tmp_path}/reference/{block}/{mode}.json"]
            # the trainer seeds of a chunk (both of the arm's seeds here): its block's z-free seed in the high word, then the seed
            seeds = " ".join(str((int(block[3:]) << 20) + seed) for seed in (0, 1))
            assert f"--seed {seeds} --" in job["shell"], job["shell"]  # both seeds, and only they, follow the flag
            assert f"--zfree-seed {int(block[3:])} " in job["shell"]
            assert f"--reconstruction-loss-token-aggregation-mode {mode} " in job["shell"]  # the mode, explicit
    assert set(block_of["train_zfree"].values()) == {"ref3", "ref5"} and len(block_of["train_zfree"]) == 2
    assert len(block_of["train_run"]) == 2 * 4  # one chunk of every arm's 2 seeds in each block
    assert len(block_of["score_records"]) == 4 and len(block_of["reference_scale"]) == 4


def test_an_arms_seeds_train_in_chunks_of_seeds_per_job(tmp_path):
    jobs = dry_run_jobs("--config", f"results={tmp_path}", "references=1", "seeds=12", "seeds_per_job=5")
    chunks = sorted(job["output"][0].removeprefix(f"{tmp_path}/runs/") for job in jobs if job["rule"] == "train_run")
    arms = ["discrete-balance/ref0/raw_sum_0", "discrete-scale/ref0/raw_mean_0", "discrete/ref0/raw_mean_0", "discrete/ref0/raw_sum_0"]
    assert chunks == sorted(f"{arm}/seeds{chunk}.json" for arm in arms for chunk in ("0-4", "5-9", "10-14"))
    extractions = [job for job in jobs if job["rule"] == "extract_metrics"]
    assert len(extractions) == 48
    seed11 = next(job for job in extractions if job["output"][0].endswith("discrete/ref0/raw_sum_0/seed11.parquet"))
    assert seed11["input"] == [f"{tmp_path}/runs/discrete/ref0/raw_sum_0/seeds10-14.json"]


def test_pilot_dry_run_is_fast(tmp_path):
    if slurm_client_without_controller():
        pytest.skip("Slurm's client is installed but no controller answers: the slurm plugin then waits 10 s for scontrol")
    started = time.perf_counter()
    run = snakemake("-n", "--configfile", "config/pilot.yaml", "--config", f"results={tmp_path}")
    assert run.returncode == 0
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize(
    "override, message",
    [
        # one refusal by the schema and one by the plan's cross-field checks: the rest are test_plan.py's, in process
        ({("families", "discrete", "runs", 0, "modes"): ["Sum"]}, "'Sum' is not one of ['mean', 'sum']"),
        ({("families", "discrete", "settings", "n_head"): 3}, "families.discrete: n_head: 3 does not divide d_model 64"),
    ],
)
def test_bad_config_fails_at_parse_time_naming_the_field(tmp_path, override, message):
    run = snakemake("-n", "--configfile", str(write_config(tmp_path, override)), "--config", f"results={tmp_path / 'results'}")
    assert run.returncode != 0
    assert message in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()


def test_a_results_path_with_a_space_reaches_every_command_whole(tmp_path):
    results = tmp_path / "my results"
    config = write_config(tmp_path, {("data", "n_train"): 200, ("data", "n_val"): 50, ("data", "n_test"): 50})
    run = snakemake(f"{results}/data/summary.json", "--cores", "1", "--configfile", str(config), "--config", f"results={results}")
    assert run.returncode == 0, run.stderr[-2000:]
    assert (results / "data" / "train.parquet").is_file() and (results / "logs" / "synthetic_sequences.log").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "my results"]  # no stray file beside it


def test_entangled_run_reference_is_rescored_in_each_mode(tmp_path, trained):
    """An existing run's checkpoint with a saved mean-scale val loss: the saved number is never the reference."""
    checkpoint = torch.load(trained[0] / "model.pt", weights_only=True)
    checkpoint["val_nll_per_token"] = 99.0
    torch.save(checkpoint, tmp_path / "entangled.pt")
    overrides = {
        ("reference", "source"): "entangled",
        ("reference", "checkpoint"): str(tmp_path / "entangled.pt"),
        ("references",): 1,  # one checkpoint, one block
        **{("data", key): value for key, value in {"seed": 0, "n_train": 400, "n_val": 120, "n_test": 60}.items()},
    }
    results = tmp_path / "results"
    targets = [f"{results}/reference/ref0/mean.json", f"{results}/reference/ref0/sum.json"]
    run = snakemake(*targets, "--cores", "2", "--configfile", str(write_config(tmp_path, overrides)), "--config", f"results={results}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "train_zfree" not in jobs_that_ran(run)
    scores = read_scores(results / "zfree" / "ref0" / "scores" / "val.parquet")
    assert scores.metadata["checkpoint"] == str(tmp_path / "entangled.pt")
    per_example = [list(map(float, a)) for a in scores.frame.token_nll]
    mean_ref, sum_ref = (json.loads(Path(t).read_text()) for t in targets)
    assert mean_ref["c_base"] == pytest.approx(np.mean([np.mean(a) for a in per_example]), rel=1e-9)
    assert sum_ref["c_base"] == pytest.approx(np.mean([np.sum(a) for a in per_example]), rel=1e-9)
    assert 99.0 not in (mean_ref["c_base"], sum_ref["c_base"])


# The default pilot at its own settings on 2 of its 5 reference blocks (16 runs): the Slurm test (test_slurm_cluster.py)
# trains all 40, and CI's minutes do not hold both.
PILOT_BLOCKS = "references=2"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The default pilot on PILOT_BLOCKS, run once by the real CLI into a temporary results folder."""
    results = tmp_path_factory.mktemp("results")
    run = snakemake("--cores", "2", "--config", f"results={results}", PILOT_BLOCKS, timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    return results


def jobs_that_ran(run) -> set[str]:
    return {
        line.split("Rule: ")[1].rstrip(")")
        for line in (run.stdout + run.stderr).splitlines()
        if "Finished jobid" in line and "Rule: " in line
    }


@pytest.mark.slow
def test_default_pilot_produces_every_table_and_plot(pipeline):
    for table in TABLES:
        for ext in ("parquet", "csv", "md"):
            assert (pipeline / "tables" / f"{table}.{ext}").stat().st_size > 0
    for plot in ("takeup", "separation", "latent_usage", "mean_vs_sum", "curves", "forest"):
        assert (pipeline / "plots" / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = pd.read_parquet(pipeline / "tables" / "runs.parquet")
    assert len(runs) == 16 and set(runs["mode"]) == {"mean", "sum"}
    assert {"nmi", "mutual_information", "probe_accuracy", "parse_rate", "converged", "recon_rel_change", "mi_change"} <= set(runs.columns)
    assert {"took_up", "onset_step", "onset_observed", "strategy_information", "strategy_information_sort"} <= set(runs.columns)
    assert {"train_tokens_mean", "train_tokens_min", "val_tokens_max", "train_base_aggregate_min", "train_kappa_max"} <= set(runs.columns)
    contrasts = pd.read_parquet(pipeline / "tables" / "mean_vs_sum.parquet")
    for metric in ("took_up", "mutual_information"):
        raw = contrasts[(contrasts.term == "raw") & (contrasts.metric == metric) & (contrasts.subset == "all")].set_index("comparison")
        assert set(raw.index) == {"sum-mean", "scale-mean", "balance-mean", "sum-scale", "sum-balance"}
        assert (raw["n_a"] == 4).all() and np.isfinite(raw[["estimate", "ci_low", "ci_high", "p", "p_adjusted"]].to_numpy()).all()
    verdict = pd.read_parquet(pipeline / "tables" / "verdict.parquet")
    assert list(verdict.endpoint) == ["take-up", "onset", "magnitude", "separation"] and verdict["verdict"].str.len().gt(0).all()
    curves = pd.read_parquet(pipeline / "tables" / "curves.parquet")
    assert curves.groupby(["family", "mode", "seed"]).step.nunique().eq(8).all()  # eight evaluations per run
    for table in TABLES:
        frame = pd.read_parquet(pipeline / "tables" / f"{table}.parquet")
        # nan where nothing is left to resolve, where too few onsets bound a median's interval, or (one reference
        # block) where there is no homogeneity across blocks to test
        empty_columns = set(frame.columns[frame.isna().all(axis=0)]) - {
            "seeds_needed",
            "median_onset_low",
            "median_onset_high",
            "median_onset",  # on an AVX2 machine no arm of the default reaches half take-up (README)
            "p_homogeneity",
        }
        assert not frame.isna().all(axis=1).any() and not empty_columns, table
    confounds = pd.read_parquet(pipeline / "tables" / "confounds.parquet")
    samples = confounds[confounds.diagnostic == "sample_parse_rate"]
    assert set(samples["mode"]) == {"mean", "sum"} and samples.scope.nunique() >= 2
    references = {mode: json.loads((pipeline / "reference" / "ref0" / f"{mode}.json").read_text()) for mode in ("mean", "sum")}
    assert references["mean"]["scores_sha256"] == references["sum"]["scores_sha256"]
    assert references["sum"]["c_base"] > references["mean"]["c_base"] * references["mean"]["token_count"]["min"]
    zfree = json.loads((pipeline / "zfree" / "ref0" / "model.json").read_text())
    assert zfree["val_nll_per_token"] < 0.5 * zfree["uniform_nll_per_token"]
    assert (pipeline / "benchmarks" / "train_zfree" / "ref0.tsv").is_file()


def planned_rules(run) -> dict[str, int]:
    """{rule: jobs} a dry run plans (its job stats table)."""
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    table = run.stdout.partition("Job stats:")[2].partition("total")[0]
    return {words[0]: int(words[1]) for words in map(str.split, table.splitlines()[3:]) if len(words) >= 2 and words[1].isdigit()}


@pytest.mark.slow
def test_settings_written_at_their_default_replan_no_job_on_the_default_pilot(pipeline, tmp_path):
    """Writing out a trainer setting at its default (stop_at_take_up: false, batching: random) in every family adds
    nothing to any job's params (grid.beyond_defaults), so snakemake reruns nothing for it: the dry run plans what a
    config file that sets nothing plans (the tables, which repeat the pilot's command line, and what reads them)."""
    families = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["families"]
    written = {name: {"settings": {"stop_at_take_up": False, "batching": "random"}} for name, spec in families.items() if spec}
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump({}))
    (tmp_path / "defaults.yaml").write_text(yaml.safe_dump({"families": written}))
    plans = {
        name: planned_rules(snakemake("-n", "--configfile", str(tmp_path / name), "--config", f"results={pipeline}", PILOT_BLOCKS))
        for name in ("empty.yaml", "defaults.yaml")
    }
    assert plans["defaults.yaml"] == plans["empty.yaml"] and set(plans["empty.yaml"]) <= {"aggregate_tables", "plots", "all"}


@pytest.mark.slow
def test_report_holds_the_tables_and_plots_with_captions_that_say_how_to_read_them(pipeline, tmp_path):
    run = snakemake("--report", str(tmp_path / "report.zip"), "--config", f"results={pipeline}", PILOT_BLOCKS)
    assert run.returncode == 0, run.stderr[-2000:]
    check_report(tmp_path / "report.zip", pipeline)


@pytest.mark.slow
def test_rerun_is_a_no_op(pipeline):
    again = snakemake("--cores", "2", "--config", f"results={pipeline}", PILOT_BLOCKS)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_table_target_reruns_only_the_table_rules(pipeline):
    before = (pipeline / "runs" / "discrete" / "ref0" / "raw_sum_0" / "seed0" / "eval.json").stat().st_mtime
    run = snakemake("tables", "--cores", "2", "--forcerun", "aggregate_tables", "--config", f"results={pipeline}", PILOT_BLOCKS)
    assert run.returncode == 0, run.stderr[-2000:]
    assert jobs_that_ran(run) == {"aggregate_tables", "plots", "tables"}
    assert (pipeline / "runs" / "discrete" / "ref0" / "raw_sum_0" / "seed0" / "eval.json").stat().st_mtime == before


@pytest.mark.slow
def test_stale_runs_are_refused_without_snakemakes_metadata(pipeline, tmp_path):
    """A copied results folder (snakemake keeps no metadata for it) whose config then asks for other steps: the runs
    are not retrained by snakemake, and the tables refuse them instead of tabulating them."""
    results = tmp_path / "results"
    shutil.copytree(pipeline, results)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["families"]["discrete"]["settings"]["steps"] = 60  # one settings mapping: every family's (a YAML anchor)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**config, "results": str(results), "references": 2}))
    run = snakemake("tables", "--cores", "2", "--configfile", str(tmp_path / "config.yaml"))
    assert run.returncode != 0
    log = (results / "logs" / "aggregate_tables.log").read_text()
    assert "16 run(s) were trained with other settings than the grid gives them (stale)" in log
    assert "optim.steps 400 (grid: 60)" in log
    records = {path: json.loads(path.read_text()) for path in (results / GRID_FOLDER).glob("*.json")}
    assert len(records) == 2  # the pilot's grid and the new one, each named by its content
    assert [r["runs"]["discrete/ref0/raw_sum_0/seed0"]["settings"]["optim.steps"] for r in records.values()].count(60) == 1
    # the advice, followed word for word: each stale run's chunk forced, on this pilot's own config file
    command = shlex.split(log.split("Retrain them: ")[1].splitlines()[0])
    assert command[-2:] == ["--configfile", str(tmp_path / "config.yaml")]
    assert f"{results}/runs/discrete/ref0/raw_sum_0/seeds0-3.json" in command
    retrained = snakemake(*command[1:], timeout=900)
    assert retrained.returncode == 0, retrained.stderr[-3000:]
    assert len(pd.read_parquet(results / "tables" / "runs.parquet")) == 16


@pytest.mark.slow
def test_a_sum_run_forced_onto_a_mean_artifact_is_refused(pipeline, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(pipeline, results, ignore=shutil.ignore_patterns("runs", "metrics", "tables", "plots"))
    shutil.copy(results / "reference" / "ref0" / "mean.json", results / "reference" / "ref0" / "sum.json")
    chunk = f"seeds{chunk_name(0, yaml.safe_load((ROOT / 'config' / 'config.yaml').read_text())['seeds_per_job'])}"  # seed 0's
    run = snakemake(f"{results}/runs/discrete/ref0/raw_sum_0/{chunk}.json", "--cores", "1", "--config", f"results={results}", PILOT_BLOCKS)
    assert run.returncode != 0
    log = (results / "logs" / "train_run" / "discrete" / "ref0" / "raw_sum_0" / f"{chunk}.log").read_text()
    assert "built in mode 'mean' but the run uses mode 'sum'" in log
    assert not (results / "runs" / "discrete" / "ref0" / "raw_sum_0" / "seed0" / "eval.json").exists()


# A continuous family with both controls, raw and the hybrid in both modes, beside a discrete family without controls
# (config.yaml's two control families removed by `null`): every table, plot and verdict line, at tiny settings.
TINY_MIXED = """
data: {n_train: 200, n_val: 60, n_test: 60}
references: 1
zfree: {steps: 30}
seeds: 1
families:
  discrete:
    settings: {steps: 10, eval_every: 5, eval_prompts_per_code: 2}
  discrete-scale: null
  discrete-balance: null
  continuous: &continuous
    model: continuous
    beta: 0.05
    controls: none
    warm_start: true
    settings: &continuous_settings {steps: 10, eval_every: 5, batch_size: 32, latent_dim: 4, eval_prompts_per_code: 2}
    hybrid: {tokcc: 0.5, dist: 0.5}
    runs:
      - {term: raw, modes: [mean, sum]}
      - {term: hybrid, alpha: 1, modes: [mean, sum]}
  continuous-scale:
    <<: *continuous
    controls: scale
    control_of: continuous
    runs: [{term: raw, modes: [mean]}]
  continuous-balance:
    <<: *continuous
    controls: balance
    control_of: continuous
    runs: [{term: raw, modes: [sum]}]
"""


@pytest.fixture(scope="module")
def mixed_pipeline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    (folder / "config.yaml").write_text(TINY_MIXED)
    results = folder / "results"
    run = snakemake("--cores", "2", "--configfile", str(folder / "config.yaml"), "--config", f"results={results}", timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    return folder / "config.yaml", results


def test_the_continuous_family_and_a_family_without_controls_reach_the_verdict(mixed_pipeline):
    _, results = mixed_pipeline
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    assert set(runs.family) == {"discrete", "continuous", "continuous-scale", "continuous-balance"} and len(runs) == 8
    continuous = runs[runs.model == "continuous"]
    assert (continuous.mutual_information_se > 0).all() and (runs[runs.model == "shared_discrete"].mutual_information_se == 0).all()
    verdict = (results / "tables" / "verdict.md").read_text()
    for section in ("## continuous raw alpha=0", "## continuous hybrid alpha=1", "## discrete raw alpha=0"):
        assert section in verdict
    discrete = verdict.split("## discrete raw alpha=0")[1].split("## Summary")[0]
    assert "Controls not run: scale and balance." in discrete
    raw = verdict.split("## continuous raw alpha=0")[1].split("## ")[0]
    assert "Controls not run" not in raw and "scale: continuous-scale/ref0/raw_mean_0 seeds 0" in raw
    hybrid = verdict.split("## continuous hybrid alpha=1")[1].split("## ")[0]
    assert "Controls not run: scale and balance." in hybrid  # the controls run raw only
    for plot in ("takeup", "separation", "latent_usage", "mean_vs_sum", "curves", "forest"):
        assert (results / "plots" / f"{plot}.png").stat().st_size > 0


def test_a_dry_run_with_more_seeds_changes_nothing_on_disk(mixed_pipeline):
    config, results = mixed_pipeline

    def contents():
        return {path: path.read_bytes() for path in sorted(results.rglob("*")) if path.is_file()}

    before = contents()
    run = snakemake("-n", "--configfile", str(config), "--config", f"results={results}", "seeds=3")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "record_grid" in run.stdout and "train_run" in run.stdout  # it plans the new grid's record and runs
    assert contents() == before


def test_the_tables_refuse_a_metrics_file_that_is_not_what_its_run_gives_until_it_is_re_extracted(mixed_pipeline, tmp_path):
    """A fixed design's `--forcerun aggregate_tables` reads the runs' metrics files; one edited by hand is refused with
    the command that re-extracts it, and after that command the tables build again."""
    config, pipeline = mixed_pipeline
    results = tmp_path / "results"
    shutil.copytree(pipeline, results)
    edited = Path(metrics_path(results, "continuous/ref0/raw_sum_0/seed0"))
    frame = pd.read_parquet(edited)
    frame.loc[frame.metric == "strategy_information", "value"] = float("nan")
    frame.attrs["run_record"] = json.loads(pq.read_schema(edited).metadata[b"run_record"])
    write_metrics(frame, edited)
    arguments = ("tables", "--cores", "2", "--forcerun", "aggregate_tables", "--configfile", str(config), "--config", f"results={results}")
    assert snakemake(*arguments).returncode != 0
    log = (results / "logs" / "aggregate_tables.log").read_text()
    assert f"error: {edited} is not what extracting its run {results}/runs/continuous/ref0/raw_sum_0/seed0 gives today" in log
    assert "value of strategy_information (overall): nan in the file" in log
    command = shlex.split(log.split("re-extract it: ")[1].splitlines()[0])
    assert subprocess.run([sys.executable, *command[1:]], cwd=ROOT, capture_output=True).returncode == 0
    again = snakemake(*arguments)
    assert again.returncode == 0, again.stderr[-3000:]


def test_a_declared_onset_endpoint_reaches_the_tables(tmp_path):
    config = write_config(tmp_path, {("families", "discrete", "runs", 0, "primary"): "onset"})
    jobs = dry_run_jobs("--configfile", str(config), "--config", f"results={tmp_path / 'results'}")
    (tables,) = [job for job in jobs if job["rule"] == "aggregate_tables"]
    assert """--primary '[["discrete", "raw", 0.0, "onset"]]'""" in tables["shell"]
    (default,) = [job for job in dry_run_jobs("--config", f"results={tmp_path / 'default'}") if job["rule"] == "aggregate_tables"]
    assert "--primary '[]'" in default["shell"]


def test_the_notes_pilot_trains_look_1_with_each_term_at_its_own_beta(tmp_path):
    """config/note.yaml's dry run is its design's first look: 20 arms x 5 blocks, one chunk of 2 seeds each."""
    jobs = dry_run_jobs("--configfile", "config/note.yaml", "--config", f"results={tmp_path}")
    chunks = [job["output"][0].split("/")[-4:] for job in jobs if job["rule"] == "train_run"]  # family, block, key, chunk
    assert len(chunks) == 20 * 5 and {chunk[3] for chunk in chunks} == {"seeds0-1.json"}
    assert {chunk[1] for chunk in chunks} == {f"ref{block}" for block in range(5)}
    assert len({(family, key) for family, _, key, _ in chunks}) == 20
