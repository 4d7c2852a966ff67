"""Seeds one after another in one training job against one seed per process, at the default's settings.

    python -m bench.sequential_chunk --results results [--pairs 2] [--out /tmp/sequential_chunk]

It takes the trainer command of one of the finished pilot's training jobs (`snakemake -n -p --forcerun train_run`
on that results folder), then alternates A (two processes of one seed each, one after the other) and B (one process,
`--chunk-training sequential`, both seeds) `--pairs` times, each run in its own folder under --out. It prints the
walls, what the runs measured inside (setup, train loop, evaluation), what was left outside (process start, imports,
writing), and whether each seed's metrics.jsonl and weights are the same in A and B. A timing: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

import torch

from bench.common import trainer_commands

ROOT = Path(__file__).resolve().parents[1]
DROPPED = {"--seed": 1, "--run-dir": 1, "--chunk-manifest": 1, "--chunk-training": 1}


def trainer_command(results: Path) -> tuple[list[str], int]:
    """The first training job's command of the pilot in `results`, without its seeds, folders and manifest, and its
    first trainer seed (its block's: grid.training_seed)."""
    tokens = trainer_commands(["--config", f"results={results}"], ROOT)[0]
    kept, skip = [], 0
    for token in tokens:
        if skip:
            skip -= 1
        elif token in DROPPED:
            skip = DROPPED[token]
        else:
            kept.append(token)
    return kept, int(tokens[tokens.index("--seed") + 1])


def inside(run: Path) -> float:
    timing = json.loads((run / "metadata.json").read_text())["timing"]
    return timing["setup_s"] + timing["train_loop_s"] + timing["evaluation_s"]


def timed(commands: list[list[str]]) -> float:
    started = time.perf_counter()
    for command in commands:
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - started


def same_run(a: Path, b: Path) -> bool:
    weights = [torch.load(run / "model.pt", weights_only=True)["model"] for run in (a, b)]
    same_weights = all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    return same_weights and (a / "metrics.jsonl").read_bytes() == (b / "metrics.jsonl").read_bytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="a finished pilot's results folder (its inputs are read)")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/sequential_chunk"))
    args = parser.parse_args()
    base, first = trainer_command(args.results)
    seeds = [str(first), str(first + 1)]
    print("| pair | A: two processes | B: one, sequential | B / A | inside A, B | outside A, B | same numbers |")
    print("|---|---|---|---|---|---|---|")
    for pair in range(1, args.pairs + 1):
        a, b = args.out / f"A{pair}", args.out / f"B{pair}"
        shutil.rmtree(a, ignore_errors=True)
        shutil.rmtree(b, ignore_errors=True)
        wall_a = timed([[*base, "--seed", seed, "--run-dir", str(a / f"seed{seed}")] for seed in seeds])
        wall_b = timed([[*base, "--chunk-training", "sequential", "--seed", *seeds, "--run-dir", *(str(b / f"seed{s}") for s in seeds)]])
        in_a, in_b = (sum(inside(folder / f"seed{s}") for s in seeds) for folder in (a, b))
        same = all(same_run(a / f"seed{s}", b / f"seed{s}") for s in seeds)
        print(
            f"| {pair} | {wall_a:.1f} s | {wall_b:.1f} s | {wall_b / wall_a:.2f} | {in_a:.1f}, {in_b:.1f} s | "
            f"{wall_a - in_a:.1f}, {wall_b - in_b:.1f} s | {same} |"
        )
    print(f"command: python -m bench.sequential_chunk --results {args.results} --pairs {args.pairs}")


if __name__ == "__main__":
    main()
