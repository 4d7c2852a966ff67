"""Every command the pipeline prints, followed literally, makes progress on the pilot it was printed for.

One tiny pilot, run as a researcher runs the curve design with an overlay (`--configfile config/curve.yaml
tiny.yaml`): a beta axis, a draw per block, two blocks. Each test copies its results folder, breaks it as a user
might (an edited or swapped data draw, deleted runs, an edited metrics file, a changed artifact, another data
layout), reads the one-line refusal where the user looks (the console), follows its advice word for word and checks
that the pipeline ends well: exit 0, with the tables counting every run of the grid.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from experiments.synthetic_sequences.analysis.records.metrics_files import write_metrics
from experiments.synthetic_sequences.analysis.report.verdict_text import seeds_command
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand

pytestmark = pytest.mark.slow  # each follows its advice through retraining: minutes together

ROOT = Path(__file__).resolve().parents[1]
BETAS = (0.05, 0.2)
RUNS = 2 * len(BETAS) * 2  # 2 blocks x betas x 2 modes, 1 seed each
TINY = {  # over config/curve.yaml: the main discrete family alone, raw in both modes, at tiny settings
    "data": {"n_train": 200, "n_val": 60, "n_test": 60, "per_block": True},
    "references": [0, 1],
    "seeds": 1,
    "seeds_per_job": 1,
    "zfree": {"steps": 30},
    "families": {
        "discrete": {
            "betas": list(BETAS),
            "settings": {"steps": 6, "eval_every": 3, "eval_prompts_per_code": 2},
            "runs": [{"term": "raw", "modes": ["mean", "sum"]}],
        },
        **dict.fromkeys(("discrete-scale", "discrete-balance", "continuous", "continuous-scale", "continuous-balance")),
    },
}


def snakemake_argv(words: list[str]) -> list[str]:
    """A printed `snakemake ...` command as this interpreter runs it; --nolock, as the other workflow tests (test
    workers share the working directory; the pipeline's own results lock still holds each folder)."""
    assert words[0] == "snakemake", words
    return [sys.executable, "-m", "snakemake", "--nolock", *words[1:]]


def run(words: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(snakemake_argv(words), cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def pilot(folder: Path, results: Path, **changes) -> PilotCommand:
    """The tiny pilot writing to `results`, with `changes` to its overlay: `snakemake --cores 2 --configfile
    config/curve.yaml <folder>/tiny.yaml`."""
    overlay = folder / "tiny.yaml"
    overlay.write_text(yaml.safe_dump({**TINY, "results": str(results), **changes}))
    return PilotCommand(("config/curve.yaml", str(overlay)))


def refusal(result: subprocess.CompletedProcess) -> str:
    """The console's one line that gives advice (it holds the pilot's command), checked to be there."""
    assert result.returncode != 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if " snakemake --cores 2 " in line]
    assert lines, result.stdout[-3000:] + result.stderr[-3000:]
    return lines[0]


def follow(advice: str, pilot_command: PilotCommand) -> subprocess.CompletedProcess:
    """Follow a refusal's advice word for word: its `rm ...; then COMMAND`, or its `...: COMMAND`, where COMMAND is
    this pilot's command line with a flag or target of the advice's own."""
    if "; then " in advice:
        removal, _, command = advice.rpartition("rm ")[2].partition("; then ")
        subprocess.run(f"rm {removal}", shell=True, check=True, cwd=ROOT)  # the shell expands its globs, as the user's
    else:
        command = "snakemake " + advice.rpartition(": snakemake ")[2]
    words = shlex.split(command)
    assert words[-len(pilot_command.configfiles) - 1 :] == ["--configfile", *pilot_command.configfiles], command  # this pilot's
    return run(words)


def counted_runs(results: Path) -> int:
    return len(pd.read_parquet(results / "tables" / "runs.parquet"))


def finished(result: subprocess.CompletedProcess, results: Path) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert counted_runs(results) == RUNS


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("advice")
    results = folder / "results"
    result = run(shlex.split(pilot(folder, results).command()), timeout=900)
    finished(result, results)
    return results


@pytest.fixture
def copy(base, tmp_path):
    """A copy of the tiny pilot's folder, mtimes kept, and the pilot's command line writing to it."""
    results = tmp_path / "results"
    shutil.copytree(base, results)
    return results, pilot(tmp_path, results)


def test_the_seeds_line_extends_this_pilots_own_folder(copy):
    """Every config file after one --configfile: a second --configfile flag would drop config/curve.yaml (snakemake keeps
    the last) and plan another pilot."""
    results, command = copy
    planned = run([*shlex.split(seeds_command(2, command)), "-n"])
    assert planned.returncode == 0, planned.stderr[-2000:]
    trained = re.findall(r"output: (\S+\.json)", planned.stdout)
    trained = [path for path in trained if "/runs/" in path]
    assert len(trained) == RUNS and all(path.startswith(f"{results}/runs/discrete/") and path.endswith("seeds1-1.json") for path in trained)


def test_an_edited_summary_is_refused_on_the_console_and_redrawn(copy):
    """The mean token count sets raw's predicted k: an edit is refused by the tables' job, its line on the console."""
    results, command = copy
    path = results / "data" / "ref0" / "summary.json"
    summary = json.loads(path.read_text())
    drawn = summary["train"]["y_length"]["mean"]
    summary["train"]["y_length"]["mean"] = drawn + 0.25  # within the lengths' range: only its records tell
    path.write_text(json.dumps(summary))
    advice = refusal(run(shlex.split(command.command())))
    assert f"{path}: train.y_length.mean {drawn + 0.25}, its records give {drawn}" in advice and "the summary was edited" in advice
    assert advice.endswith(command.command(flags=["--forcerun", str(path)]))
    finished(follow(advice, command), results)
    assert json.loads(path.read_text())["train"]["y_length"]["mean"] == drawn


def test_a_summary_out_of_its_own_ranges_is_refused_before_any_job(copy):
    results, command = copy
    path = results / "data" / "ref0" / "summary.json"
    summary = json.loads(path.read_text())
    summary["train"]["y_length"]["mean"] = 0.5
    path.write_text(json.dumps(summary))
    advice = refusal(run([*shlex.split(command.command()), "-n"]))
    assert f"{path}: train.y_length has mean 0.5 outside [min " in advice
    redraw = command.command(flags=["--forcerun", str(path)])
    assert advice.endswith(f"redraw it (what was trained on it retrains): rm -r {path.parent}; then {redraw}")
    finished(follow(advice, command), results)


def test_a_summary_whose_seed_was_edited_is_refused_before_any_job(copy):
    results, command = copy
    path = results / "data" / "ref1" / "summary.json"
    summary = json.loads(path.read_text())
    summary["config"]["seed"] = 7
    path.write_text(json.dumps(summary))
    advice = refusal(run(shlex.split(command.command())))
    assert f"{path} was drawn with seed 7 (config: 2), not as the config draws it" in advice  # no block 6 to swap with
    finished(follow(advice, command), results)


def test_records_changed_under_their_summary_are_refused_and_redrawn(copy):
    results, command = copy
    shutil.copy(results / "data" / "ref1" / "train.parquet", results / "data" / "ref0" / "train.parquet")
    advice = refusal(run(shlex.split(command.command())))
    assert f"{results}/data/ref0/train.parquet hashes " in advice and "the records changed since" in advice
    finished(follow(advice, command), results)


def test_two_blocks_draws_swapped_are_named_and_each_redrawn(copy):
    """Nothing is retrained on the other block's draw: the swap is refused before any job."""
    results, command = copy
    data = results / "data"
    (data / "ref0").rename(data / "swap")
    (data / "ref1").rename(data / "ref0")
    (data / "swap").rename(data / "ref1")
    advice = refusal(run(shlex.split(command.command())))
    assert f"{data}/ref0/summary.json was drawn with seed 2 (config: 1) (block 1's seed: swapped?)" in advice
    assert f"{data}/ref1/summary.json was drawn with seed 1 (config: 2) (block 0's seed: swapped?)" in advice
    finished(follow(advice, command), results)
    for block in (0, 1):
        assert json.loads((data / f"ref{block}" / "summary.json").read_text())["config"]["seed"] == block + 1


def test_a_deleted_beta_is_retrained_by_a_plain_rerun(copy):
    """Its runs, chunk records and metrics gone: the targets ask for the metrics files, so `snakemake tables` replans."""
    results, command = copy
    for folder in ("runs", "metrics"):
        shutil.rmtree(results / folder / "discrete" / "ref0" / "raw_sum_0_b0.2")
    finished(run(shlex.split(command.command(targets=["tables"]))), results)


def test_a_deleted_metrics_file_is_extracted_again(copy):
    results, command = copy
    metrics = results / "metrics" / "discrete" / "ref1" / "raw_mean_0_b0.05" / "seed0.parquet"
    metrics.unlink()
    finished(run(shlex.split(command.command(targets=["tables"]))), results)
    assert metrics.exists()


def test_a_deleted_run_directory_is_refused_with_the_chunk_record_to_remove(copy):
    results, command = copy
    shutil.rmtree(results / "runs" / "discrete" / "ref1" / "raw_mean_0_b0.2" / "seed0")
    advice = refusal(run(shlex.split(command.command())))
    assert "discrete/ref1/raw_mean_0_b0.2/seed0" in advice
    record = f"{results}/runs/discrete/ref1/raw_mean_0_b0.2/seeds0-0.json"
    assert advice.endswith(f"rm {record}; then {command.command(flags=['--forcerun', record])}")
    finished(follow(advice, command), results)
    assert (results / "runs" / "discrete" / "ref1" / "raw_mean_0_b0.2" / "seed0" / "metadata.json").exists()


def test_edited_metrics_files_are_refused_and_re_extracted_by_the_printed_command(copy):
    results, command = copy
    for key in ("raw_mean_0_b0.05", "raw_sum_0_b0.05"):
        path = results / "metrics" / "discrete" / "ref0" / key / "seed0.parquet"
        frame = pd.read_parquet(path)
        frame.loc[frame.metric == "mutual_information", "value"] = 9.0
        frame.attrs["run_record"] = json.loads(pq.read_schema(path).metadata[b"run_record"])
        write_metrics(frame, path)
    advice = refusal(run(shlex.split(command.command())))
    assert "2 metrics files are not what extracting their runs gives today" in advice
    assert advice.endswith(command.command(targets=["tables"], flags=["--forcerun", "extract_metrics"]))
    finished(follow(advice, command), results)


def test_a_block_artifact_changed_under_its_runs_is_rebuilt_with_them(copy):
    """c_base edited with its mtime kept (snakemake sees nothing): the tables' job refuses, and the advice rebuilds
    the block's artifacts and retrains its runs."""
    results, command = copy
    path = results / "reference" / "ref1" / "sum.json"
    stat = path.stat()
    reference = json.loads(path.read_text())
    reference["c_base"] *= 2
    path.write_text(json.dumps(reference))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    advice = refusal(run(shlex.split(command.command(targets=["tables"], flags=["--forcerun", "aggregate_tables"]))))
    assert advice.startswith("error: ref1/reference_sum hashes ") and "The artifact changed under its runs" in advice
    assert advice.endswith(command.command(flags=["--forcerun", f"{results}/zfree/ref1/model.pt"]))
    finished(follow(advice, command), results)
    assert json.loads(path.read_text())["c_base"] == reference["c_base"] / 2


def test_switching_a_folder_to_one_shared_draw_is_refused_and_the_advice_replans(copy, tmp_path):
    results, _ = copy
    command = pilot(tmp_path, results, data={**TINY["data"], "per_block": False})
    advice = refusal(run([*shlex.split(command.command()), "-n"]))
    assert f"results: {results} holds a draw per block ({results}/data/ref0/summary.json)" in advice
    assert "but data.per_block: false asks for one shared draw" in advice
    redraw = command.command(flags=["--forcerun", "synthetic_sequences"])
    assert advice.endswith(f"rm -r {results}/data/ref0 {results}/data/ref1; then {redraw}")
    removal, _, redraw = advice.rpartition("rm ")[2].partition("; then ")
    subprocess.run(f"rm {removal}", shell=True, check=True)
    planned = run([*shlex.split(redraw), "-n"])
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert f"output: {results}/data/train.parquet" in planned.stdout  # the shared draw, then every run on it
