"""Training throughput of the real trainer against a bare PyTorch loop over the same model and data.

    python -m bench.trainer [--threads 1]

The trainer runs one default-pilot run (discrete model, raw mean, its steps,
batch size, validation and checkpoint intervals) in-process; its train-loop
time (every step with its metrics, validation passes, checkpoints and logging)
comes from the run's metadata.json timing. The bare loop trains a fresh copy of
the same model from the same seed on the same batches, collated beforehand,
with the same objective (reconstruction term + beta x KL), gradient clipping
and AdamW, and nothing else. The bare loop is timed before and after the
trainer and averaged. Targets: the trainer's loop, less the validation passes
that make the learning curves, at least 0.9 of the bare loop's steps/s; those
passes, which the bare loop does not do, at most 10% of the loop. The whole
loop's ratio is reported beside them.
Threads default to 1, as each pilot training job gets one.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from bench.common import BenchResult, Figure, pilot_train_config, prepare_run_inputs, print_result, progress, scheduled_batches
from core.disentanglement.batching import step_generator
from core.disentanglement.losses import reconstruction_terms
from experiments.synthetic_sequences.training.cvae_run import train
from experiments.synthetic_sequences.training.inputs import RunInputs, load_inputs
from experiments.synthetic_sequences.training.model_setup import initial_model


def bare_loop(config, inputs: RunInputs, batches: list) -> float:
    """Seconds for plain forward / loss / backward / clip / AdamW steps over `batches`."""
    model = initial_model(config, inputs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.optim.lr, weight_decay=config.optim.weight_decay)
    reconstruction, c_base = config.reconstruction, inputs.scale["c_base"]
    model.train()
    started = time.perf_counter()
    for step, (batch, base) in enumerate(batches):
        output = model(batch, step_generator(config.optim.seed, step, "cpu"))
        terms = reconstruction_terms(
            output.token_nll,
            base,
            batch.mask,
            mode=reconstruction.mode,
            alpha=reconstruction.token_weight_alpha,
            c_base=c_base,
            epsilon=reconstruction.epsilon,
            sample_weights=output.sample_weights,
        )
        loss = terms[reconstruction.term] + config.objective.beta * output.kl
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip)
        optimizer.step()
    return time.perf_counter() - started


def measure(threads: int = 1) -> BenchResult:
    torch.set_num_threads(threads)
    command = f"python -m bench.trainer --threads {threads}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        config = pilot_train_config(paths, Path(tmp) / "run")
        inputs = load_inputs(config)
        steps, run = config.optim.steps, config.run
        batches = scheduled_batches(config, inputs, steps)
        progress(f"bare loop, {steps} steps")
        bare = [bare_loop(config, inputs, batches)]
        progress(f"trainer, {steps} steps (eval every {run.eval_every}, checkpoint every {run.checkpoint_every})")
        trainer_started = time.perf_counter()
        train([config])
        trainer_wall = time.perf_counter() - trainer_started
        timing = json.loads((run.path / "metadata.json").read_text())["timing"]
        progress(f"bare loop, {steps} steps")
        bare.append(bare_loop(config, inputs, batches))
    bare_s = sum(bare) / len(bare)
    figures = [
        Figure(
            "trainer",
            "trainer steps/s (loop less its validation passes) / bare-loop steps/s",
            bare_s / (timing["train_loop_s"] - timing["validation_s"]),
            "x",
            ">= 0.9",
        ),
        Figure("trainer", "trainer steps/s (whole loop) / bare-loop steps/s", bare_s / timing["train_loop_s"], "x"),
        Figure("trainer", f"bare loop, {steps} steps", bare_s, "s", note=f"before {bare[0]:.1f} s, after {bare[1]:.1f} s"),
        Figure("trainer", f"trainer loop, {steps} steps", timing["train_loop_s"], "s", note="steps, validation, checkpoints"),
        Figure(
            "trainer",
            f"validation passes (learning curves, {steps // run.eval_every} points): share of the loop",
            100 * timing["validation_s"] / timing["train_loop_s"],
            "%",
            "<= 10",
        ),
        Figure("trainer", "trainer final test evaluation", timing["evaluation_s"], "s", note="once per run, after training"),
        Figure("trainer", "trainer whole run (inputs, loop, evaluation)", trainer_wall, "s"),
    ]
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print_result(measure(args.threads))


if __name__ == "__main__":
    main()
