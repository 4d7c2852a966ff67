"""Train one CVAE run on synthetic sequences and evaluate it on the test split.

    python -m experiments.synthetic_sequences.disentangled.train_disentangled \\
        --train-records results/data/train.parquet --val-records results/data/val.parquet \\
        --test-records results/data/test.parquet --train-scores results/zfree/scores/train.parquet \\
        --val-scores results/zfree/scores/val.parquet --reference results/reference/sum.json \\
        --reconstruction-loss-token-aggregation-mode sum --reconstruction-term dist \\
        --run-dir results/runs/demo/dist_sum_0/seed0

One flag per setting of config.TrainConfig, with the help text written beside each field. Before anything is
written, every input is checked (inputs.py): the reference artifact's c_base is recomputed from the validation
scores in the run's own mode, and the scores must be of exactly the given records, from one z-free checkpoint.
The run itself (outputs, resume on a rerun after a signal) is cvae_run.py's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from core.disentanglement.cli import add_settings_flags
from core.disentanglement.training import NonFiniteLoss
from experiments.synthetic_sequences.disentangled.config import TrainConfig
from experiments.synthetic_sequences.disentangled.cvae_run import train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    add_settings_flags(parser, TrainConfig)
    return parser


def parse_config(argv: Sequence[str] | None = None) -> tuple[TrainConfig, int | None]:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    threads = args.pop("threads")
    if threads is not None and threads < 1:
        parser.error(f"--threads: {threads} is not allowed; it must be >= 1")
    try:
        return TrainConfig.from_flat(args), threads
    except ValueError as err:
        parser.error(str(err))


def main(argv: Sequence[str] | None = None) -> None:
    config, threads = parse_config(argv)
    if threads:
        torch.set_num_threads(threads)
    try:
        evaluation = train(config)
    except OSError as err:  # a file that cannot be read or written: its name and the reason, no traceback
        sys.exit(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}")
    except (ValueError, NonFiniteLoss) as err:  # RunDirectoryBusy is a ValueError
        sys.exit(f"error: {err}")
    overall = evaluation["strategy_separation"]["overall"]
    baseline = evaluation["strategy_separation"]["shuffled_label_baseline"]
    print(
        f"test: strategy NMI {overall['nmi']:.3f} (shuffled labels {baseline['nmi']:.3f}), probe accuracy {overall['probe_accuracy']:.3f}, "
        f"KL {evaluation['latent_usage']['kl']:.3f}, samples parse {evaluation['samples']['parse_rate']:.2f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
