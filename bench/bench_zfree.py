"""z-free scoring throughput against training throughput of the same model.

    python bench/bench_zfree.py [--steps 300] [--threads 2]

Generates the default data, trains the default-size z-free decoder for --steps
steps (batch 64, length-bucketed), then scores the train split under
torch.inference_mode (batch 256, length-bucketed). Throughput counts real
sequence tokens (<bos> x <sep> y), padding excluded; training time excludes
its validation passes. Target: scoring >= 2x training.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from core.disentanglement.batching import RecordBatcher, SpecialTokens
from core.disentanglement.records import read_records
from core.disentanglement.zfree import ZFreeTrainConfig, score_records, train_zfree
from experiments.synthetic_sequences.generate import SequenceConfig, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = ZFreeTrainConfig(steps=args.steps, eval_every=args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        generate(SequenceConfig(), tmp / "data")
        summary = train_zfree(tmp / "data" / "train.parquet", tmp / "data" / "val.parquet", tmp / "model.pt", config)
        scoring = score_records(tmp / "model.pt", tmp / "data" / "train.parquet", tmp / "scores.parquet")
        records = read_records(tmp / "data" / "train.parquet")
    train_padding = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab)).padding_share(config.batch_size)
    ratio = scoring["tokens_per_s"] / summary["train_tokens_per_s"]
    print(f"# python bench/bench_zfree.py --steps {args.steps} --threads {args.threads}   (torch {torch.__version__})")
    print(f"model: {summary['parameters']} parameters, {summary['decoder_config']}")
    print(f"training: {summary['train_tokens_per_s']:9.0f} tokens/s  (batch {config.batch_size}, padding {train_padding:.1%})")
    padding = scoring["padding_share"]
    print(f"scoring:  {scoring['tokens_per_s']:9.0f} tokens/s  (batch 256, padding {padding:.1%}, {scoring['records']} records)")
    print(f"scoring / training = {ratio:.2f}x  (target >= 2x: {'met' if ratio >= 2 else 'MISSED'})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
