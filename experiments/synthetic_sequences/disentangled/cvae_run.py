"""One CVAE training run: its inputs checked, its resume state, the shared training loop, evaluation, artifacts.

The run directory receives run_config.json, metrics.jsonl (train steps and validation evaluations), model.pt,
eval.json and, last, metadata.json (which marks the run finished). A partial run leaves resume.pt, written every
`checkpoint_every` steps and on SIGTERM / SIGUSR1 (what Slurm sends before a time limit); rerunning with the same
run directory, settings and inputs resumes from it and ends with the same numbers as an uninterrupted run.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from core.disentanglement.artifacts import save_torch, sha256_file, write_json
from core.disentanglement.batching import BatchSchedule, step_generator
from core.disentanglement.config import NORMALISED_TERMS
from core.disentanglement.training import LoopSchedule, NonFiniteLoss, TrainingLoop
from experiments.synthetic_sequences.disentangled.config import TrainConfig
from experiments.synthetic_sequences.disentangled.curves import train_diagnostics
from experiments.synthetic_sequences.disentangled.evaluate import evaluate
from experiments.synthetic_sequences.disentangled.grid import RESUME_FILE, RUN_OUTPUTS
from experiments.synthetic_sequences.disentangled.inputs import RunInputs, input_hashes, load_inputs
from experiments.synthetic_sequences.disentangled.model_setup import build_optimizer, initial_model, resolve_device
from experiments.synthetic_sequences.disentangled.run_lock import run_lock
from experiments.synthetic_sequences.disentangled.run_state import (
    METRICS_FILE,
    PARTIAL_METRICS_FILE,
    MetricsLog,
    StopRequested,
    clear_outputs,
    git_commit,
    load_resume,
    now,
    save_resume,
)
from experiments.synthetic_sequences.disentangled.train_step import Objective, objective
from experiments.synthetic_sequences.disentangled.validation import EVAL_BATCH, split_diagnostics, validation_metrics


def resolve_objective(config: TrainConfig, inputs: RunInputs) -> Objective:
    """The run's loss with its control applied: scale multiplies the reconstruction term, balance beta, by the mean
    supervised token count of the train split."""
    scale_factor, beta_factor = config.objective.control_factors(inputs.mean_train_tokens)
    reconstruction = replace(config.reconstruction, reconstruction_scale=config.reconstruction.reconstruction_scale * scale_factor)
    return Objective(reconstruction, inputs.reference["c_base"], config.objective.beta * beta_factor, config.objective.auxiliary_weights)


def hybrid_scale_note(config: TrainConfig) -> str | None:
    """A one-line notice when a hybrid mixes terms divided by a reference scale with terms that are not."""
    parts = set(config.reconstruction.hybrid_coefficients)
    normalised, unnormalised = sorted(parts & NORMALISED_TERMS), sorted(parts - NORMALISED_TERMS)
    if not (normalised and unnormalised):
        return None
    return (
        f"note: the hybrid mixes {', '.join(unnormalised)} (in {config.mode} units) with {', '.join(normalised)} "
        "(divided by a reference scale): their relative weight differs between mean and sum by about the mean token count"
    )


class CVAETask:
    """The CVAE's part of the training loop: batches, the objective with beta's warmup, the metrics log, validation
    points, resume checkpoints and the exit on a signal."""

    def __init__(
        self, model, optimizer, config: TrainConfig, inputs: RunInputs, spec: Objective, device, log: MetricsLog, inputs_sha256: dict
    ):
        self.model, self.optimizer, self.config, self.inputs, self.device, self.log = model, optimizer, config, inputs, device, log
        self.full_beta, self.spec = spec.beta, spec
        optim = config.optim
        self.schedule = BatchSchedule(inputs.batchers["train"].lengths, optim.batch_size, optim.seed, optim.batching)
        self.val_diagnostics = split_diagnostics(inputs.base["val"], config.mode, config.reconstruction.token_weight_alpha)
        self.stop = StopRequested()
        self.resume_path = config.run.path / RESUME_FILE
        self.inputs_sha256 = inputs_sha256
        self.last_saved: int | None = None

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        warmup = self.config.objective.beta_warmup_steps
        self.spec = self.spec.with_beta(self.full_beta * min(1.0, step / warmup) if warmup else self.full_beta)
        index = self.schedule(step)
        batch = self.inputs.batchers["train"].batch(index).to(self.device)
        base_nll = self.inputs.base["train"][0][index, : batch.mask.shape[1]].to(self.device)
        output = self.model(batch, step_generator(self.config.optim.seed, step, self.device))
        return objective(output, base_nll, batch.mask, self.spec)

    def logged(self, step: int, metrics: dict[str, float]) -> None:
        self.log.append({"split": "train", "step": step, "lr": self.optimizer.param_groups[0]["lr"], "beta": self.spec.beta, **metrics})

    def evaluate(self, step: int) -> None:
        point = validation_metrics(self.model, self.inputs, self.spec, self.config.optim.seed, self.device)
        self.log.append({"split": "val", "step": step, **point, **self.val_diagnostics})

    def progress(self, step: int, metrics: dict[str, float]) -> str:
        return f"loss {metrics['loss']:.4f} recon[{self.config.mode}] {metrics['reconstruction_loss']:.4f} kl {metrics['kl']:.4f}"

    def after(self, step: int) -> None:
        if step % self.config.run.checkpoint_every == 0 or self.stop.signal is not None:
            self.save(step)
        if self.stop.signal is not None and step < self.config.optim.steps:
            print(f"received signal {self.stop.signal} at step {step}: state saved to {self.resume_path}; rerun to resume", file=sys.stderr)
            sys.exit(128 + self.stop.signal)

    def save(self, step: int) -> None:
        settings = self.config.training_settings()
        save_resume(self.resume_path, self.model, self.optimizer, step, self.log.rows, settings, self.inputs_sha256)
        self.last_saved = step

    def kept(self) -> str:
        if self.last_saved is None:
            return "no checkpoint was written yet"
        return f"the last good state (step {self.last_saved}) is kept in {self.resume_path}"


def start_metadata(config: TrainConfig, inputs: RunInputs, spec: Objective, device, start_step: int, model, inputs_sha256: dict) -> dict:
    return {
        "reconstruction_loss_token_aggregation_mode": config.mode.value,
        "reference": {"path": config.run.reference, "mode": inputs.reference["mode"], "c_base": inputs.reference["c_base"]},
        "inputs_sha256": inputs_sha256,
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "seed": config.optim.seed,
        "device": str(device),
        "started": now(),
        "resumed_from_step": start_step or None,
        "parameters": sum(p.numel() for p in model.parameters()),
        "resolved": {
            "controls": config.objective.controls,
            "mean_train_tokens": inputs.mean_train_tokens,
            "reconstruction_scale": spec.reconstruction.reconstruction_scale,
            "beta": spec.beta,
        },
    }


def train(config: TrainConfig) -> dict:
    """Train, evaluate and write one run; returns its evaluation (eval.json)."""
    called = time.perf_counter()
    device = resolve_device(config.run.device)
    inputs = load_inputs(config)  # every check, before anything is written
    inputs_sha256 = input_hashes(config)
    model = initial_model(config, inputs).to(device)
    optimizer = build_optimizer(model, config)
    if note := hybrid_scale_note(config):
        print(note, file=sys.stderr, flush=True)

    run_dir = config.run.path
    run_dir.mkdir(parents=True, exist_ok=True)
    with run_lock(run_dir):  # one trainer per run directory
        resumed = load_resume(run_dir / RESUME_FILE, config.training_settings(), inputs_sha256)
        clear_outputs(run_dir)
        start_step = 0
        if resumed is not None:
            model.load_state_dict(resumed["model"])
            optimizer.load_state_dict(resumed["optimizer"])
            start_step = resumed["step"]
            print(f"resuming {run_dir} from step {start_step}", file=sys.stderr, flush=True)
        log = MetricsLog(run_dir / PARTIAL_METRICS_FILE, keep=resumed["rows_logged"] if resumed is not None else 0)
        spec = resolve_objective(config, inputs)
        metadata = start_metadata(config, inputs, spec, device, start_step, model, inputs_sha256)
        write_json(config.to_dict(), run_dir / "run_config.json")
        write_json(metadata, run_dir / "metadata.json")

        task = CVAETask(model, optimizer, config, inputs, spec, device, log, inputs_sha256)
        task.last_saved = start_step if resumed is not None else None
        optim, run = config.optim, config.run
        loop = TrainingLoop(
            model, optimizer, LoopSchedule(optim.steps, optim.lr, optim.warmup_steps, optim.grad_clip, run.eval_every, run.log_every)
        )
        try:
            loop.run(task, start_step)
        except NonFiniteLoss as err:
            raise NonFiniteLoss(f"{err}; {task.kept()}") from err
        timing = {
            "setup_s": loop.started - called,
            "train_loop_s": loop.elapsed(),  # this process's steps, with their validation passes and checkpoints
            "validation_s": loop.evaluation_s,  # the learning curves' share of train_loop_s
            "train_steps": optim.steps - start_step,
        }
        return finish(config, model, inputs, device, log, metadata, timing)


def finish(config: TrainConfig, model, inputs: RunInputs, device, log: MetricsLog, metadata: dict, timing: dict) -> dict:
    """Test-split evaluation and the run's artifacts; metadata.json last, with the outputs' hashes, marks it finished."""
    evaluation_started = time.perf_counter()
    evaluation = evaluate(
        model,
        inputs.records["test"],
        inputs.batchers["test"],
        seed=config.optim.seed,
        prompts_per_code=config.run.eval_prompts_per_code,
        batch_size=EVAL_BATCH,
        device=device,
    )
    evaluation.update(
        model=config.model.model,
        reconstruction_term=config.reconstruction.term,
        reconstruction_loss_token_aggregation_mode=config.mode.value,
    )
    run_dir: Path = config.run.path
    save_torch({"model": model.state_dict(), "run_config": config.to_dict(), "max_len": model.decoder.config.max_len}, run_dir / "model.pt")
    rows = log.finish(run_dir / METRICS_FILE)
    write_json(evaluation, run_dir / "eval.json")
    timing["evaluation_s"] = time.perf_counter() - evaluation_started
    diagnostics = train_diagnostics([row for row in rows if row["split"] == "train"])
    outputs_sha256 = {name: sha256_file(run_dir / name) for name in RUN_OUTPUTS if name != "metadata.json"}
    finished = {"finished": now(), "timing": timing, "train_diagnostics": diagnostics, "outputs_sha256": outputs_sha256}
    write_json({**metadata, **finished}, run_dir / "metadata.json")
    (run_dir / RESUME_FILE).unlink(missing_ok=True)
    return evaluation
