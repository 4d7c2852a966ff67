"""The embedded default pilot end to end: wall time, and per rule the wall time and peak memory of its jobs.

    python -m bench.pilot [--cores 2]
    python -m bench.pilot --results results     # read the benchmark files of a pilot already run

Runs `snakemake --cores N` on config/config.yaml in a fresh working directory
and reads every job's Snakemake `benchmark:` file (s, max_rss). Targets: the
whole pilot under 10 minutes on 2 cores, no job above 2 GiB, the validation
passes behind the learning curves at most 10% of the training jobs' wall time.
It also reports what the default pilot's answer rests on: the share of runs
flagged converged (target >= 90%) and the worst final validation reconstruction
per token against the z-free model's (target within 10%).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.common import BenchResult, Figure, default_config, print_result, progress, wall_time, workflow_dir
from experiments.synthetic_sequences.analysis.records.curves import RECON_CURVE
from experiments.synthetic_sequences.run_layout import reference_artifact


def read_benchmarks(results: Path) -> pd.DataFrame:
    """One row per job: rule, seconds, peak RSS in MiB (NaN where a job was too short to sample)."""
    rows = []
    for path in sorted((results / "benchmarks").rglob("*.tsv")):
        frame = pd.read_csv(path, sep="\t")
        rule = path.relative_to(results / "benchmarks").parts[0].removesuffix(".tsv")
        rows.append(
            {"rule": rule, "seconds": float(frame["s"].iloc[-1]), "max_rss_mib": pd.to_numeric(frame["max_rss"], errors="coerce").iloc[-1]}
        )
    if not rows:
        raise FileNotFoundError(f"no benchmark files under {results / 'benchmarks'}; has the pilot run?")
    return pd.DataFrame(rows)


def answer_figures(results: Path, jobs: pd.DataFrame) -> list[Figure]:
    """The learning curves' cost, and the convergence and reconstruction figures of the pilot's runs."""
    timings = [json.loads(path.read_text())["timing"] for path in (results / "runs").rglob("metadata.json")]
    validation_s = sum(timing["validation_s"] for timing in timings)
    train_s = jobs.loc[jobs.rule == "train_run", "seconds"].sum()
    runs = pd.read_parquet(results / "tables" / "runs.parquet")
    curves = pd.read_parquet(results / "tables" / "curves.parquet")
    run_keys = ["family", "reference", "term", "mode", "alpha", "seed"]
    recon = curves[curves.metric == RECON_CURVE].sort_values("step").groupby(run_keys).value.last()
    # each run against the z-free model of its own block
    zfree_nll = {r: json.loads((results / reference_artifact("summary", r)).read_text())["val_nll_per_token"] for r in set(runs.reference)}
    over_zfree = recon / [zfree_nll[r] for r in recon.index.get_level_values("reference")]
    zfree = min(zfree_nll.values()), max(zfree_nll.values())
    return [
        Figure("pilot", "validation passes (learning curves): share of training-job wall time", 100 * validation_s / train_s, "%", "<= 10"),
        Figure("pilot", f"runs flagged converged ({int(runs.converged.sum())} of {len(runs)})", 100 * runs.converged.mean(), "%", ">= 90"),
        Figure(
            "pilot",
            "worst final validation reconstruction / token over the z-free model's, minus 1",
            100 * (over_zfree.max() - 1),
            "%",
            "<= 10",
            note=f"z-free {zfree[0]:.3f}-{zfree[1]:.3f} nats/token ({len(zfree_nll)} blocks); runs {recon.min():.3f}-{recon.max():.3f}",
        ),
    ]


def measure(cores: int = 2, results: Path | None = None) -> BenchResult:
    command = f"python -m bench.pilot --results {results}" if results else f"python -m bench.pilot --cores {cores}"
    started = time.perf_counter()
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        if results is None:
            config = default_config()
            progress(f"the default pilot on {cores} cores (several minutes)")
            pilot_s, _ = wall_time(workflow_dir(Path(tmp), config) + ["--cores", str(cores)])
            results = Path(tmp) / config["results"]
            figures.append(Figure("pilot", f"default pilot, snakemake --cores {cores}, wall time", pilot_s, "s", "< 600"))
        jobs = read_benchmarks(results)
        figures += answer_figures(results, jobs)
    peak = jobs["max_rss_mib"].max()
    figures.append(Figure("pilot", "peak memory (max RSS) of any job", float(peak), "MiB", "< 2048"))
    for rule, group in jobs.groupby("rule", sort=False):
        figures.append(
            Figure(
                "pilot",
                f"{rule}: slowest of {len(group)} job{'s' * (len(group) > 1)}",
                float(group["seconds"].max()),
                "s",
                note=f"total {group['seconds'].sum():.0f} s, peak {group['max_rss_mib'].max():.0f} MiB",
            )
        )
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--results", type=Path, default=None, help="results folder of a finished pilot (no new run)")
    args = parser.parse_args()
    print_result(measure(args.cores, args.results))


if __name__ == "__main__":
    main()
