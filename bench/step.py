"""The default discrete training step: where its time goes, and what an optimiser candidate saves (issue: the step
near its own limit).

    python -m bench.step [--rounds 20] [--steps 4] [--threads 1] [--profile-steps 20]

Profile: torch.profiler over --profile-steps steps of the trainer's own step (train_step.train_step) on the default
pilot's discrete model and batches, after a warm-up; each op's self CPU time, summed into matrix products, attention,
GELU, the optimiser and everything else, as shares of the total (shares, not milliseconds, survive a busy machine);
and the step's matrix products alone: every mm/addmm call of --steps profiled steps replayed with its shapes.

A/B: each candidate trains its own copy of the same initial model on the same batches; every round times a block of
--steps steps of each in a shuffled order, and a candidate's figure is the median over rounds of its block time over
the baseline's in the same round. A second baseline copy (the control) shows the resolution. After the rounds, each
candidate's weights are compared with the baseline's: "bit for bit" or the largest absolute difference.
Candidates: AdamW's multi-tensor (`foreach=True`) and fused CPU kernel (`fused=True`) against its default, which on
CPU updates one tensor at a time; the batch decoded in 2 length groups or 1 (fewer, larger matrix products over more
padding) against the default's 4.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
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
    progress,
    ratio_figure,
    scheduled_batches,
)
from core.disentanglement.batching import step_generator
from core.disentanglement.training import optimisation_step
from experiments.synthetic_sequences.training.cvae_run import resolve_objective
from experiments.synthetic_sequences.training.inputs import load_inputs
from experiments.synthetic_sequences.training.model_setup import initial_model, parameter_groups
from experiments.synthetic_sequences.training.train_step import Objective, objective

# name -> (AdamW options, trainer settings changed)
CANDIDATES = {
    "baseline": ({}, {}),
    "control (baseline again)": ({}, {}),
    "AdamW foreach": ({"foreach": True}, {}),
    "AdamW fused": ({"fused": True}, {}),
    "2 length groups": ({}, {"length_groups": 2}),
    "1 length group": ({}, {"length_groups": 1}),
}
# op name fragments -> the profile's categories, first match wins
CATEGORIES = (
    ("matrix products", ("mm", "addmm", "bmm", "matmul", "linear")),
    ("attention", ("attention", "sdpa", "flash")),
    ("GELU", ("gelu",)),
    ("optimiser", ("adam", "_foreach", "lerp", "addcdiv", "addcmul", "sqrt")),
)


def train_step(model, optimizer, batch, base_nll, *, generator, grad_clip: float, spec: Objective) -> dict[str, float]:
    """One step outside the training loop (benchmarks, tests): forward, objective, then the loop's own optimiser
    step, which raises NonFiniteLoss before touching the weights."""
    model.train()
    loss, metrics = objective(model(batch, generator), base_nll, batch.mask, spec)
    metrics["grad_norm"] = optimisation_step(model.parameters(), optimizer, loss, metrics, grad_clip)
    return metrics


class Candidate:
    """A model, its optimiser (AdamW with `options`) and its step, started from the shared initial weights."""

    def __init__(self, config, inputs, options: dict, settings: dict):
        config = config.with_settings(**settings) if settings else config
        self.config = config
        self.model = initial_model(config, inputs)
        groups = parameter_groups(self.model.named_parameters(), config)
        self.optimizer = torch.optim.AdamW(groups, lr=config.optim.lr, weight_decay=config.optim.weight_decay, **options)
        self.spec = resolve_objective(config, inputs)
        self.step = 0

    def block(self, batches) -> float:
        started = time.perf_counter()
        for batch, base in batches:
            generator = step_generator(self.config.optim.seed, self.step, "cpu")
            train_step(self.model, self.optimizer, batch, base, generator=generator, grad_clip=self.config.optim.grad_clip, spec=self.spec)
            self.step += 1
        return time.perf_counter() - started


def category(name: str) -> str:
    lowered = name.lower()
    return next((label for label, fragments in CATEGORIES if any(fragment in lowered for fragment in fragments)), "other")


def profile_shares(candidate: Candidate, batches) -> dict[str, float]:
    """Self CPU time per category, as a share of the total, over the batches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        candidate.block(batches)
    totals: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        totals[category(event.key)] += event.self_cpu_time_total
    whole = sum(totals.values())
    return {label: value / whole for label, value in sorted(totals.items(), key=lambda item: -item[1])}


def matrix_product_floor(candidate: Candidate, batches, rounds: int = 5) -> float:
    """Seconds per step of the step's matrix products alone: every `mm` and `addmm` call of the profiled steps
    (forward and backward), replayed with its own shapes on random tensors, nothing else in between; the median of
    `rounds` replays."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        candidate.block(batches)
    calls = [
        (getattr(torch, event.name.removeprefix("aten::")), [torch.randn(shape) for shape in event.input_shapes if shape])
        for event in prof.events()
        if event.name in ("aten::mm", "aten::addmm")
    ]
    replays = []
    for _ in range(rounds):
        started = time.perf_counter()
        for function, arguments in calls:
            function(*arguments)
        replays.append(time.perf_counter() - started)
    return float(np.median(replays)) / len(batches)


def weight_difference(a: torch.nn.Module, b: torch.nn.Module) -> str:
    with torch.no_grad():
        largest = max(float((x - y).abs().max()) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    return "bit for bit" if largest == 0 else f"max |difference| {largest:.2e}"


def measure(rounds: int = 20, steps: int = 4, threads: int = 1, profile_steps: int = 20) -> BenchResult:
    torch.set_num_threads(threads)
    command = f"python -m bench.step --rounds {rounds} --steps {steps} --threads {threads} --profile-steps {profile_steps}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        config = pilot_train_config(paths, Path(tmp) / "run")
        inputs = load_inputs(config)
        candidates = {name: Candidate(config, inputs, *candidate) for name, candidate in CANDIDATES.items()}
        batches = scheduled_batches(config, inputs, max(steps, profile_steps))
    block = batches[:steps]
    progress(f"profile of {profile_steps} steps")
    profiled = Candidate(config, inputs, {}, {})
    profiled.block(batches[:steps])  # warm-up
    shares = profile_shares(profiled, batches[:profile_steps])
    floor = matrix_product_floor(profiled, batches[:steps])
    times = interleaved_times({name: partial(candidate.block, block) for name, candidate in candidates.items()}, rounds)
    baseline = times["baseline"]
    figures = [Figure("step", "default discrete step (batch 32)", float(np.median(baseline)) / steps * 1e3, "ms")]
    figures += [Figure("step profile", f"share of self CPU time: {label}", share * 100, "%") for label, share in shares.items()]
    step_ms = figures[0].value
    note = f"{floor / (step_ms / 1e3) * 100:.0f}% of the step"
    figures.append(Figure("step profile", "its mm/addmm calls alone, replayed with their shapes", floor * 1e3, "ms", note=note))
    for name in list(CANDIDATES)[1:]:
        same = weight_difference(candidates[name].model, candidates["baseline"].model)
        note = f"weights after {candidates[name].step} steps: {same}"
        figures.append(ratio_figure("step A/B", f"step {name} / step baseline", times[name], baseline, note=note))
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4, help="training steps per timed block")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--profile-steps", type=int, default=20)
    args = parser.parse_args()
    print_result(measure(args.rounds, args.steps, args.threads, args.profile_steps))


if __name__ == "__main__":
    main()
