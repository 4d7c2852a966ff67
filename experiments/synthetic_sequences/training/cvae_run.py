"""One arm's seeds trained in lockstep as one chunk: inputs checked once, the resume state, the shared training loop,
then each seed's evaluation and artifacts in its own run directory.

Each seed's run directory receives the files of run_layout, metadata.json last (it marks the run finished and names
the chunk). A partial chunk leaves its resume state in its first seed's directory, written every `checkpoint_every` steps and on
SIGTERM / SIGUSR1 (what Slurm sends before a time limit); rerunning the chunk with the same seeds, settings and
inputs resumes from it and ends with the same numbers as an uninterrupted chunk. A chunk of one seed is a run
trained alone.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from core.disentanglement.artifacts import save_torch, sha256_file, write_json
from core.disentanglement.batching import BatchSchedule
from core.disentanglement.config import NORMALISED_TERMS
from core.disentanglement.training import LoopSchedule, NonFiniteLoss, TrainingLoop
from experiments.synthetic_sequences.run_layout import ENDED_AT_TAKE_UP, FINISHED, finished_at, write_chunk_record
from experiments.synthetic_sequences.training.chunk import ChunkTask, Seed, chunk_description, chunk_settings, open_log, resume_file
from experiments.synthetic_sequences.training.evaluate import evaluate
from experiments.synthetic_sequences.training.inputs import RunInputs, load_inputs
from experiments.synthetic_sequences.training.model_setup import build_optimizer, initial_model, initial_stack, resolve_device
from experiments.synthetic_sequences.training.numerics import execution_path, numerics
from experiments.synthetic_sequences.training.run_lock import run_lock
from experiments.synthetic_sequences.training.run_state import (
    MetricsLog,
    clear_outputs,
    differing,
    git_commit,
    load_resume,
    now,
)
from experiments.synthetic_sequences.training.settings import INPUT_PATHS, TrainConfig
from experiments.synthetic_sequences.training.train_step import Objective, train_diagnostics
from experiments.synthetic_sequences.training.validation import EVAL_BATCH


def resolve_objective(config: TrainConfig, inputs: RunInputs) -> Objective:
    """The run's loss with its control applied: scale multiplies the reconstruction term, balance beta, by the mean
    supervised token count of the train split."""
    scale_factor, beta_factor = config.objective.control_factors(inputs.mean_train_tokens)
    reconstruction = replace(config.reconstruction, reconstruction_scale=config.reconstruction.reconstruction_scale * scale_factor)
    return Objective(reconstruction, inputs.scale["c_base"], config.objective.beta * beta_factor, config.objective.auxiliary_weights)


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


def start_metadata(
    config: TrainConfig, inputs: RunInputs, spec: Objective, device, start_step: int, stack, inputs_sha256: dict, chunk: dict
) -> dict:
    return {
        "reconstruction_loss_token_aggregation_mode": config.mode.value,
        "reference": {"path": config.run.reference, "mode": inputs.scale["mode"], "c_base": inputs.scale["c_base"]},
        "inputs_sha256": inputs_sha256,
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "seed": config.optim.seed,
        "device": str(device),
        "numerics": numerics(device, execution_path(chunk)),
        "started": now(),
        "resumed_from_step": start_step or None,
        "parameters": sum(p[0].numel() for p in stack.parameters()),
        "chunk": {**chunk, "device": str(device)},  # the seeds trained with this one (chunk_description)
        "resolved": {
            "controls": config.objective.controls,
            "mean_train_tokens": inputs.mean_train_tokens,
            "reconstruction_scale": spec.reconstruction.reconstruction_scale,
            "beta": spec.beta,
        },
    }


class SeedsStopped(NonFiniteLoss):
    """Some seeds of a chunk stopped on a non-finite loss; the others finished and were written."""


def check_chunk(configs: list[TrainConfig]) -> None:
    """One arm's seeds: every setting but the seed and the run directory the same, no seed or directory twice."""
    first = configs[0].training_settings()
    first.pop("seed")
    for config in configs[1:]:
        settings = config.training_settings()
        settings.pop("seed")
        if changed := differing(first, settings):
            raise ValueError(
                f"seed {config.optim.seed}: a chunk trains one arm's seeds, but its {', '.join(changed)} differ from "
                f"seed {configs[0].optim.seed}'s"
            )
        if any(getattr(config.run, name) != getattr(configs[0].run, name) for name in INPUT_PATHS):
            raise ValueError(
                f"seed {config.optim.seed}: a chunk's seeds read one set of inputs; its input paths differ from "
                f"seed {configs[0].optim.seed}'s"
            )
    for name, values in (("seed", [c.optim.seed for c in configs]), ("run_dir", [str(c.run.path.resolve()) for c in configs])):
        if len(set(values)) != len(values):
            raise ValueError(f"{name}: {values} repeats a value; each seed of a chunk has its own")


def finished_already(config: TrainConfig, inputs_sha256: dict, commit: str) -> bool:
    """Whether the run directory holds this run, finished: same settings, inputs and code. A chunk that grows by new
    seeds then trains only those."""
    try:
        metadata = json.loads(config.run.layout.metadata.read_text())
        run_config = json.loads(config.run.layout.run_config.read_text())
    except (OSError, ValueError):
        return False
    return (
        finished_at(metadata) is not None
        and metadata.get("inputs_sha256") == inputs_sha256
        and metadata.get("git_commit") == commit
        and run_config == json.loads(json.dumps(config.to_dict()))
    )


CHUNK_TRAINING = ("lockstep", "sequential")  # a chunk's seeds: one forward/backward pass for all, or one after another


def train(configs: list[TrainConfig], manifest: Path | None = None, chunk_training: str = "lockstep") -> dict[int, dict]:
    """Train, evaluate and write one arm's seeds, each to its own run directory, in lockstep or one after another
    (train_one_after_another); returns each trained seed's evaluation (eval.json). A seed already finished with these
    settings and inputs is kept. When every seed has finished, `manifest` (the workflow's record) is written, last.

    Raises SeedsStopped, after the other seeds are written, when a seed's loss turned non-finite."""
    if chunk_training not in CHUNK_TRAINING:
        raise ValueError(f"chunk_training: {chunk_training!r} is not one of {', '.join(CHUNK_TRAINING)}")
    called = time.perf_counter()
    check_chunk(configs)
    device = resolve_device(configs[0].run.device)
    inputs = load_inputs(configs[0])  # every check, before anything is written
    inputs_sha256 = inputs.sha256
    if note := hybrid_scale_note(configs[0]):
        print(note, file=sys.stderr, flush=True)
    for config in configs:
        config.run.path.mkdir(parents=True, exist_ok=True)
    with ExitStack() as locks:
        for config in configs:  # one trainer per run directory
            locks.enter_context(run_lock(config.run.path))
        commit = git_commit()  # one subprocess for the chunk, not one per seed
        todo = [config for config in configs if not finished_already(config, inputs_sha256, commit)]
        for config in configs:
            if config not in todo:
                print(f"seed {config.optim.seed}: {config.run.path} is finished with these settings and inputs; kept", file=sys.stderr)
        if chunk_training == "lockstep":
            evaluations = train_seeds(todo, inputs, inputs_sha256, device, called) if todo else {}
        else:
            evaluations = train_one_after_another(todo, inputs, inputs_sha256, device, called)
        if manifest is not None:
            write_manifest(manifest, configs)
    return evaluations


def train_one_after_another(configs: list[TrainConfig], inputs: RunInputs, inputs_sha256: dict, device, called: float) -> dict[int, dict]:
    """Each seed as a chunk of one, in turn: the numbers of the seed trained alone, with the inputs loaded and hashed
    once. A seed that stops does not stop the next. Setup time is each seed's own from the second on."""
    evaluations, stopped = {}, []
    for config in configs:
        try:
            evaluations |= train_seeds([config], inputs, inputs_sha256, device, called, job_seeds=[c.optim.seed for c in configs])
        except SeedsStopped as err:
            stopped.append(str(err))
        called = time.perf_counter()
    if stopped:
        raise SeedsStopped("; ".join(stopped))
    return evaluations


def train_seeds(
    configs: list[TrainConfig], inputs: RunInputs, inputs_sha256: dict, device, called: float, job_seeds: list[int] | None = None
) -> dict[int, dict]:
    """Train the seeds of `configs` together from their first step or from the chunk's resume state; write each."""
    stack = initial_stack(configs, inputs, device)
    optimizer = build_optimizer(stack.named_stacked(), configs[0])
    lengths = inputs.batchers["train"].lengths
    seeds = [Seed(c, BatchSchedule(lengths, c.optim.batch_size, c.optim.seed, c.optim.batching), None) for c in configs]
    start_step, rows_logged = resume(seeds, stack, optimizer, inputs_sha256)
    spec = resolve_objective(configs[0], inputs)
    metadata = {}
    for seed in seeds:
        clear_outputs(seed.config.run.path)
        open_log(seed, rows_logged)
        metadata[seed.key] = start_metadata(
            seed.config, inputs, spec, device, start_step, stack, inputs_sha256, chunk_description(seeds, job_seeds)
        )
        write_json(seed.config.to_dict(), seed.config.run.layout.run_config)
        write_json(metadata[seed.key], seed.config.run.layout.metadata)

    task = ChunkTask(stack, initial_model(configs[0], inputs).to(device), optimizer, seeds, inputs, spec, device, inputs_sha256)
    task.last_saved = start_step if rows_logged else None
    optim, run, reconstruction = configs[0].optim, configs[0].run, configs[0].reconstruction
    label = f"{reconstruction.term}_{configs[0].mode}_{reconstruction.token_weight_alpha:g} seeds {','.join(s.key for s in seeds)}"
    schedule = LoopSchedule(optim.steps, optim.lr, optim.warmup_steps, optim.grad_clip, run.eval_every, run.log_every)
    loop = TrainingLoop(stack, optimizer, schedule, label=label, optimise=task.optimise)
    try:
        loop.run(task, start_step)
    except NonFiniteLoss:  # every seed stopped: each is written below with its failure
        pass
    timing = {"setup_s": loop.started - called, "train_loop_s": loop.elapsed(), "validation_s": loop.evaluation_s}
    timing["train_steps"] = loop.steps_done - start_step
    evaluations = {}
    for i, seed in enumerate(seeds):
        if loop.steps_done < optim.steps:  # its take-up confirmed (chunk.py): recorded, as the analysis reads it
            metadata[seed.key][ENDED_AT_TAKE_UP] = loop.steps_done
        if seed.stopped is None:
            evaluations[seed.config.optim.seed] = finish(
                seed.config, task.seed_model(i), inputs, device, seed.log, metadata[seed.key], dict(timing)
            )
        else:
            write_stopped(seed, task.seed_model(i), metadata[seed.key], timing)
    resume_file(seeds).unlink(missing_ok=True)
    if stopped := [seed for seed in seeds if seed.stopped is not None]:
        raise SeedsStopped(
            "; ".join(
                f"seed {s.key} stopped at {s.failure}, its weights after {s.stopped} steps in {s.config.run.layout.model}" for s in stopped
            )
        )
    return evaluations


def resume(seeds: list[Seed], stack, optimizer, inputs_sha256: dict) -> tuple[int, dict]:
    """Load the chunk's resume state into the stack, the optimiser and the seeds' stops when one of the same chunk is
    there; returns the step to start from and the rows each seed's metrics log keeps ({} when starting fresh)."""
    partial_logs = {seed.key: seed.config.run.layout.partial_metrics_log for seed in seeds}
    resumed = load_resume(resume_file(seeds), chunk_settings(seeds), inputs_sha256, partial_logs)
    if resumed is None:
        return 0, {}
    stack.load_state_dict(resumed["model"])
    optimizer.load_state_dict(resumed["optimizer"])
    for seed in seeds:
        seed.stopped = resumed["stopped"].get(seed.key)
    print(f"resuming seeds {', '.join(partial_logs)} from step {resumed['step']} ({resume_file(seeds)})", file=sys.stderr, flush=True)
    return resumed["step"], resumed["rows_logged"]


def write_stopped(seed: Seed, model, metadata: dict, timing: dict) -> None:
    """A stopped seed's run: its weights of the last good step, its metrics up to it, and metadata.json with the failure
    and no `finished` (so no table reads it, and a rerun trains it again)."""
    layout = seed.config.run.layout
    save_model(seed.config, model)
    seed.log.finish(layout.metrics_log)
    write_json({**metadata, "stopped": {"step": seed.stopped, "error": seed.failure, "timing": timing}}, layout.metadata)


def write_manifest(path: Path, configs: list[TrainConfig]) -> None:
    """The chunk's record for the workflow (run_layout.write_chunk_record): each seed's run directory and the sha256 of
    its finished metadata.json."""
    write_chunk_record(path, {config.optim.seed: config.run.path for config in configs}, now())


def save_model(config: TrainConfig, model) -> None:
    state = {"model": model.state_dict(), "run_config": config.to_dict(), "max_len": model.decoder.config.max_len}
    save_torch(state, config.run.layout.model)


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
    layout = config.run.layout
    save_model(config, model)
    rows = log.finish(layout.metrics_log)
    write_json(evaluation, layout.evaluation)
    timing["evaluation_s"] = time.perf_counter() - evaluation_started
    diagnostics = train_diagnostics([row for row in rows if row["split"] == "train"])
    outputs_sha256 = {name: sha256_file(path) for name, path in layout.outputs.items() if path != layout.metadata}
    finished = {FINISHED: now(), "timing": timing, "train_diagnostics": diagnostics, "outputs_sha256": outputs_sha256}
    write_json({**metadata, **finished}, layout.metadata)
    return evaluation
