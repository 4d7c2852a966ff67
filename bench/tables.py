"""Metric extraction and aggregate tables for 10, 100 and 1,000 runs' outputs.

    python -m bench.tables [--runs 10 100 1000]

One real run of the default pilot's discrete family is trained briefly; its
run directory (eval.json, metrics.jsonl, run_config.json, model.pt, metadata.json) is
the template for N synthesised run directories keyed like the pipeline's
(10 term/mode pairs x N/10 seeds, each with its own run_config and eval values
jittered by its seed, and metrics.jsonl stretched to the pilot's length), and the record of the grid they belong to. Timed
in-process, with the rules' own CLI entry points: records/metrics_files.py's extraction of every run, then one
`tables aggregate` over all of them, bound to the grid and to the inputs' hashes as the pipeline's is.
Target: under 10 s at 1,000 runs, linear growth. Also timed: one extraction process, which is what Snakemake pays
per run (start-up included).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    BenchResult,
    Figure,
    default_config,
    pilot_train_config,
    prepare_run_inputs,
    print_result,
    progress,
    synthetic_families,
    wall_time,
)
from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.analysis import tables
from experiments.synthetic_sequences.analysis.records import metrics_files
from experiments.synthetic_sequences.planning.bindings import GRID_FOLDER, block_input, grid_document, grid_file, write_grid
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.run_layout import RunLayout, run_directory
from experiments.synthetic_sequences.training.cvae_run import train


def jittered(value, rng: np.random.Generator):
    """The same nested evaluation with every float scaled by 1 + 1% noise: seeds differ, the format does not."""
    if isinstance(value, dict):
        return {k: jittered(v, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [jittered(v, rng) for v in value]
    if isinstance(value, float):
        return value * (1 + 0.01 * rng.standard_normal())
    return value


def pilot_length_metrics(rows: list[dict], steps: int, eval_every: int) -> str:
    """A short run's metrics.jsonl stretched to a pilot run's length: a train row per step, a validation row every eval_every."""
    train = [row for row in rows if row["split"] == "train"]
    validation = [row for row in rows if row["split"] == "val"]
    stretched = []
    for step in range(1, steps + 1):
        stretched.append({**train[(step - 1) % len(train)], "step": step})
        if step % eval_every == 0 or step == steps:
            stretched.append({**validation[-1], "step": step})
    return "".join(json.dumps(row) + "\n" for row in stretched)


def current_inputs(paths: dict[str, str], template: Path) -> dict[str, str]:
    """{input name: path} the synthesised runs (all of reference block 0) are bound to; the template's model.pt stands in
    for the z-free checkpoint."""
    inputs = {name: path for name, path in paths.items() if name.endswith("_records")}
    inputs |= {block_input(0, name): path for name, path in paths.items() if name.endswith("_scores")}
    inputs |= {block_input(0, f"reference_{mode}"): f"{paths['reference_dir']}/{mode}.json" for mode in ("mean", "sum")}
    return inputs | {block_input(0, "init_decoder"): str(RunLayout(template).model)}


def synthesise_runs(template: Path, root: Path, runs: int, inputs: dict[str, str]) -> list[Path]:
    """`runs` run directories under root/runs in the pipeline's layout, made from one real (short) run directory, and
    root/grid/<digest>.json, the grid they belong to: each run's run_config.json is its grid entry's, its metadata.json records
    the sha256 of `inputs`, as a run trained by the pipeline would."""
    source = RunLayout(template)
    evaluation = json.loads(source.evaluation.read_text())
    metadata = json.loads(source.metadata.read_text())
    settings = default_config()["families"]["discrete"]["settings"]
    template_rows = [json.loads(line) for line in source.metrics_log.read_text().splitlines()]
    metrics = pilot_length_metrics(template_rows, settings["steps"], settings["eval_every"])
    digests = {name: sha256_file(path) for name, path in inputs.items()}
    specs = expand_grid(synthetic_families(runs))
    document = grid_document(specs)
    write_grid(document, root / grid_file(document))
    run_dirs = []
    for spec in specs:
        run_dir = Path(run_directory(str(root), spec.path))
        run = RunLayout(run_dir)
        run_dir.mkdir(parents=True)
        shutil.copyfile(source.model, run.model)
        run.metrics_log.write_text(metrics)
        config = spec.train_config(run_dir=str(run_dir)).to_dict()
        config["run"]["init_decoder"] = inputs[block_input(0, "init_decoder")] if spec.warm_start else ""
        run.run_config.write_text(json.dumps(config))
        rng = np.random.default_rng([spec.seed, len(run_dirs)])
        run.evaluation.write_text(json.dumps(jittered(evaluation, rng)))
        # as the trainer finishes a run: metadata.json last, with the hashes extraction checks the other files against
        outputs_sha256 = {name: sha256_file(run_dir / name) for name in metadata["outputs_sha256"]}
        inputs_sha256 = {name.removeprefix(block_input(0, "")): digest for name, digest in digests.items() if "reference_" not in name}
        inputs_sha256["reference"] = digests[block_input(0, f"reference_{spec.mode}")]
        run.metadata.write_text(json.dumps({**metadata, "outputs_sha256": outputs_sha256, "inputs_sha256": inputs_sha256}))
        run_dirs.append(run_dir)
    return run_dirs


def extract_and_aggregate(run_dirs: list[Path], root: Path, data_summary: str, inputs: dict[str, str]) -> tuple[float, float]:
    """The rules' own CLI calls, in process: extract every run, then aggregate them bound to the grid and the inputs."""
    started = time.perf_counter()
    metric_paths = []
    for run_dir in run_dirs:
        out = root / "metrics" / run_dir.relative_to(root / "runs").with_suffix(".parquet")
        metrics_files.main(["--run-dir", str(run_dir), "--out", str(out)])
        metric_paths.append(str(out))
    extracted = time.perf_counter()
    references = [path for name, path in inputs.items() if "reference_" in name]
    (grid_record,) = (root / GRID_FOLDER).glob("*.json")  # synthesise_runs wrote one
    tables.main(
        ["aggregate", "--metrics", *metric_paths, "--data-summary", data_summary, "--references", *references]
        + ["--grid", str(grid_record), *(f"--input={name}={path}" for name, path in inputs.items())]
        + ["--out-dir", str(root / "tables")]
    )
    return extracted - started, time.perf_counter() - extracted


def measure(runs: tuple[int, ...] = (10, 100, 1000)) -> BenchResult:
    command = f"python -m bench.tables --runs {' '.join(map(str, runs))}"
    started = time.perf_counter()
    figures, curve = [], {"runs": [], "seconds": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        progress("a short real run as the template")
        paths = prepare_run_inputs(tmp / "inputs", zfree_steps=20)
        template = tmp / "template"
        train([pilot_train_config(paths, template, steps=10, eval_every=10, eval_prompts_per_code=4)])
        data_summary = str(Path(paths["train_records"]).parent / "summary.json")
        inputs = current_inputs(paths, template)
        for count in runs:
            root = tmp / f"grid{count}"
            run_dirs = synthesise_runs(template, root, count, inputs)
            progress(f"{count} runs: extract and aggregate")
            extract_s, aggregate_s = extract_and_aggregate(run_dirs, root, data_summary, inputs)
            total = extract_s + aggregate_s
            curve["runs"].append(count)
            curve["seconds"].append(total)
            target = "< 10" if count == 1000 else ""
            note = f"extract {extract_s:.2f} s ({1e3 * extract_s / count:.1f} ms/run), aggregate {aggregate_s:.2f} s"
            figures.append(Figure("tables", f"extract + aggregate, {count} runs", total, "s", target, note))
        if len(runs) > 1:
            growth = np.log(curve["seconds"][-1] / curve["seconds"][0]) / np.log(runs[-1] / runs[0])
            figures.append(Figure("tables", f"growth exponent, {runs[0]} to {runs[-1]} runs (1 = linear)", float(growth), "", "<= 1.1"))
        one_run = run_dirs[0]
        process_s, _ = wall_time(
            [sys.executable, "-m", "experiments.synthetic_sequences.analysis.records.metrics_files"]
            + ["--run-dir", str(one_run), "--out", str(tmp / "one.parquet")]
        )
        figures.append(Figure("tables", "one extraction process (Snakemake's cost per run)", process_s, "s"))
    return BenchResult(command, figures, curves={"tables: extract + aggregate": curve}, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    print_result(measure(tuple(args.runs)))


if __name__ == "__main__":
    main()
