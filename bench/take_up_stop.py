"""What ending a run at a confirmed take-up would save, read from the finished runs of a pilot (issue 59, item 3).

    python -m bench.take_up_stop results/curve_design
    python -m bench.take_up_stop results/curve_design --rerun 12 --workdir . --configfile config/curve_design.yaml

A run's take-up is confirmed at the second of two validation evaluations in a row at or above the take-up threshold
(analysis/records/curves.py). Training is deterministic given its seed, so a run ended there has, up to that step,
the very metrics the full run logged: what the stop would save and what it would change can be read from the full
runs without training them again. Per run: the confirmed step (none if never confirmed), the share of its steps
after it, the training loop's seconds after it (train_loop_s, validation passes included, pro rata by steps), and
whether its take-up would change (confirmed, yet the full run ends under the threshold: one that rose and fell).
Per (family, term) and in all: runs, runs that took up, confirmed, changed, the steps and the training jobs' wall
(benchmark files) the stop would save; then the share of every job's wall (z-free models, scoring, extraction, looks
and tables too). The onset is the first evaluation at or above the threshold, before the stop,
so no onset changes; the final I(x;z), the strategy information and the convergence flag are no longer read.

--rerun N trains N of those runs again with `--stop-at-take-up true` (their training jobs' commands from
`snakemake -n -p` in --workdir, the pilot's folder, with its --configfile files), each into its own folder under
--out, and checks what the reading above assumes: each ends at the step read from its full run (or trains to its
budget where none was confirmed), its metrics log is the full run's first lines byte for byte, and its take-up is the
full run's. Picked in turn over (family, term) among the runs whose take-up was confirmed, and one that never was.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.common import REPO, flag_values, trainer_commands
from bench.pilot import read_benchmarks
from experiments.synthetic_sequences.analysis.records.curves import MI_CURVE
from experiments.synthetic_sequences.analysis.records.run_files import validation_rows
from experiments.synthetic_sequences.arms import CONFIRMING_EVALUATIONS, TAKEUP_THRESHOLD, next_streak
from experiments.synthetic_sequences.run_layout import ENDED_AT_TAKE_UP, METADATA, METRICS_LOG, finished_at, parse_run_path


def confirmed_step(rows: list[dict]) -> int | None:
    """The step of the CONFIRMING_EVALUATIONS-th validation evaluation in a row at or above the threshold, or None."""
    in_a_row = 0
    for row in rows:
        in_a_row = next_streak(in_a_row, row[MI_CURVE])
        if in_a_row == CONFIRMING_EVALUATIONS:
            return int(row["step"])
    return None


def run_row(metadata_path: Path, results: Path) -> dict | None:
    """One finished run's figures (module docstring), or None for a run that did not finish."""
    metadata = json.loads(metadata_path.read_text())
    if finished_at(metadata) is None:
        return None
    run_dir = metadata_path.parent
    rows = validation_rows((run_dir / METRICS_LOG).read_bytes(), run_dir / METRICS_LOG)
    timing, steps = metadata["timing"], int(rows[-1]["step"])
    stop = confirmed_step(rows)
    after = 0.0 if stop is None else (steps - stop) / steps
    run = parse_run_path(str(run_dir))
    chunk = chunk_benchmark(results / "benchmarks" / "train_run" / run_dir.relative_to(results / "runs").parent, run["seed"])
    return {
        "run_dir": str(run_dir),
        **run,
        "steps": steps,
        "took_up": rows[-1][MI_CURVE] >= TAKEUP_THRESHOLD,
        "confirmed": stop is not None,
        "changed": stop is not None and rows[-1][MI_CURVE] < TAKEUP_THRESHOLD,
        "steps_saved": after * steps,
        "loop_s": timing["train_loop_s"],
        "loop_s_saved": after * timing["train_loop_s"],
        "chunk": str(chunk) if chunk else "",
        "job_s": float(pd.read_csv(chunk, sep="\t")["s"].iloc[-1]) if chunk else float("nan"),
    }


def chunk_benchmark(folder: Path, seed: int) -> Path | None:
    """The benchmark file of the training job (chunk 'seeds<first>-<last>') that trained `seed`, or None."""
    for path in folder.glob("seeds*-*.tsv"):
        first, last = (int(part) for part in path.stem.removeprefix("seeds").split("-"))
        if first <= seed <= last:
            return path
    return None


def savings(results: Path) -> pd.DataFrame:
    """One row per finished run of `results` (module docstring)."""
    rows = [row for path in sorted((results / "runs").rglob(METADATA)) if (row := run_row(path, results)) is not None]
    if not rows:
        raise FileNotFoundError(f"no finished runs under {results / 'runs'}; has the pilot run?")
    return pd.DataFrame(rows)


def summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (family, term) and in all: counts, and the shares of steps, loop and job wall the stop would save."""

    def figures(group: pd.DataFrame) -> pd.Series:
        timed = group[group.job_s.notna()]
        job_s = timed.drop_duplicates("chunk").job_s.sum()  # a job trains its chunk's seeds
        return pd.Series(
            {
                "runs": len(group),
                "took up": int(group.took_up.sum()),
                "confirmed": int(group.confirmed.sum()),
                "take-up changed": int(group.changed.sum()),
                "steps saved %": 100 * group.steps_saved.sum() / group.steps.sum(),
                "training loop saved %": 100 * group.loop_s_saved.sum() / group.loop_s.sum(),
                "job wall saved %": 100 * timed.loop_s_saved.sum() / job_s,
            }
        )

    per_cell = runs.groupby(["family", "term"]).apply(figures, include_groups=False)
    per_cell.loc[("all", "all"), :] = figures(runs)
    return per_cell


def run_commands(workdir: Path, configfiles: list[str]) -> dict[str, list[str]]:
    """{run directory: the trainer command that trains it alone} of the pilot in `workdir`: its job's command with
    that run's seed and folder only, no chunk record, and every input as an absolute path."""
    commands = {}
    for tokens in trainer_commands(["--configfile", *configfiles], workdir):
        seeds, run_dirs = flag_values(tokens, "--seed"), flag_values(tokens, "--run-dir")
        shared, skip = [], 0
        for token in tokens:
            if skip:
                skip -= 1
            elif token in ("--seed", "--run-dir", "--chunk-manifest"):
                skip = {"--seed": len(seeds), "--run-dir": len(run_dirs), "--chunk-manifest": 1}[token]
            else:
                shared.append(str(workdir / token) if not token.startswith("-") and (workdir / token).exists() else token)
        for seed, run_dir in zip(seeds, run_dirs, strict=True):
            commands[str((workdir / run_dir).resolve())] = [*shared, "--seed", seed]
    return commands


def picked(runs: pd.DataFrame, count: int) -> pd.DataFrame:
    """`count` runs: in turn over (family, term) among those confirmed, then one never confirmed."""
    confirmed = runs[runs.confirmed].sort_values(["family", "term", "beta", "reference"])
    order = confirmed.assign(turn=confirmed.groupby(["family", "term"]).cumcount()).sort_values(["turn", "family", "term"])
    return pd.concat([order.head(count - 1).drop(columns="turn"), runs[~runs.confirmed].head(1)])


def rerun(runs: pd.DataFrame, commands: dict[str, list[str]], out: Path) -> pd.DataFrame:
    """Each of `runs` trained again with the option into `out` (module docstring): what it checked and its walls."""
    rows = []
    for index, run in enumerate(runs.itertuples()):
        folder = out / f"run{index}"
        shutil.rmtree(folder, ignore_errors=True)
        command = [*commands[str(Path(run.run_dir).resolve())], "--run-dir", str(folder), "--stop-at-take-up", "true"]
        started = time.perf_counter()
        subprocess.run(command, cwd=REPO, check=True, capture_output=True)
        wall = time.perf_counter() - started
        metadata = json.loads((folder / METADATA).read_text())
        lines = (folder / METRICS_LOG).read_bytes().splitlines()
        full = Path(run.run_dir) / METRICS_LOG
        ended = metadata.get(ENDED_AT_TAKE_UP, run.steps)
        rows.append(
            {
                "run": str(Path(run.run_dir).relative_to(Path(run.run_dir).parents[3])),
                "read from the full run": int(run.steps - run.steps_saved),
                "ended": ended,
                "same lines": lines == full.read_bytes().splitlines()[: len(lines)],
                "take-up same": (validation_rows(b"\n".join(lines), folder)[-1][MI_CURVE] >= TAKEUP_THRESHOLD) == run.took_up,
                "wall s": wall,
                "loop s": metadata["timing"]["train_loop_s"],
                "full loop s": run.loop_s,
                "full job s": run.job_s,
            }
        )
        print(f"  .. {rows[-1]['run']}: ended at {ended}, {wall:.0f} s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a pilot's results folder (its runs/ and benchmarks/)")
    parser.add_argument("--rerun", type=int, default=0, help="runs to train again with the option (default: none)")
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the pilot's folder, where its snakemake ran")
    parser.add_argument("--configfile", nargs="+", default=[], help="the pilot's config files, as it was run")
    parser.add_argument("--out", type=Path, default=Path("/tmp/take_up_stop"), help="where the reruns are written")
    args = parser.parse_args(argv)
    runs = savings(args.results)
    if runs.job_s.isna().any():
        print(f"{int(runs.job_s.isna().sum())} runs have no benchmark file: the job wall share leaves them out", file=sys.stderr)
    print(f"$ python -m bench.take_up_stop {args.results}")
    print(summary(runs).to_string(float_format=lambda value: f"{value:.1f}"))
    every_job = read_benchmarks(args.results).seconds.sum()
    saved = runs.loop_s_saved.sum()
    share = 100 * saved / every_job
    print(f"every job of the pilot (benchmark files): {every_job:.0f} s; the stop would save {saved:.0f} s of it ({share:.1f}%)")
    if args.rerun:
        checked = rerun(picked(runs, args.rerun), run_commands(args.workdir.resolve(), args.configfile), args.out)
        print(checked.to_string(float_format=lambda value: f"{value:.1f}"))


if __name__ == "__main__":
    main()
