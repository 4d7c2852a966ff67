"""The continuous family's validation, before and after the expanded square (issue: the step near its own limit).

    python -m bench.validation [--rounds 10] [--train-steps 100] [--threads 1]

One continuous run of the default pilot's data (the default's discrete family with an 8-dimensional Gaussian z and 2
samples, as bench.term_costs builds it; raw, mean) trains --train-steps steps, so that its posteriors have spread.
Then, on that model, each round times in a shuffled order (bench.common.interleaved_times, after one warm-up call):
  validation, after     training/validation.validation_metrics as it is (the 500 validation records);
  validation, before    the same with the Gaussian cross densities as they were computed before: the [N, N, D]
                        differences squared, and log q_bar by np.logaddexp.reduce in I(x;z) (difference_of_squares_*);
and its parts apart: the posterior pass, I(x;z) both ways, strategy information, the k-means of E_q[z]; and a block of
training steps. The run's loop (steps x step + validations x validation, at the family's steps and eval_every) is
added up from those medians, before and after. Both validations must give the same metrics up to 1e-6 (ROUNDING).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from sklearn.cluster import KMeans

from bench.common import BenchResult, Figure, interleaved_times, prepare_run_inputs, print_result, progress, scheduled_batches
from bench.losses import Variant
from bench.term_costs import families
from core.disentanglement import information
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.training import evaluate
from experiments.synthetic_sequences.training.evaluate import posterior_pass
from experiments.synthetic_sequences.training.inputs import load_inputs
from experiments.synthetic_sequences.training.latent_usage import MI_DRAWS, continuous_usage
from experiments.synthetic_sequences.training.validation import EVAL_BATCH, validation_metrics

SEED = 0
# the most the two validations may differ: the difference of squares took exp(logvar) in the posteriors' float32, which
# moves each log density by about 1e-7 of its size; the expanded square computes in float64
ROUNDING = 1e-6


def difference_of_squares_cross(z: np.ndarray, mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """log q(z_i | x_j), [N, M], as it was computed before the expanded square: the [N, M, D] differences squared."""
    return information.gaussian_log_density(z[:, None, :], mu[None], logvar[None])


def difference_of_squares_usage(mu: np.ndarray, logvar: np.ndarray, seed: int, draws: int = MI_DRAWS) -> dict:
    """latent_usage.continuous_usage as it was before the expanded square (the same draws from the same seed): the
    difference of squares, and log q_bar by np.logaddexp.reduce."""
    rng = np.random.default_rng(seed)
    terms = np.empty((draws, len(mu)))
    for draw in range(draws):
        z = mu + np.exp(0.5 * logvar) * rng.standard_normal(mu.shape)
        log_aggregate = np.logaddexp.reduce(difference_of_squares_cross(z, mu, logvar), axis=1) - math.log(len(mu))
        terms[draw] = information.gaussian_log_density(z, mu, logvar) - log_aggregate
    return {
        "active_units": int((mu.var(axis=0) > 0.01).sum()),
        "mutual_information": float(terms.mean()),
        "mutual_information_se": float(math.sqrt(terms.var(axis=0, ddof=1).sum() / draws) / len(mu)),
    }


@contextmanager
def before_expanded_square():
    """Validation as it ran before: I(x;z) and strategy information on the difference of squares."""
    with (
        mock.patch.object(evaluate, "continuous_usage", difference_of_squares_usage),
        mock.patch.object(information, "gaussian_cross_log_density", difference_of_squares_cross),
    ):
        yield


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def continuous_variant(folder: Path, paths: dict) -> tuple[Variant, object, dict]:
    """The continuous twin of the default's family (raw, mean), its inputs and its settings."""
    family = families(400)["continuous"]
    family = {**family, "runs": [{"term": "raw", "alpha": 0.0, "modes": ["mean"]}]}
    (spec,) = expand_grid({"continuous": family}, seeds=1, references=1)
    files = {name: value for name, value in paths.items() if name != "reference_dir"}
    config = spec.train_config(**files, reference=f"{paths['reference_dir']}/mean.json", run_dir=str(folder / "run"))
    inputs = load_inputs(config)
    return Variant(config, inputs), inputs, family["settings"]


def measure(rounds: int = 10, train_steps: int = 100, threads: int = 1) -> BenchResult:
    torch.set_num_threads(threads)
    command = f"python -m bench.validation --rounds {rounds} --train-steps {train_steps} --threads {threads}"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = prepare_run_inputs(Path(tmp))
        variant, inputs, settings = continuous_variant(Path(tmp), paths)
        batches = scheduled_batches(variant.config, inputs, train_steps)
    progress(f"training the continuous model {train_steps} steps")
    variant.block(batches)
    model, spec, device = variant.model, variant.spec, "cpu"
    passed = posterior_pass(model, inputs.batchers["val"], EVAL_BATCH, SEED, device)
    mu, logvar = passed["features"], passed["logvar"]
    strategy = inputs.records["val"].frame["strategy"].to_numpy()
    after = validation_metrics(model, inputs, spec, SEED, device)
    with before_expanded_square():
        before = validation_metrics(model, inputs, spec, SEED, device)
    differences = {name: abs(after[name] - before[name]) for name in after if isinstance(after[name], float)}
    largest = max(differences.values())
    if largest > ROUNDING:
        raise AssertionError(f"the validations differ by {largest:.3g} at most, more than rounding ({ROUNDING:g})")

    def validation_before():
        with before_expanded_square():
            validation_metrics(model, inputs, spec, SEED, device)

    blocks = {
        "validation, after": lambda: validation_metrics(model, inputs, spec, SEED, device),
        "validation, before": validation_before,
        "posterior pass": lambda: posterior_pass(model, inputs.batchers["val"], EVAL_BATCH, SEED, device),
        "I(x;z), after": lambda: continuous_usage(mu, logvar, SEED),
        "I(x;z), before": lambda: difference_of_squares_usage(mu, logvar, SEED),
        "strategy information": lambda: information.continuous_information(mu, logvar, strategy, SEED),
        "k-means of E_q[z]": lambda: KMeans(n_clusters=len(set(strategy)), n_init=10, random_state=SEED).fit(mu),
        "training step": lambda: variant.block(batches[:10]) / 10,
    }
    timed_blocks = {name: block if name == "training step" else partial(timed, block) for name, block in blocks.items()}
    median = {name: float(np.median(values)) for name, values in interleaved_times(timed_blocks, rounds).items()}
    figures = [Figure("validation", f"{name} (median of {rounds})", value * 1e3, "ms") for name, value in median.items()]
    figures.append(Figure("validation", "validation after / before", median["validation, after"] / median["validation, before"], "x"))
    steps, evaluations = settings["steps"], settings["steps"] // settings["eval_every"]
    loops = {moment: steps * median["training step"] + evaluations * median[f"validation, {moment}"] for moment in ("before", "after")}
    note = f"{steps} steps and {evaluations} validations: {loops['before']:.1f} s before, {loops['after']:.1f} s after"
    figures.append(Figure("validation", "the run's loop, after / before", loops["after"] / loops["before"], "x", note=note))
    figures.append(Figure("validation", "largest |metric after - before|", largest, "", note="every float metric of one validation"))
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--train-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print_result(measure(args.rounds, args.train_steps, args.threads))


if __name__ == "__main__":
    main()
