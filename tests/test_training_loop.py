"""The shared optimisation loop and the settings CLI generator, on toy tasks."""

import argparse
import math

import pytest
import torch

from core.disentanglement.cli import add_settings_flags, format_pairs, parse_pairs
from core.disentanglement.schedule import warmup_cosine
from core.disentanglement.training import LoopSchedule, NonFiniteLoss, TrainingLoop
from experiments.synthetic_sequences.training.settings import TrainConfig

PATHS = {name: "x" for name in ("train_records", "val_records", "test_records", "train_scores", "val_scores", "reference", "run_dir")}


class Recorder:
    """A task fitting w to 3 on a quadratic, recording what the loop asked of it."""

    def __init__(self, model, poison_at=None):
        self.model, self.poison_at = model, poison_at
        self.events, self.lrs = [], []

    def loss(self, step):
        loss = (self.model.weight - 3.0).pow(2).sum() * (math.nan if step == self.poison_at else 1.0)
        return loss, {"loss": loss.item()}

    def logged(self, step, metrics):
        self.events.append(("logged", step, "grad_norm" in metrics))

    def evaluate(self, step):
        self.events.append(("evaluate", step))

    def progress(self, step, metrics):
        return f"loss {metrics['loss']:.3f}"

    def after(self, step):
        self.events.append(("after", step))
        self.weight_after = self.model.weight.detach().clone()


def toy(steps=7, eval_every=3, log_every=2, lr_factor=0.5):
    model = torch.nn.Linear(1, 1, bias=False)
    optimizer = torch.optim.SGD([{"params": model.parameters(), "lr_factor": lr_factor}], lr=0.1)
    return model, optimizer, LoopSchedule(steps, 0.1, 2, 1.0, eval_every, log_every)


def test_the_loop_evaluates_logs_and_schedules_as_configured(capsys):
    model, optimizer, schedule = toy()
    task = Recorder(model)
    TrainingLoop(model, optimizer, schedule, "toy").run(task, start_step=1)
    assert [e[1] for e in task.events if e[0] == "evaluate"] == [3, 6, 7]  # every 3 steps and the last
    assert [e[1] for e in task.events if e[0] == "logged"] == list(range(2, 8))  # resumed at step 1
    assert all(e[2] for e in task.events if e[0] == "logged")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split()[2] for line in lines] == ["2/7", "4/7", "6/7", "7/7"] and lines[0].startswith("toy step 2/7 loss ")
    assert optimizer.param_groups[0]["lr"] == 0.5 * warmup_cosine(6, 0.1, 2, 7)  # the group's lr_factor x the schedule


def test_a_non_finite_loss_stops_before_the_weights_move():
    model, optimizer, schedule = toy()
    task = Recorder(model, poison_at=4)
    with pytest.raises(NonFiniteLoss, match="toy step 4: loss is nan"):
        TrainingLoop(model, optimizer, schedule, "toy").run(task)
    assert task.events[-1] == ("after", 4) and ("logged", 5, True) not in task.events
    assert torch.isfinite(model.weight).all() and torch.equal(model.weight, task.weight_after)  # as left by step 4


def test_pairs_round_trip_and_refuse_what_is_not_name_value():
    assert parse_pairs("tokcc=0.5,dist=1") == {"tokcc": 0.5, "dist": 1.0}
    assert parse_pairs(format_pairs({"a-scale": "a", "a-balance": "a"}), str) == {"a-scale": "a", "a-balance": "a"}
    for text, message in (("tokcc", "'tokcc' is not name=value"), ("tokcc=x", "'x' is not a number"), ("=1", "is not name=value")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            parse_pairs(text)


def test_generated_flags_build_the_nested_config_a_shared_setting_reaches_both_families():
    parser = argparse.ArgumentParser()
    add_settings_flags(parser, TrainConfig)
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in PATHS.items()]
    args = vars(parser.parse_args([*flags, "--prior", "learned", "--auxiliary-weights", "posterior_variance=0.2", "--model", "continuous"]))
    config = TrainConfig.from_flat(args)
    assert config.model.latent is config.model.continuous and config.model.continuous.prior == "learned"
    assert config.model.shared_discrete.prior == "learned" and config.objective.auxiliary_weights == {"posterior_variance": 0.2}
    with pytest.raises(ValueError, match="'router_support' is not a term of model 'continuous'"):
        TrainConfig.from_flat({**args, "auxiliary_weights": {"router_support": 0.2}})
    with pytest.raises(ValueError, match="stepz: not a trainer setting"):
        TrainConfig.from_flat({**PATHS, "stepz": 3})
    with pytest.raises(SystemExit):
        parser.parse_args(flags[1:])  # --train-records is required
