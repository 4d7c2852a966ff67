"""Seeds in lockstep against one seed per process: seed-steps per second and peak memory, with the real trainer.

    python -m bench.lockstep                                   # CPU: 2 cores, about 4 minutes
    python -m bench.lockstep --device cuda --chunks 1 8 32 128 --steps 200   # a GPU (bench/gpu.sh)

Every measurement trains the default pilot's discrete sum run (its model, batch size and learning rates) for
--steps steps in a subprocess of the trainer CLI, as a training job runs, with validation only at the last step;
seed-steps per second is seeds x steps over the run's train-loop time less that validation (metadata.json's
timing). Peak memory is each process's maximum RSS (os.wait4).

On CPU the baseline is what the default pilot does on 2 cores: two one-seed processes side by side, one thread
each. Against it: one process of a chunk on 2 threads, and two chunk processes side by side on one thread each.
Target: the best chunk at least 1.2x the baseline's seed-steps per second. On a GPU each chunk size runs alone and
the figure is its seed-steps per second against a chunk of 1; target at least 20x at 32 seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, BenchResult, Figure, pilot_train_config, prepare_run_inputs, print_result, progress
from core.disentanglement.cli import cli_arguments

TRAINER = "experiments.synthetic_sequences.training.train_disentangled"


def trainer_command(config, folder: Path, seeds: list[int], threads: int) -> list[str]:
    """The CLI of one chunk: the config's settings, its seeds each with a run directory under `folder`."""
    settings = {name: getattr(value, "value", value) for name, value in config.flat().items() if name not in ("seed", "run_dir")}
    flags = shlex.split(cli_arguments({name: value for name, value in settings.items() if value not in ("", {}, None)}))
    dirs = [str(folder / f"seed{seed}") for seed in seeds]
    return [sys.executable, "-m", TRAINER, "--threads", str(threads), *flags, "--seed", *map(str, seeds), "--run-dir", *dirs]


def run_side_by_side(commands: list[list[str]]) -> list[int]:
    """Start every command at once; the peak RSS (KiB) of each, once all have ended."""
    processes = [subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for command in commands]
    peaks = []
    for process in processes:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(process.args[:4])} ... failed:\n{process.stderr.read()[-2000:]}")
        peaks.append(usage.ru_maxrss)
    return peaks


def loop_seconds(run_dir: Path) -> float:
    timing = json.loads((run_dir / "metadata.json").read_text())["timing"]
    return timing["train_loop_s"] - timing["validation_s"]


def seed_steps_per_second(config, folder: Path, chunks: list[list[int]], threads: int, steps: int) -> tuple[float, list[int]]:
    """Seed-steps per second of `chunks` trained side by side (one process each), and their peak RSS."""
    commands = [trainer_command(config, folder / f"chunk{i}", seeds, threads) for i, seeds in enumerate(chunks)]
    peaks = run_side_by_side(commands)
    rate = sum(len(seeds) * steps / loop_seconds(folder / f"chunk{i}" / f"seed{seeds[0]}") for i, seeds in enumerate(chunks))
    return rate, peaks


def cpu_figures(config, folder: Path, steps: int, sizes: list[int]) -> list[Figure]:
    progress("baseline: two one-seed processes side by side, 1 thread each")
    baseline, single_peaks = seed_steps_per_second(config, folder / "base", [[0], [1]], 1, steps)
    figures = [Figure("lockstep", "one seed per process, 2 side by side: seed-steps/s", baseline, "steps/s")]
    best = 0.0
    for size in sizes:
        progress(f"one chunk of {size} on 2 threads; two chunks of {size // 2} side by side on 1 thread each")
        one, peaks = seed_steps_per_second(config, folder / f"one{size}", [list(range(size))], 2, steps)
        two, _ = seed_steps_per_second(config, folder / f"two{size}", [list(range(size // 2)), list(range(size // 2, size))], 1, steps)
        figures += [
            Figure("lockstep", f"chunk of {size}, 2 threads: seed-steps/s vs baseline", one / baseline, "x"),
            Figure("lockstep", f"2 chunks of {size // 2} side by side, 1 thread each: vs baseline", two / baseline, "x"),
        ]
        best = max(best, one, two)
        if size == 16:
            figures.append(Figure("lockstep", "peak RSS, one chunk of 16", peaks[0] / 1024, "MiB"))
            figures.append(Figure("lockstep", "peak RSS, 16 one-seed processes (16 x one)", 16 * max(single_peaks) / 1024, "MiB"))
    figures.append(Figure("lockstep", "best chunk layout vs one seed per process", best / baseline, "x", ">= 1.2"))
    return figures


def device_figures(config, folder: Path, steps: int, sizes: list[int]) -> list[Figure]:
    rates = {}
    for size in sizes:
        progress(f"a chunk of {size} on {config.run.device}")
        rates[size], _ = seed_steps_per_second(config, folder / f"chunk{size}", [list(range(size))], 1, steps)
    figures = [Figure("lockstep", f"chunk of {size}: seed-steps/s", rate, "steps/s") for size, rate in rates.items()]
    for size, rate in rates.items():
        if size != sizes[0]:
            target = ">= 20" if size == 32 else ""
            figures.append(Figure("lockstep", f"chunk of {size} vs a chunk of {sizes[0]}", rate / rates[sizes[0]], "x", target))
    return figures


def measure(device: str = "cpu", sizes: tuple[int, ...] = (8, 16), steps: int = 60) -> BenchResult:
    command = f"python -m bench.lockstep --device {device} --chunks {' '.join(map(str, sizes))} --steps {steps}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        config = pilot_train_config(paths, Path(tmp) / "unused", mode="sum", steps=steps, eval_every=steps, device=device)
        if device == "cpu":
            figures = cpu_figures(config, Path(tmp), steps, list(sizes))
        else:
            figures = device_figures(config, Path(tmp), steps, list(sizes))
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU figures")
    parser.add_argument("--chunks", type=int, nargs="+", default=[8, 16], help="chunk sizes (default: 8 16)")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args(argv)
    result = measure(args.device, tuple(args.chunks), args.steps)
    print_result(result)
    if args.device != "cpu":
        print(json.dumps(result.to_dict(), indent=1))


if __name__ == "__main__":
    main()
