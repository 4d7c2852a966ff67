"""z-free scoring throughput against training throughput of the same model, and the padded share of every batch kind.

    python -m bench.zfree [--steps 300] [--threads 2]

Generates the default data, trains the default-size z-free decoder for --steps
steps (batch 64, length-bucketed), then scores the train split under
torch.inference_mode (batch 256, length-bucketed). Throughput counts real
sequence tokens (<bos> x <sep> y), padding excluded; training time excludes its
validation passes. A forward pass against forward + backward + AdamW bounds the
ratio near 3x; target at least 2.5x. Padding: the share of computed positions
that are padding, in z-free training and scoring batches and in the CVAE
trainer's batches (random composition, decoded in length groups); target under 15%.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from bench.common import BenchResult, Figure, default_config, print_result, progress
from core.disentanglement.batching import BatchSchedule, RecordBatcher, SpecialTokens
from core.disentanglement.records import read_records
from core.disentanglement.zfree import ZFreeTrainConfig, score_records, train_zfree
from experiments.synthetic_sequences.generate import SequenceConfig, generate
from experiments.synthetic_sequences.planning.grid import PATH_FIELDS
from experiments.synthetic_sequences.training.settings import OptimConfig, TrainConfig


def cvae_padding_share(batcher: RecordBatcher, optim: OptimConfig, groups: int) -> float:
    """Padded share of decoder positions over one epoch of the trainer's batches, each decoded in `groups` length groups."""
    schedule = BatchSchedule(batcher.lengths, optim.batch_size, optim.seed, optim.batching)
    computed = 0
    for step in range(schedule.per_epoch):
        batch = batcher.batch(schedule(step))
        computed += sum(batch.select(rows).num_tokens for rows in batch.length_groups(groups))
    return 1.0 - batcher.lengths.sum() / computed


def measure(steps: int = 300, threads: int = 2) -> BenchResult:
    torch.set_num_threads(threads)
    command = f"python -m bench.zfree --steps {steps} --threads {threads}"
    started = time.perf_counter()
    config = default_config()
    zfree = ZFreeTrainConfig(**{**config["zfree"], "steps": steps, "eval_every": steps})
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        generate(SequenceConfig(**config["data"]), tmp / "data")
        progress(f"training the z-free decoder for {steps} steps")
        summary = train_zfree(tmp / "data" / "train.parquet", tmp / "data" / "val.parquet", tmp / "model.pt", zfree)
        progress("scoring the train split")
        scoring = score_records(tmp / "model.pt", tmp / "data" / "train.parquet", tmp / "scores.parquet")
        records = read_records(tmp / "data" / "train.parquet")
    batcher = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab))
    settings = config["families"]["discrete"]["settings"]
    cvae = TrainConfig.from_flat({**dict.fromkeys(PATH_FIELDS, "-"), **settings})
    groups = cvae.model.latent.length_groups
    figures = [
        Figure(
            "scoring", "z-free scoring / training tokens per second", scoring["tokens_per_s"] / summary["train_tokens_per_s"], "x", ">= 2.5"
        ),
        Figure("scoring", "z-free training tokens per second (batch 64)", summary["train_tokens_per_s"], "tok/s"),
        Figure("scoring", "z-free scoring tokens per second (batch 256)", scoring["tokens_per_s"], "tok/s"),
        Figure("padding", "padded share: z-free scoring batches", 100 * scoring["padding_share"], "%", "< 15"),
        Figure("padding", "padded share: z-free training batches", 100 * batcher.padding_share(zfree.batch_size), "%", "< 15"),
        Figure(
            "padding",
            f"padded share: CVAE training batches ({cvae.optim.batching}, {groups} length groups)",
            100 * cvae_padding_share(batcher, cvae.optim, groups),
            "%",
            "< 15",
        ),
        Figure(
            "padding",
            f"padded share: CVAE training batches ({cvae.optim.batching}, one padded batch)",
            100 * cvae_padding_share(batcher, cvae.optim, 1),
            "%",
            note="before length groups",
        ),
    ]
    return BenchResult(command, figures, seconds=time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print_result(measure(args.steps, args.threads))


if __name__ == "__main__":
    main()
