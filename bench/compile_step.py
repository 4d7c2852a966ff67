"""A whole-step torch.compile of the default discrete step: what compiling costs a process, and what it saves a step
(issue: the step near its own limit).

    python -m bench.compile_step [--steps 60] [--threads 1]

Each variant trains in a process of its own from the same initial weights on the same batches, so that what it pays
before its first step is what a run's process would pay:
  eager, 4 length groups   the trainer's step as it is (the reference for every ratio);
  eager, 1 length group    the padding a compiled step takes on (the groups' sizes are data: each group would break
                           the graph);
  compiled, cold cache     torch.compile (inductor, dynamic shapes) of the forward pass and the objective, with 1
                           length group, the Gumbel noise drawn eagerly beforehand from the step's generator; backward
                           through the compiled graph, the optimiser eager; in a process whose inductor cache is empty;
  compiled, warm cache     the same in a later process, which finds the first one's compiled code on disk (inductor's
                           FX graph cache and AOTAutograd cache).
Figures: seconds to the end of the first step (compilation included); the median step after the first 10 (the
compiled steps recompile once when the batch's length changes shape); the steps it would take to repay the first
steps' excess, against a default run's steps; the largest difference of the losses from eager's with 4 groups.
The process times are single samples: read them beside the shares of bench.step, on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import BenchResult, Figure, print_result, progress

VARIANTS = {  # name -> (compiled, length groups, inductor cache: None, "cold" or "warm")
    "eager, 4 length groups": (False, 4, None),
    "eager, 1 length group": (False, 1, None),
    "compiled, cold cache": (True, 1, "cold"),
    "compiled, warm cache": (True, 1, "warm"),
}
SETTLED = 10  # steps left out of the median: the first, and the recompilation when a batch's shape first changes


def train(compiled: bool, length_groups: int, steps: int, threads: int) -> dict:
    """One process's steps: seconds per step and the loss of each."""
    import torch

    from bench.common import pilot_train_config, prepare_run_inputs, scheduled_batches
    from core.disentanglement.batching import step_generator
    from core.disentanglement.training import optimisation_step
    from experiments.synthetic_sequences.training.cvae_run import resolve_objective
    from experiments.synthetic_sequences.training.inputs import load_inputs
    from experiments.synthetic_sequences.training.model_setup import initial_model, parameter_groups
    from experiments.synthetic_sequences.training.train_step import objective_parts

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        config = pilot_train_config(paths, Path(tmp) / "run").with_settings(length_groups=length_groups)
        inputs = load_inputs(config)
        batches = scheduled_batches(config, inputs, steps)
    model = initial_model(config, inputs)
    groups = parameter_groups(model.named_parameters(), config)
    optimizer = torch.optim.AdamW(groups, lr=config.optim.lr, weight_decay=config.optim.weight_decay)
    spec = resolve_objective(config, inputs)

    def loss_of(batch, base, noise):
        return objective_parts(model(batch, noise=noise), base, batch.mask, spec)[0]

    step_loss = torch.compile(loss_of, dynamic=True) if compiled else loss_of
    model.train()
    seconds, losses = [], []
    for step, (batch, base) in enumerate(batches):
        started = time.perf_counter()
        noise = model.noise(batch.y.shape[0], step_generator(config.optim.seed, step, "cpu"))
        loss = step_loss(batch, base, noise)
        optimisation_step(model.parameters(), optimizer, loss, {"loss": loss.item()}, config.optim.grad_clip)
        seconds.append(time.perf_counter() - started)
        losses.append(loss.item())
    return {"seconds": seconds, "losses": losses, "run_steps": config.optim.steps}


def run_variant(name: str, steps: int, threads: int, cache_dir: Path) -> dict:
    """The variant in a fresh process (its inductor cache in `cache_dir`); its whole wall time beside its steps'."""
    compiled, length_groups, _ = VARIANTS[name]
    progress(name)
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    command = [sys.executable, "-m", "bench.compile_step", "--worker", str(int(compiled)), str(length_groups)]
    command += ["--steps", str(steps), "--threads", str(threads)]
    started = time.perf_counter()
    output = subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout
    return {**json.loads(output.splitlines()[-1]), "process": time.perf_counter() - started}


def measure(steps: int = 60, threads: int = 1) -> BenchResult:
    if steps <= SETTLED:
        raise ValueError(f"--steps must be more than {SETTLED}, the steps left out of the median")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        results = {name: run_variant(name, steps, threads, Path(cache)) for name in VARIANTS}
    eager = results["eager, 4 length groups"]
    eager_step = statistics.median(eager["seconds"][SETTLED:])
    figures = []
    for name, result in results.items():
        settled = statistics.median(result["seconds"][SETTLED:])
        figures.append(Figure("compile", f"{name}: seconds to the end of step 1", result["seconds"][0], "s"))
        figures.append(Figure("compile", f"{name}: median step / eager's", settled / eager_step, "x", note=f"{settled * 1e3:.1f} ms"))
        figures.append(Figure("compile", f"{name}: process wall (data and z-free set-up included)", result["process"], "s"))
        if result is eager:
            continue
        difference = max(abs(a - b) for a, b in zip(result["losses"], eager["losses"], strict=True))
        excess = sum(result["seconds"][:SETTLED]) - SETTLED * settled - (sum(eager["seconds"][:SETTLED]) - SETTLED * eager_step)
        saved = eager_step - settled
        repaid = excess / saved if saved > 0 else float("inf")
        run_steps = result["run_steps"]
        note = f"a {run_steps}-step run: {'never' if saved <= 0 else 'repaid' if repaid <= run_steps else 'not repaid'}"
        figures.append(Figure("compile", f"{name}: steps to repay its first {SETTLED} steps' excess", repaid, "steps", note=note))
        figures.append(Figure("compile", f"{name}: largest |loss - eager's| over {steps} steps", difference, "nats"))
    return BenchResult(f"python -m bench.compile_step --steps {steps} --threads {threads}", figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", nargs=2, type=int, metavar=("COMPILED", "LENGTH_GROUPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(train(bool(args.worker[0]), args.worker[1], args.steps, args.threads)))
    else:
        print_result(measure(args.steps, args.threads))


if __name__ == "__main__":
    main()
