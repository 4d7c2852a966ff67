"""Seeds in lockstep stay independent: each starts and moves as its own run would, whatever else is in its chunk."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.disentanglement.lockstep import SeedStack
from experiments.synthetic_sequences.analysis.records.run_files import execution_label, numerics_label
from experiments.synthetic_sequences.run_layout import RESUME
from experiments.synthetic_sequences.training import model_setup
from experiments.synthetic_sequences.training.inputs import load_inputs
from experiments.synthetic_sequences.training.train_disentangled import main, parse_config

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "32", "--n-layer", "1", "--n-head", "2", "--num-codes", "3", "--batch-size", "16", "--length-groups", "2"]
TINY += ["--eval-prompts-per-code", "2", "--log-every", "1", "--threads", "1", "--reconstruction-term", "raw"]


def chunk_flags(io_flags, mode: str, folder: Path, seeds: list[int], steps: int, *extra: str) -> list[str]:
    flags = io_flags(mode, folder / f"seed{seeds[0]}")
    at = flags.index("--run-dir")
    flags[at + 1 : at + 2] = [str(folder / f"seed{seed}") for seed in seeds]
    return [*flags, "--seed", *map(str, seeds), *TINY, "--steps", str(steps), "--eval-every", str(steps), *extra]


def train_rows(run_dir: Path) -> list[dict]:
    return [row for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if row["split"] == "train"]


def largest_difference(a: list[dict], b: list[dict]) -> float:
    """The largest difference of any logged number between two runs' train rows, relative to max(1, |value|).

    reconstruction_to_kl is left out: a ratio to a KL near 0 (5e-5 here) turns a 1e-7 difference into 1e-3; its parts,
    reconstruction_objective and kl, are compared."""
    assert len(a) == len(b)
    pairs = [(x[k], y[k]) for x, y in zip(a, b, strict=True) for k in x if isinstance(x[k], float) and k != "reconstruction_to_kl"]
    return max(abs(x - y) / max(1.0, abs(x), abs(y)) for x, y in pairs)


@pytest.fixture(scope="module")
def lone_seed_1(io_flags, tmp_path_factory):
    """Seed 1 trained alone, 100 steps, in sum mode."""
    folder = tmp_path_factory.mktemp("lone")
    main(chunk_flags(io_flags, "sum", folder, [1], 100))
    return folder / "seed1"


def test_a_seed_of_a_chunk_starts_and_moves_as_its_own_run(io_flags, lone_seed_1, tmp_path):
    main(chunk_flags(io_flags, "sum", tmp_path, [0, 1, 2], 20))
    together, alone = train_rows(tmp_path / "seed1"), train_rows(lone_seed_1)[:20]
    assert math.isclose(together[0]["loss"], alone[0]["loss"], rel_tol=1e-6)
    assert largest_difference(together, alone) <= 1e-4
    metadata = json.loads((tmp_path / "seed1" / "metadata.json").read_text())
    assert metadata["chunk"]["seeds"] == [0, 1, 2]
    execution = {"compiled": False, "chunk_training": "lockstep", "seeds_per_pass": 3, "seeds_per_process": 3}
    assert metadata["numerics"]["execution"] == execution
    assert numerics_label(metadata["numerics"]).endswith(", eager, 3 seeds per pass")
    assert execution_label(metadata["numerics"]) == "lockstep, 3 seeds per process"


@pytest.fixture
def seed_5_poisoned(monkeypatch):
    """Seed 5's model starts with NaN router weights, so its loss is non-finite at step 0; other seeds are untouched."""
    built = model_setup.initial_model

    def poisoned(config, inputs):
        model = built(config, inputs)
        if config.optim.seed == 5:
            with torch.no_grad():
                model.router.out.weight.fill_(float("nan"))
        return model

    monkeypatch.setattr(model_setup, "initial_model", poisoned)


def test_seeds_one_after_another_in_one_process_are_the_runs_trained_alone_bit_for_bit(io_flags, lone_seed_1, tmp_path):
    """chunk_training sequential: seed 0 trains first in the same process, then seed 1, which must still be exactly
    the run of seed 1 alone (every logged number and every weight)."""
    main(chunk_flags(io_flags, "sum", tmp_path, [0, 1], 100, "--chunk-training", "sequential"))
    for name in ("metrics.jsonl", "eval.json"):  # every train and validation row, and the test evaluation
        assert (tmp_path / "seed1" / name).read_bytes() == (lone_seed_1 / name).read_bytes(), name
    ours, alone = (torch.load(folder / "model.pt", weights_only=True)["model"] for folder in (tmp_path / "seed1", lone_seed_1))
    assert all(torch.equal(ours[name], alone[name]) for name in alone)
    metadata = json.loads((tmp_path / "seed1" / "metadata.json").read_text())
    chunk = metadata["chunk"]
    assert chunk["seeds"] == [1] and chunk["job_seeds"] == [0, 1] and chunk["training"] == "sequential"
    assert numerics_label(metadata["numerics"]).endswith(", eager, 1 seed per pass")
    assert execution_label(metadata["numerics"]) == "sequential, 2 seeds per process"


def test_a_seed_that_stops_in_a_sequential_job_does_not_stop_the_next(io_flags, lone_seed_1, tmp_path, seed_5_poisoned):
    with pytest.raises(SystemExit, match=r"seed 5 stopped at step 0: loss is nan"):
        main(chunk_flags(io_flags, "sum", tmp_path, [5, 1], 100, "--chunk-training", "sequential"))
    assert train_rows(tmp_path / "seed1") == train_rows(lone_seed_1)
    assert "finished" in json.loads((tmp_path / "seed1" / "metadata.json").read_text())


def test_the_initial_weights_of_a_stacked_seed_are_its_own_runs(io_flags, data_dir, tmp_path):
    [config0, config1], *_ = parse_config(chunk_flags(io_flags, "mean", tmp_path, [0, 1], 2))
    inputs = load_inputs(config0)
    stack = model_setup.initial_stack([config0, config1], inputs, "cpu")
    for index, config in enumerate((config0, config1)):
        own = model_setup.initial_model(config, inputs).state_dict()
        assert all(torch.equal(stack.seed_state(index)[name], own[name]) for name in own)


def test_a_seeds_trajectory_does_not_depend_on_the_rest_of_its_chunk(io_flags, tmp_path):
    main(chunk_flags(io_flags, "sum", tmp_path / "a", [0, 1, 2], 100))
    main(chunk_flags(io_flags, "sum", tmp_path / "b", [1, 5], 100))
    assert largest_difference(train_rows(tmp_path / "a" / "seed1"), train_rows(tmp_path / "b" / "seed1")) <= 1e-6


def test_a_seed_driven_to_a_non_finite_loss_stops_alone(io_flags, lone_seed_1, tmp_path, seed_5_poisoned, capsys):
    with pytest.raises(SystemExit, match=r"seed 5 stopped at step 0: loss is nan"):
        main(chunk_flags(io_flags, "sum", tmp_path, [1, 5], 100))
    assert largest_difference(train_rows(tmp_path / "seed1"), train_rows(lone_seed_1)) <= 1e-6
    assert "finished" in json.loads((tmp_path / "seed1" / "metadata.json").read_text())
    stopped = json.loads((tmp_path / "seed5" / "metadata.json").read_text())
    assert "finished" not in stopped and stopped["stopped"]["step"] == 0
    kept = torch.load(tmp_path / "seed5" / "model.pt", weights_only=True)["model"]
    assert torch.isnan(kept["router.out.weight"]).all() and not (tmp_path / "seed5" / "eval.json").exists()
    assert "seed 5 stopped at step 0" in capsys.readouterr().err


def interrupt_at_step(flags: list[str], step: int) -> None:
    command = [sys.executable, "-m", "experiments.synthetic_sequences.training.train_disentangled", *flags]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if f" step {step}/" in line:
            os.kill(process.pid, signal.SIGUSR1)
            break
    process.stderr.read()
    assert process.wait(timeout=300) == 128 + signal.SIGUSR1


@pytest.mark.slow
def test_an_interrupted_chunk_resumes_to_the_same_bytes(io_flags, tmp_path):
    extra = ("--checkpoint-every", "3", "--eval-every", "8")
    main(chunk_flags(io_flags, "mean", tmp_path / "whole", [0, 3], 40, *extra))
    flags = chunk_flags(io_flags, "mean", tmp_path / "cut", [0, 3], 40, *extra)
    interrupt_at_step(flags, 5)
    assert (tmp_path / "cut" / "seed0" / RESUME).is_file()
    main(flags)
    for seed in ("seed0", "seed3"):
        for name in ("metrics.jsonl", "eval.json"):
            assert (tmp_path / "whole" / seed / name).read_bytes() == (tmp_path / "cut" / seed / name).read_bytes(), (seed, name)
        whole, cut = (torch.load(tmp_path / run / seed / "model.pt", weights_only=True)["model"] for run in ("whole", "cut"))
        assert all(torch.equal(whole[name], cut[name]) for name in whole)  # the files differ only in the run_dir they record
        assert json.loads((tmp_path / "cut" / seed / "metadata.json").read_text())["resumed_from_step"] >= 5  # saved at the signal
    assert not (tmp_path / "cut" / "seed0" / RESUME).exists()


def test_a_grown_chunk_trains_only_its_new_seeds(io_flags, tmp_path, capsys):
    main(chunk_flags(io_flags, "mean", tmp_path, [0], 4))
    first = (tmp_path / "seed0" / "metadata.json").read_bytes()
    main(chunk_flags(io_flags, "mean", tmp_path, [0, 1], 4))
    assert "seed 0: " in capsys.readouterr().err and (tmp_path / "seed0" / "metadata.json").read_bytes() == first
    assert "finished" in json.loads((tmp_path / "seed1" / "metadata.json").read_text())


def test_seeds_and_run_directories_come_in_pairs(io_flags, tmp_path, capsys):
    flags = chunk_flags(io_flags, "mean", tmp_path, [0, 1], 4)
    at = flags.index("--run-dir")
    del flags[at + 2]
    with pytest.raises(SystemExit):
        parse_config(flags)
    assert "--seed gives 2 seeds and --run-dir 1 folders" in capsys.readouterr().err


def test_each_seed_is_clipped_by_its_own_gradient_norm():
    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)) for _ in range(3)]
    stack = SeedStack(models)
    for p in stack.stacked:
        p.grad = torch.randn_like(p) * torch.tensor([0.1, 1.0, 10.0]).view(-1, *[1] * (p.dim() - 1))
    expected = []
    for index, model in enumerate(models):
        for q, p in zip(model.parameters(), stack.stacked, strict=True):
            q.grad = p.grad[index].clone()
        expected.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    norms = stack.clip_grad_norms_(1.0)
    assert torch.allclose(norms, torch.stack(expected), rtol=1e-6)
    for index, model in enumerate(models):
        for q, p in zip(model.parameters(), stack.stacked, strict=True):
            assert torch.allclose(p.grad[index], q.grad, rtol=1e-6, atol=1e-9)
