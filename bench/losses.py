"""Loss overhead: a CVAE training step optimising each reconstruction term, against the same step optimising raw mean.

    python -m bench.losses [--rounds 20] [--steps 4] [--threads 2]

The step is the trainer's own (train_step.train_step) on the default pilot's
discrete model and batches, with real z-free scores b and c_base. Each variant
has its own copy of the same initial model. Timing is interleaved: every round
times a block of --steps steps of each variant in a shuffled order, and a
variant's figure is the median over rounds of its block time over raw mean's
block time in the same round, so drift on a shared machine cancels. A second
raw-mean model timed the same way (the control) shows how finely the machine
resolves a ratio. Target: every term under 1.03.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bench.common import (
    BenchResult,
    Figure,
    interleaved_times,
    pilot_train_config,
    prepare_run_inputs,
    print_result,
    ratio_figure,
    scheduled_batches,
)
from bench.step import train_step
from core.disentanglement.batching import step_generator
from experiments.synthetic_sequences.training.cvae_run import resolve_objective
from experiments.synthetic_sequences.training.inputs import load_inputs
from experiments.synthetic_sequences.training.model_setup import build_optimizer, initial_model

BASELINE = ("raw", "mean", 0.0)
CONTROL = "raw mean (control: the baseline step again)"
TERMS = (
    ("tokcc", "mean", 1.0),
    ("tokcc", "sum", 1.0),
    ("hybrid", "mean", 1.0),
    ("hybrid", "sum", 1.0),
    ("ex", "mean", 0.0),
    ("ex", "sum", 0.0),
)
HYBRID = {"tokcc": 0.5, "dist": 0.5}
TARGET = "< 1.03"


class Variant:
    """One objective's model, optimiser and step settings, started from the same weights as every other."""

    def __init__(self, config, inputs):
        self.config = config
        self.model = initial_model(config, inputs)
        self.optimizer = build_optimizer(self.model.named_parameters(), config)
        self.spec = resolve_objective(config, inputs)

    def block(self, batches) -> float:
        started = time.perf_counter()
        for step, (batch, base) in enumerate(batches):
            train_step(
                self.model,
                self.optimizer,
                batch,
                base,
                generator=step_generator(self.config.optim.seed, step, "cpu"),
                grad_clip=self.config.optim.grad_clip,
                spec=self.spec,
            )
        return time.perf_counter() - started


def measure(rounds: int = 20, steps: int = 4, threads: int = 2) -> BenchResult:
    torch.set_num_threads(threads)
    command = f"python -m bench.losses --rounds {rounds} --steps {steps} --threads {threads}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        base_configs = {mode: pilot_train_config(paths, Path(tmp) / "run", term="raw", mode=mode) for mode in ("mean", "sum")}
        inputs = {mode: load_inputs(config) for mode, config in base_configs.items()}  # the same records, each mode's c_base
        variants: dict[str, Variant] = {}
        for term, mode, alpha in (BASELINE, BASELINE, *TERMS):
            config = base_configs[mode].with_settings(
                reconstruction_term=term,
                token_weight_alpha=alpha,
                hybrid_coefficients=HYBRID if term == "hybrid" else {},
            )
            name = CONTROL if f"{term} {mode}" in variants else f"{term} {mode}"
            variants[name] = Variant(config, inputs[mode])
        batches = scheduled_batches(base_configs["mean"], inputs["mean"], steps)

    times = interleaved_times({name: partial(variant.block, batches) for name, variant in variants.items()}, rounds)
    baseline = times["raw mean"]
    step_ms = float(np.median(baseline)) / steps * 1e3
    figures = [
        ratio_figure("loss overhead", f"step {name} / step raw mean", times[name], baseline, TARGET)
        for name in (CONTROL, *(f"{term} {mode}" for term, mode, _ in TERMS))
    ]
    figures.append(Figure("loss overhead", "raw-mean training step (pilot model, batch 32)", step_ms, "ms"))
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4, help="training steps per timed block")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print_result(measure(args.rounds, args.steps, args.threads))


if __name__ == "__main__":
    main()
