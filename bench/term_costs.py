"""What a run costs at CPU scale: the step against the core's GEMM rate, each term in both families, the note's pilot.

    python -m bench.term_costs [--steps 400]

All on one thread, in-process, the default's settings (batch 32, 4 length groups, warm-started decoder):
- **Step rate**: FLOPs of one raw-mean training step (torch.utils.flop_counter) over its median time (train_step, the
  trainer's own step, 5 rounds of 10 steps), against a 1024 x 1024 fp32 matmul timed in the same process. Target:
  the step at >= 60% of the matmul's rate.
- **Seconds per run**: each term (raw, dist, tokcc, hybrid, ex, tokinv) trains one sum-mode run of --steps steps by
  cvae_run.train, in the discrete family (3 codes enumerated) and in the continuous one (an 8-dimensional Gaussian
  z, 2 samples); the figure is the run's own setup, training loop and evaluation (metadata.json `timing`).
- **Process start**: the median of 3 bare imports of the trainer's module in a fresh Python, what each training
  job pays before its setup.
- **The note's pilot projected**: per family dist, tokcc, hybrid and raw in mean and sum plus the scale and balance
  controls (raw): 20 arms x 20 runs on 2 cores, two jobs side by side. One run per process (bda694d's default) against
  the default's chunks (seeds_per_job 4, sequential: one start per 4 runs). The z-free stage and tables are not in it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.common import (
    BenchResult,
    Figure,
    default_config,
    pilot_train_config,
    prepare_run_inputs,
    print_result,
    progress,
    scheduled_batches,
)
from bench.losses import Variant
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.training.cvae_run import train
from experiments.synthetic_sequences.training.inputs import load_inputs

TERMS = ("raw", "dist", "tokcc", "hybrid", "ex", "tokinv")
ALPHA = {"tokcc": 1.0, "hybrid": 1.0, "tokinv": 1.0}
HYBRID = {"tokcc": 0.5, "dist": 0.5}
CONTINUOUS = {"latent_dim": 8, "latent_samples": 2}
PILOT_ARMS = {"dist": 2, "tokcc": 2, "hybrid": 2, "raw": 4}  # arms per family: each in mean and sum; raw also in the controls
RUNS_PER_ARM, CORES, SEEDS_PER_PROCESS = 20, 2, 4
GEMM = 1024
STEP_TARGET = ">= 60"


def families(steps: int) -> dict:
    """The default's discrete family and its continuous twin, each running every term once, in sum mode."""
    discrete = default_config()["families"]["discrete"]
    settings = {**discrete["settings"], "steps": steps, "eval_every": max(1, steps // 8)}
    runs = [{"term": term, "alpha": ALPHA.get(term, 0.0), "modes": ["sum"]} for term in TERMS]
    continuous_settings = {name: value for name, value in settings.items() if name != "num_codes"} | CONTINUOUS
    return {
        "discrete": {**discrete, "settings": settings, "hybrid": HYBRID, "runs": runs},
        "continuous": {**discrete, "model": "continuous", "settings": continuous_settings, "hybrid": HYBRID, "runs": runs},
    }


def gemm_gflops() -> float:
    """A 1024^3 fp32 matmul's rate on the current threads, best of 5 blocks of 10."""
    a, b = torch.randn(GEMM, GEMM), torch.randn(GEMM, GEMM)
    a @ b
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(10):
            a @ b
        best = min(best, (time.perf_counter() - started) / 10)
    return 2 * GEMM**3 / best / 1e9


def step_rate(paths: dict, folder: Path) -> tuple[float, float, float]:
    """(GFLOP per raw-mean step, ms per step, the 1024^3 matmul's GFLOP/s), on the default's model and batches."""
    config = pilot_train_config(paths, folder / "step", term="raw", mode="mean")
    inputs = load_inputs(config)
    variant = Variant(config, inputs)
    batches = scheduled_batches(config, inputs, 10)
    with FlopCounterMode(display=False) as counter:
        variant.block(batches[:1])
    flops = counter.get_total_flops()
    variant.block(batches)  # warm-up: allocator, optimiser state
    step_s = statistics.median(variant.block(batches) for _ in range(5)) / len(batches)
    return flops / 1e9, step_s * 1e3, gemm_gflops()


def run_seconds(paths: dict, folder: Path, steps: int) -> dict[tuple[str, str], float]:
    """Setup, loop and evaluation seconds of one run per (family, term)."""
    inputs = {name: value for name, value in paths.items() if name != "reference_dir"}
    seconds = {}
    for spec in expand_grid(families(steps), seeds=1, references=1):
        run_dir = folder / spec.family / spec.term
        config = spec.train_config(**inputs, reference=f"{paths['reference_dir']}/{spec.mode}.json", run_dir=str(run_dir))
        train([config], chunk_training="sequential")
        timing = json.loads((run_dir / "metadata.json").read_text())["timing"]
        seconds[spec.family, spec.term] = timing["setup_s"] + timing["train_loop_s"] + timing["evaluation_s"]
        progress(f"{spec.family} {spec.term}: {seconds[spec.family, spec.term]:.1f} s")
    return seconds


def process_start() -> float:
    """Seconds to start Python and import the trainer's module (what every training job pays before its setup)."""
    walls = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import experiments.synthetic_sequences.training.train_disentangled"], check=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def projected_hours(seconds: dict[tuple[str, str], float], start: float, per_process: int) -> float:
    """Wall hours of the note's pilot on CORES cores at `per_process` runs per training process."""
    cpu = sum(
        arms * RUNS_PER_ARM * (seconds[family, term] + start / per_process)
        for family in ("discrete", "continuous")
        for term, arms in PILOT_ARMS.items()
    )
    return cpu / CORES / 3600


def measure(steps: int = 400) -> BenchResult:
    torch.set_num_threads(1)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        gflop, step_ms, gemm = step_rate(paths, Path(tmp))
        seconds = run_seconds(paths, Path(tmp), steps)
    start = process_start()
    step_gflops = gflop / (step_ms / 1e3)
    figures = [
        Figure(
            "run cost",
            "raw-mean step FLOP rate / 1-thread 1024^3 matmul rate",
            100 * step_gflops / gemm,
            "%",
            STEP_TARGET,
            note=f"{gflop:.3f} GFLOP in {step_ms:.1f} ms: {step_gflops:.1f} GFLOP/s; matmul {gemm:.1f} GFLOP/s",
        ),
        Figure("run cost", "process start (Python and the trainer's imports)", start, "s"),
    ]
    for family in ("discrete", "continuous"):
        figures += [Figure("run cost", f"{family} {term}: one run, {steps} steps", seconds[family, term], "s") for term in TERMS]
    for per_process in (1, SEEDS_PER_PROCESS):
        figures.append(
            Figure(
                "run cost",
                f"the note's pilot, 20 arms x {RUNS_PER_ARM} runs on {CORES} cores, {per_process} run(s) per process",
                projected_hours(seconds, start, per_process) * 60,
                "min",
                note="projected from the figures above; z-free stage and tables not included",
            )
        )
    return BenchResult(f"python -m bench.term_costs --steps {steps}", figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    print_result(measure(parser.parse_args().steps))


if __name__ == "__main__":
    main()
