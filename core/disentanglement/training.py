"""The one optimisation loop, shared by the z-free reference and the CVAEs.

Per step: the warmup-cosine learning rate (times each parameter group's `lr_factor`), the task's loss, a stop
before the weights are touched if it is not finite, zero_grad / backward / clip / step, then the task's logging,
its evaluation every `eval_every` steps and at the last, a progress line every `log_every` steps and at the last,
and its end-of-step work (checkpoints, signals). What is trained and what is logged is the task's; an evaluation may
end the loop early (a run's settled endpoint: the CVAE's confirmed take-up).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Protocol

import torch

from core.disentanglement.schedule import warmup_cosine


class NonFiniteLoss(FloatingPointError):
    """The objective became NaN or inf; training stops before the step that would have spoilt the weights."""


@dataclass(frozen=True)
class LoopSchedule:
    steps: int
    lr: float
    warmup_steps: int
    grad_clip: float
    eval_every: int
    log_every: int


class LoopTask(Protocol):
    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        """The loss of 0-based step `step` and its logged parts (plain floats, `loss` among them)."""

    def logged(self, step: int, metrics: dict[str, float]) -> None:
        """After `step` steps: the step's parts, `grad_norm` added."""

    def evaluate(self, step: int) -> bool | None:
        """The validation point after `step` steps; True ends the loop after this step."""

    def progress(self, step: int, metrics: dict[str, float]) -> str:
        """The figures of a progress line."""

    def after(self, step: int) -> None:
        """End of step `step` (1-based): checkpoints, signal handling."""


def set_learning_rate(optimizer: torch.optim.Optimizer, step: int, schedule: LoopSchedule) -> None:
    rate = warmup_cosine(step, schedule.lr, schedule.warmup_steps, schedule.steps)
    for group in optimizer.param_groups:
        group["lr"] = group.get("lr_factor", 1.0) * rate


def non_finite_loss(metrics: dict[str, float]) -> str | None:
    """'loss is nan (non-finite parts: kl)' when metrics['loss'] is not finite, else None."""
    if math.isfinite(metrics["loss"]):
        return None
    parts = [name for name, value in metrics.items() if name != "loss" and isinstance(value, float) and not math.isfinite(value)]
    return f"loss is {metrics['loss']}" + (f" (non-finite parts: {', '.join(parts)})" if parts else "")


def optimisation_step(
    parameters, optimizer: torch.optim.Optimizer, loss: torch.Tensor, metrics: dict[str, float], grad_clip: float
) -> float:
    """Backward, clip and step; returns the gradient norm before clipping. Raises NonFiniteLoss before touching the
    weights when metrics['loss'] is not finite."""
    if (message := non_finite_loss(metrics)) is not None:
        raise NonFiniteLoss(message)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(parameters, grad_clip).item()
    optimizer.step()
    return grad_norm


class TrainingLoop:
    """Runs a LoopTask from `start_step` to `schedule.steps`; keeps the time spent inside evaluations.

    `optimise(loss, metrics)` updates the weights; by default optimisation_step over the whole model, which sets
    metrics['grad_norm']. Seeds in lockstep pass their own, which clips and stops each seed apart.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, schedule: LoopSchedule, label: str = "", optimise=None):
        # progress lines and errors read "[label ]step N/total ..."
        self.model, self.optimizer, self.schedule = model, optimizer, schedule
        self.optimise = optimise or self.clipped_step
        self.prefix = f"{label} " if label else ""
        self.started = 0.0
        self.evaluation_s = 0.0
        self.steps_done = 0  # the step the loop ended at: schedule.steps, or earlier where an evaluation ended it

    def clipped_step(self, loss: torch.Tensor, metrics: dict[str, float]) -> None:
        metrics["grad_norm"] = optimisation_step(self.model.parameters(), self.optimizer, loss, metrics, self.schedule.grad_clip)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def run(self, task: LoopTask, start_step: int = 0) -> None:
        schedule = self.schedule
        self.started = time.perf_counter()
        for step in range(start_step, schedule.steps):
            set_learning_rate(self.optimizer, step, schedule)
            self.model.train()
            loss, metrics = task.loss(step)
            try:
                self.optimise(loss, metrics)
            except NonFiniteLoss as err:
                raise NonFiniteLoss(f"{self.prefix}step {step}: {err}") from err
            done = step + 1
            task.logged(done, metrics)
            self.steps_done = done
            last = done == schedule.steps
            if done % schedule.eval_every == 0 or last:
                evaluation_started = time.perf_counter()
                last = bool(task.evaluate(done)) or last  # may leave the model in eval mode: the next step sets train mode
                self.evaluation_s += time.perf_counter() - evaluation_started
            if done % schedule.log_every == 0 or last:
                rate = (done - start_step) / self.elapsed()
                line = f"{self.prefix}step {done}/{schedule.steps} {task.progress(done, metrics)} ({rate:.1f} steps/s)"
                print(line, file=sys.stderr, flush=True)
            task.after(done)
            if last:
                return
