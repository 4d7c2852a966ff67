"""Train one arm's CVAE seeds on synthetic sequences, in lockstep, and evaluate each on the test split.

    python -m experiments.synthetic_sequences.training.train_disentangled \\
        --train-records results/data/train.parquet --val-records results/data/val.parquet \\
        --test-records results/data/test.parquet --train-scores results/zfree/scores/train.parquet \\
        --val-scores results/zfree/scores/val.parquet --reference results/reference/sum.json \\
        --reconstruction-loss-token-aggregation-mode sum --reconstruction-term dist \\
        --seed 0 1 2 --run-dir results/runs/demo/dist_sum_0/seed0 results/runs/demo/dist_sum_0/seed1 \\
        results/runs/demo/dist_sum_0/seed2

`--seed` and `--run-dir` take one value per seed, in pairs: the seeds train together in one process (cvae_run.py),
each written to its own run directory. One flag per other setting of settings.TrainConfig, with the help text written
beside each field: the workflow's plan writes a chunk's flags from its runs' settings (planning/plan.Plan.chunk_flags).
Before anything is written, every input is checked (inputs.py): the c_base file's c_base is recomputed from the validation
scores in the run's own mode, and the scores must be of exactly the given records, from one z-free checkpoint. The
runs themselves (outputs, resume on a rerun after a signal) are cvae_run.py's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from core.disentanglement.cli import add_settings_flags, refusals_exit
from core.disentanglement.training import NonFiniteLoss
from experiments.synthetic_sequences.training.cvae_run import CHUNK_TRAINING, train
from experiments.synthetic_sequences.training.settings import TrainConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--chunk-training",
        choices=CHUNK_TRAINING,
        default="lockstep",
        help="the seeds together, one forward/backward pass for all (lockstep), or one after another in this process "
        "(sequential: each seed's numbers are those of the seed trained alone; start-up is paid once)",
    )
    parser.add_argument(
        "--chunk-manifest", type=Path, default=None, help="written last, when every seed has finished: the workflow's record of the chunk"
    )
    add_settings_flags(parser, TrainConfig, skip=("seed", "run_dir"))
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="the seeds trained together, one per run directory (default: 0)")
    parser.add_argument("--run-dir", dest="run_dir", nargs="+", required=True, help="the seeds' output folders, in --seed's order")
    return parser


def parse_config(argv: Sequence[str] | None = None) -> tuple[list[TrainConfig], int | None, Path | None, str]:
    """The seeds' configs, and the job's threads, chunk manifest and chunk training."""
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    threads, manifest, seeds, run_dirs = args.pop("threads"), args.pop("chunk_manifest"), args.pop("seed"), args.pop("run_dir")
    chunk_training = args.pop("chunk_training")
    if threads is not None and threads < 1:
        parser.error(f"--threads: {threads} is not allowed; it must be >= 1")
    if len(seeds) != len(run_dirs):
        parser.error(f"--seed gives {len(seeds)} seeds and --run-dir {len(run_dirs)} folders; give one folder per seed")
    try:
        return (
            [TrainConfig.from_flat({**args, "seed": seed, "run_dir": run_dir}) for seed, run_dir in zip(seeds, run_dirs, strict=True)],
            threads,
            manifest,
            chunk_training,
        )
    except ValueError as err:
        parser.error(str(err))


def main(argv: Sequence[str] | None = None) -> None:
    configs, threads, manifest, chunk_training = parse_config(argv)
    if threads:
        torch.set_num_threads(threads)
    with refusals_exit(NonFiniteLoss):  # RunDirectoryBusy is a ValueError; SeedsStopped a NonFiniteLoss
        evaluations = train(configs, manifest, chunk_training)
    for seed, evaluation in evaluations.items():
        report(seed, evaluation)


def report(seed: int, evaluation: dict) -> None:
    overall = evaluation["strategy_separation"]["overall"]
    baseline = evaluation["strategy_separation"]["shuffled_label_baseline"]
    print(
        f"seed {seed} test: strategy NMI {overall['nmi']:.3f} (shuffled labels {baseline['nmi']:.3f}), "
        f"probe accuracy {overall['probe_accuracy']:.3f}, "
        f"KL {evaluation['latent_usage']['kl']:.3f}, samples parse {evaluation['samples']['parse_rate']:.2f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
