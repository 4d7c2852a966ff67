"""DAG cost: `snakemake -n` for grids of 10, 100, 1,000 and 5,000 runs, against bare Snakefiles of the same size.

    python -m bench.dag [--runs 10 100 1000 5000]

For each size, a generated config (the default discrete family, 10 term/mode
pairs x runs/10 seeds) goes through the real Snakefile's dry run, with its
listing of every job, as a researcher runs it. Two bare Snakefiles get the same
dry run at the same number of runs:
  trivial      bench/snakefiles/trivial: as many jobs as ours, chains of one-file jobs
               (the issue's baseline; target: under 2x)
  same shape   bench/snakefiles/same_shape: the pipeline's files per training and
               extraction job (6 inputs, 5 outputs, log and benchmark per training job)
               with trivial commands, so ours / same shape is what the pipeline's rules
               add beyond their files (config schema, run grid, params, resources, wildcards)
Growth: the exponent of dry-run time between the two largest sizes (1 = linear).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import REPO, BenchResult, Figure, default_config, print_result, progress, synthetic_families, wall_time, workflow_dir

BARE = REPO / "bench" / "snakefiles"


def job_count(listing: str) -> int:
    match = re.search(r"^total\s+(\d+)$", listing, re.M)
    if match is None:
        raise RuntimeError(f"no job count in the dry run's output:\n{listing[-2000:]}")
    return int(match.group(1))


def dry_runs(runs: int, folder: Path) -> dict[str, tuple[float, int]]:
    """(seconds, jobs) of the dry run of each workflow at this size."""
    config = {**default_config(), "families": synthetic_families(runs)}
    ours_command = workflow_dir(folder / "ours", config) + ["-n"]
    ours_s, listing = wall_time(ours_command)
    jobs = job_count(listing)
    extra = jobs - 2 * runs - 2  # the trivial workflow's gather and all, plus single jobs to match ours
    timings = {"ours": (ours_s, jobs)}
    for name, config_flags in (("trivial", [f"runs={runs}", f"extra={extra}"]), ("same shape", [f"runs={runs}"])):
        snakefile = BARE / name.replace(" ", "_") / "Snakefile"
        bare_dir = folder / name.replace(" ", "_")
        bare_dir.mkdir()
        seconds, listing = wall_time(
            ["snakemake", "--snakefile", str(snakefile), "--directory", str(bare_dir), "-n", "--config", *config_flags]
        )
        timings[name] = (seconds, job_count(listing))
    return timings


def measure(runs: tuple[int, ...] = (10, 100, 1000, 5000)) -> BenchResult:
    command = f"python -m bench.dag --runs {' '.join(map(str, runs))}"
    started = time.perf_counter()
    curves = {f"dry run: {name}": {"runs": [], "seconds": []} for name in ("ours", "trivial", "same shape")}
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in runs:
            progress(f"{count} runs: dry runs")
            timings = dry_runs(count, Path(tmp) / f"grid{count}")
            for name, (seconds, _) in timings.items():
                curves[f"dry run: {name}"]["runs"].append(count)
                curves[f"dry run: {name}"]["seconds"].append(seconds)
            ours, jobs = timings["ours"]
            trivial, same_shape = timings["trivial"][0], timings["same shape"][0]
            figures.append(
                Figure(
                    "DAG",
                    f"snakemake -n, {count} runs ({jobs} jobs): ours / trivial",
                    ours / trivial,
                    "x",
                    "< 2",
                    note=f"ours {ours:.1f} s, trivial {trivial:.1f} s, same shape {same_shape:.1f} s",
                )
            )
            figures.append(Figure("DAG", f"snakemake -n, {count} runs: ours / same shape", ours / same_shape, "x"))
    if len(runs) > 1:
        ours = curves["dry run: ours"]["seconds"]
        growth = float(np.log(ours[-1] / ours[-2]) / np.log(runs[-1] / runs[-2]))
        figures.append(Figure("DAG", f"growth exponent of ours, {runs[-2]} to {runs[-1]} runs (1 = linear)", growth, "", "<= 1.1"))
    return BenchResult(command, figures, curves=curves, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1000, 5000])
    args = parser.parse_args()
    print_result(measure(tuple(args.runs)))


if __name__ == "__main__":
    main()
