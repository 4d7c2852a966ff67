"""A chunk of one arm's seeds trained in lockstep: its part of the training loop.

Every seed keeps what its own run would have: its batch order (a BatchSchedule of its seed), its sampling noise
(step_generator of its seed), its metrics log and its validation points, computed from its own weights. One
forward and one backward pass serve them all (core.disentanglement.lockstep). A seed whose loss turns non-finite
stops alone: its weights stay at its last good step and the other seeds go on. With stop_at_take_up the chunk ends
at the validation point where every seed still training has confirmed its take-up (arms.CONFIRMING_EVALUATIONS points
in a row at or above arms.TAKEUP_THRESHOLD): one seed alone ends at its own.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from core.disentanglement.batching import BatchSchedule, SequenceBatch, step_generator
from core.disentanglement.lockstep import SeedStack
from core.disentanglement.masking import supervised_counts
from core.disentanglement.training import NonFiniteLoss, non_finite_loss
from experiments.synthetic_sequences.arms import CONFIRMING_EVALUATIONS, TAKEUP_THRESHOLD, next_streak
from experiments.synthetic_sequences.run_layout import chunk_resume_file
from experiments.synthetic_sequences.training.evaluate import NonFinitePosterior
from experiments.synthetic_sequences.training.inputs import RunInputs
from experiments.synthetic_sequences.training.run_state import MetricsLog, StopRequested, read_lines, save_resume
from experiments.synthetic_sequences.training.settings import TrainConfig
from experiments.synthetic_sequences.training.train_step import Objective, logged_metrics, objective_parts
from experiments.synthetic_sequences.training.validation import split_diagnostics, validation_metrics

MUTUAL_INFORMATION = "mutual_information"  # the validation point's I(x;z), which the take-up event reads


@dataclass
class Seed:
    """One seed of the chunk: its run's settings, batch order and metrics log, and the step its loss stopped at."""

    config: TrainConfig
    schedule: BatchSchedule
    log: MetricsLog
    stopped: int | None = None  # steps done when it stopped (its loss or validation posterior was not finite); its weights are theirs
    failure: str = ""
    streak: int = 0  # its latest validation points in a row at or above the take-up threshold

    @property
    def key(self) -> str:
        return str(self.config.optim.seed)


def chunk_description(seeds: list[Seed], job_seeds: list[int] | None) -> dict:
    """The seeds trained with a run in lockstep, and, where its job trains them one after another, the job's seeds."""
    described = {"seeds": [seed.config.optim.seed for seed in seeds], "training": "lockstep" if job_seeds is None else "sequential"}
    return described if job_seeds is None else {**described, "job_seeds": job_seeds}


def stack_batches(batches: list[SequenceBatch], pad: int) -> SequenceBatch:
    """The seeds' batches as one batch of [S, B, ...] fields, each padded to the chunk's longest sequence."""
    length, steps = max(b.tokens.shape[1] for b in batches), max(b.y.shape[1] for b in batches)

    def padded(t: torch.Tensor, width: int, value) -> torch.Tensor:
        return F.pad(t, (0, width - t.shape[1]), value=value)

    return SequenceBatch(
        tokens=torch.stack([padded(b.tokens, length, pad) for b in batches]),
        y_start=torch.stack([b.y_start for b in batches]),
        y=torch.stack([padded(b.y, steps, pad) for b in batches]),
        mask=torch.stack([padded(b.mask, steps, False) for b in batches]),
        index=torch.stack([b.index for b in batches]),
    )


class ChunkTask:
    """The chunk's part of the training loop: the seeds' batches and objective in one pass, per-seed clipping,
    stops, logs and validation points, the resume state and the exit on a signal."""

    def __init__(
        self, stack: SeedStack, plain, optimizer, seeds: list[Seed], inputs: RunInputs, spec: Objective, device, inputs_sha256: dict
    ):
        self.stack, self.plain, self.optimizer, self.seeds, self.inputs, self.device = stack, plain, optimizer, seeds, inputs, device
        self.inputs_sha256 = inputs_sha256
        self.full_beta, self.spec = spec.beta, spec
        config = seeds[0].config
        self.objective_settings, self.optim = config.objective, config.optim
        self.val_diagnostics = split_diagnostics(inputs.base["val"], config.mode, config.reconstruction.token_weight_alpha)
        self.frozen = {i: stack.seed_state(i) for i, seed in enumerate(seeds) if seed.stopped is not None}
        self.stop = StopRequested()
        self.last_saved: int | None = None

    def active(self) -> list[int]:
        return [i for i, seed in enumerate(self.seeds) if seed.stopped is None]

    def loss(self, step: int) -> tuple[torch.Tensor, list[dict]]:
        warmup = self.objective_settings.beta_warmup_steps
        self.spec = self.spec.with_beta(self.full_beta * min(1.0, step / warmup) if warmup else self.full_beta)
        batcher, (train_base, _) = self.inputs.batchers["train"], self.inputs.base["train"]
        batch = stack_batches([batcher.batch(seed.schedule(step)) for seed in self.seeds], batcher.special.pad)
        supervised_counts(batch.mask.flatten(0, 1))  # the check the mapped objective cannot make
        base = train_base[batch.index, : batch.mask.shape[-1]]  # [S, B, T]
        size, template = batch.index.shape[1], self.stack.templates["direct"]
        noises = [template.noise(size, step_generator(seed.config.optim.seed, step, self.device), self.device) for seed in self.seeds]
        noise = None if noises[0] is None else torch.stack(noises)
        spec = self.spec

        def seed_objective(model, tokens, y_start, y, mask, index, base_nll, seed_noise):
            return objective_parts(model(SequenceBatch(tokens, y_start, y, mask, index), noise=seed_noise), base_nll, mask, spec)

        fields = (batch.tokens, batch.y_start, batch.y, batch.mask, batch.index)
        losses, parts = self.stack.map(seed_objective, *(t.to(self.device) for t in fields), base.to(self.device), noise)
        names = list(parts)
        values = torch.stack([parts[name] for name in names], dim=1).tolist()  # [S, parts]: one read-back for all seeds
        metrics = [logged_metrics(dict(zip(names, row, strict=True))) for row in values]
        for i in self.active():
            if (message := non_finite_loss(metrics[i])) is not None:
                self.stop_seed(i, step, message)
        active = self.active()
        if not active:
            raise NonFiniteLoss("every seed of the chunk stopped on a non-finite loss")
        return losses[active].sum(), metrics

    def stop_seed(self, index: int, step: int, message: str) -> None:
        seed = self.seeds[index]
        seed.stopped, seed.failure = step, f"step {step}: {message}"
        self.frozen[index] = self.stack.seed_state(index)
        print(f"seed {seed.key} stopped at step {step} ({message}); its weights stay at step {step}, the others go on", file=sys.stderr)

    def optimise(self, loss: torch.Tensor, metrics: list[dict]) -> None:
        """Backward through the active seeds' summed objectives, each seed clipped by its own gradient norm, one AdamW
        step; a stopped seed's weights are put back."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norms = self.stack.clip_grad_norms_(self.optim.grad_clip).tolist()
        self.optimizer.step()
        for index, state in self.frozen.items():
            self.stack.load_seed_state(index, state)
        for i in self.active():
            metrics[i]["grad_norm"] = norms[i]

    def logged(self, step: int, metrics: list[dict]) -> None:
        rate = self.optimizer.param_groups[0]["lr"]
        for i in self.active():
            self.seeds[i].log.append({"split": "train", "step": step, "lr": rate, "beta": self.spec.beta, **metrics[i]})

    def seed_model(self, index: int) -> torch.nn.Module:
        """The plain model with seed `index`'s current weights."""
        self.plain.load_state_dict(self.stack.seed_state(index))
        return self.plain

    def evaluate(self, step: int) -> None:
        for i in self.active():
            seed = self.seeds[i]
            try:
                point = validation_metrics(self.seed_model(i), self.inputs, self.spec, seed.config.optim.seed, self.device)
            except NonFinitePosterior as err:  # the step's update left weights that no longer give a finite q
                self.stop_seed(i, step, f"validation: {err}")
                continue
            seed.log.append({"split": "val", "step": step, **point, **self.val_diagnostics})
            seed.streak = next_streak(seed.streak, point[MUTUAL_INFORMATION], TAKEUP_THRESHOLD)
        return self.confirmed_take_up()

    def confirmed_take_up(self) -> bool:
        """With stop_at_take_up: every seed still training has confirmed its take-up, so the chunk may end here."""
        active = self.active()
        ends = self.seeds[0].config.run.stop_at_take_up
        return ends and bool(active) and all(self.seeds[i].streak >= CONFIRMING_EVALUATIONS for i in active)

    def progress(self, step: int, metrics: list[dict]) -> str:
        active = self.active()
        if not active:
            return f"seeds 0/{len(self.seeds)}: every seed stopped"

        def mean(name: str) -> float:
            return sum(metrics[i][name] for i in active) / len(active)

        mode = self.seeds[0].config.mode
        figures = f"loss {mean('loss'):.4f} recon[{mode}] {mean('reconstruction_loss'):.4f} kl {mean('kl'):.4f}"
        return f"seeds {len(active)}/{len(self.seeds)}: {figures}"

    def after(self, step: int) -> None:
        if step % self.seeds[0].config.run.checkpoint_every == 0 or self.stop.signal is not None:
            self.save(step)
        if self.stop.signal is not None and step < self.optim.steps:
            print(f"received signal {self.stop.signal} at step {step}: state saved to {self.resume_path}; rerun to resume", file=sys.stderr)
            sys.exit(128 + self.stop.signal)

    @property
    def resume_path(self) -> Path:
        return resume_file(self.seeds)

    def save(self, step: int) -> None:
        stopped = {seed.key: seed.stopped for seed in self.seeds if seed.stopped is not None}
        rows = {seed.key: seed.log.rows for seed in self.seeds}
        save_resume(self.resume_path, step, self.stack, self.optimizer, stopped, rows, chunk_settings(self.seeds), self.inputs_sha256)
        self.last_saved = step


def open_log(seed: Seed, rows_logged: dict[str, int]) -> None:
    """The seed's metrics log, cut back to the rows its chunk's resume state logged, and its streak from them."""
    seed.log = MetricsLog(seed.config.run.layout.partial_metrics_log, keep=rows_logged.get(seed.key, 0))
    seed.streak = take_up_streak(seed.log.path) if rows_logged else 0


def take_up_streak(log_path: Path) -> int:
    """A resumed seed's streak (Seed.streak), from the validation points its kept metrics log holds."""
    streak = 0
    for row in map(json.loads, read_lines(log_path)):
        if row["split"] == "val":
            streak = next_streak(streak, row[MUTUAL_INFORMATION], TAKEUP_THRESHOLD)
    return streak


def resume_file(seeds: list[Seed]) -> Path:
    """The chunk's resume state (run_layout: in its first seed's run directory)."""
    return chunk_resume_file([seed.config.run.path for seed in seeds])


def chunk_settings(seeds: list[Seed]) -> dict:
    """What decides the chunk's trained weights: one run's settings, its seed replaced by the chunk's seeds."""
    settings = seeds[0].config.training_settings()
    settings.pop("seed")
    return {**settings, "seeds": [seed.config.optim.seed for seed in seeds]}
