"""The frozen z-free reference p(y|x): train it once, then score records with it.

    python -m core.disentanglement.zfree train --train results/data/train.parquet \
        --val results/data/val.parquet --checkpoint results/zfree/model.pt
    python -m core.disentanglement.zfree score --checkpoint results/zfree/model.pt \
        --records results/data/val.parquet --out results/zfree/scores/val.parquet

Training minimises the maximum-likelihood token NLL over the y region (every
supervised token counts once; this model is the reference, not part of the
mean-vs-sum ablation). Scoring writes b_{i,t} for every supervised token.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from core.disentanglement.artifacts import save_torch, sha256_file, write_json, write_jsonl
from core.disentanglement.batching import RecordBatcher, SpecialTokens
from core.disentanglement.checks import check_field_types, check_heads_divide_width, check_minimum, check_positive_counts
from core.disentanglement.cli import add_settings_flags, setting, settings_from_flat
from core.disentanglement.decoder import Decoder, DecoderConfig, token_nll, uniform_nll
from core.disentanglement.records import Records, RecordsError, read_records
from core.disentanglement.scores import write_scores
from core.disentanglement.training import LoopSchedule, NonFiniteLoss, TrainingLoop

CHECKPOINT_KEYS = ("kind", "decoder_config", "state_dict", "vocab", "train_config")
GRAD_CLIP = 1.0


@dataclass(frozen=True)
class ZFreeTrainConfig:
    seed: int = setting(0, "seed of the initial weights and the batch order")
    steps: int = setting(1500, "optimisation steps")
    batch_size: int = setting(64, "examples per batch")
    lr: float = setting(3e-3, "peak learning rate of the warmup-cosine schedule")
    weight_decay: float = setting(0.01, "AdamW weight decay")
    warmup_steps: int = setting(100, "linear learning-rate warmup steps")
    eval_every: int = setting(250, "steps between validation NLL points (and progress lines)")
    d_model: int = setting(64, "transformer width")
    n_layer: int = setting(2, "decoder layers")
    n_head: int = setting(4, "attention heads")

    def __post_init__(self) -> None:
        check_field_types(self)
        check_positive_counts(self, ("steps", "batch_size", "eval_every", "d_model", "n_layer", "n_head"))
        check_heads_divide_width(self)
        check_minimum(self, ("lr",), strict=True)


def check_same_vocab(records: Records, vocab: Sequence[str], source: str) -> None:
    if tuple(records.vocab) != tuple(vocab):
        raise RecordsError(
            f"records file {records.path} has a vocabulary of {len(records.vocab)} tokens that differs from {source}'s ({len(vocab)})"
        )


@torch.inference_mode()
def mean_token_nll(model: Decoder, batcher: RecordBatcher, batch_size: int = 256) -> float:
    """Validation NLL per supervised token (all tokens pooled)."""
    total, count = 0.0, 0
    for batch in batcher.epoch(batch_size):
        nll = token_nll(model(batch), batch.y)
        total += float(nll[batch.mask].sum())
        count += batch.num_supervised
    return total / count


class ZFreeTask:
    """The z-free model's part of the training loop: maximum-likelihood token NLL, a val NLL row per evaluation."""

    def __init__(
        self, model: Decoder, train_batcher: RecordBatcher, val_batcher: RecordBatcher, loop: TrainingLoop, config: ZFreeTrainConfig
    ):
        self.model, self.train_batcher, self.val_batcher, self.loop = model, train_batcher, val_batcher, loop
        rng = np.random.default_rng(config.seed)
        self.batches = itertools.chain.from_iterable(train_batcher.epoch(config.batch_size, rng) for _ in itertools.count())
        self.rows: list[dict] = []
        self.tokens_seen = 0
        self.train_nll = math.nan

    def loss(self, step: int) -> tuple[torch.Tensor, dict[str, float]]:
        batch = next(self.batches)
        self.tokens_seen += int(self.train_batcher.lengths[batch.index.numpy()].sum())
        loss = token_nll(self.model(batch), batch.y)[batch.mask].mean()
        return loss, {"loss": loss.item()}

    def logged(self, step: int, metrics: dict[str, float]) -> None:
        self.train_nll = metrics["loss"]

    def evaluate(self, step: int) -> None:
        training_s = self.loop.elapsed() - self.loop.evaluation_s  # the steps so far, without their evaluations
        self.model.eval()
        val_nll = mean_token_nll(self.model, self.val_batcher)
        tokens_per_s = self.tokens_seen / training_s
        self.rows.append(
            {"step": step, "train_nll": self.train_nll, "val_nll": val_nll, "tokens_per_s": tokens_per_s, "elapsed_s": self.loop.elapsed()}
        )

    def progress(self, step: int, metrics: dict[str, float]) -> str:
        row = self.rows[-1]
        return f"train_nll {row['train_nll']:.4f} val_nll {row['val_nll']:.4f} ({row['tokens_per_s']:.0f} tok/s)"

    def after(self, step: int) -> None:
        """No resume state: a z-free training takes seconds to minutes and an interrupted one starts over."""


def train_zfree(train_path: str | Path, val_path: str | Path, checkpoint_path: str | Path, config: ZFreeTrainConfig, log_path=None) -> dict:
    train, val = read_records(train_path), read_records(val_path)
    check_same_vocab(val, train.vocab, f"train records {train.path}")
    special = SpecialTokens.from_vocab(train.vocab)
    train_batcher, val_batcher = RecordBatcher(train.frame, special), RecordBatcher(val.frame, special)
    max_len = int(max(train_batcher.lengths.max(), val_batcher.lengths.max()))

    torch.manual_seed(config.seed)
    decoder_config = DecoderConfig(
        vocab_size=len(train.vocab), max_len=max_len + 16, d_model=config.d_model, n_layer=config.n_layer, n_head=config.n_head
    )
    model = Decoder(decoder_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = LoopSchedule(config.steps, config.lr, config.warmup_steps, GRAD_CLIP, config.eval_every, config.eval_every)
    loop = TrainingLoop(model, optimizer, schedule, "zfree")
    task = ZFreeTask(model, train_batcher, val_batcher, loop, config)
    try:
        loop.run(task)
    except NonFiniteLoss as err:
        raise NonFiniteLoss(f"{err}; nothing was saved") from err
    return save_zfree(model, train, val, config, task.rows, checkpoint_path, log_path)


def save_zfree(model: Decoder, train: Records, val: Records, config: ZFreeTrainConfig, rows: list[dict], checkpoint_path, log_path) -> dict:
    """The checkpoint, its .json summary beside it and the optional training log; returns the summary."""
    summary = {
        "kind": "zfree",
        "decoder_config": model.config.to_dict(),
        "vocab": list(train.vocab),
        "train_config": asdict(config),
        "inputs": {
            "train": str(train.path),
            "train_sha256": sha256_file(train.path),
            "val": str(val.path),
            "val_sha256": sha256_file(val.path),
        },
        "val_nll_per_token": rows[-1]["val_nll"],
        "uniform_nll_per_token": uniform_nll(len(train.vocab)),
        "parameters": model.num_parameters(),
    }
    checkpoint_path = Path(checkpoint_path)
    # no timing inside the checkpoint: the same training gives the same bytes, so its recorded sha256 is stable
    save_torch({**summary, "state_dict": model.state_dict()}, checkpoint_path)
    summary["train_tokens_per_s"] = rows[-1]["tokens_per_s"]
    write_json(summary, checkpoint_path.with_suffix(".json"))
    if log_path is not None:
        write_jsonl(rows, log_path)
    return summary


def load_decoder(checkpoint_path: str | Path) -> tuple[Decoder, dict]:
    """The frozen decoder and its checkpoint dict; a clear error for anything that is not a matching checkpoint."""
    path = Path(checkpoint_path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several unrelated types for a corrupt file
        raise ValueError(f"checkpoint {path} could not be loaded: {err}") from err
    missing = [key for key in CHECKPOINT_KEYS if not isinstance(checkpoint, dict) or key not in checkpoint]
    if missing:
        raise ValueError(f"checkpoint {path} lacks {missing}; is it a z-free checkpoint written by 'zfree train'?")
    config = DecoderConfig(**checkpoint["decoder_config"])
    if config.vocab_size != len(checkpoint["vocab"]):
        raise ValueError(f"checkpoint {path}: decoder_config.vocab_size {config.vocab_size} != vocabulary size {len(checkpoint['vocab'])}")
    model = Decoder(config)
    try:
        model.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:
        raise ValueError(f"checkpoint {path}: weights do not match its decoder_config {config}: {err}") from err
    model.eval().requires_grad_(False)
    return model, checkpoint


def score_records(checkpoint_path: str | Path, records_path: str | Path, out_path: str | Path, batch_size: int = 256) -> dict:
    """Write b_{i,t} for every record to `out_path`; return throughput figures."""
    model, checkpoint = load_decoder(checkpoint_path)
    records = read_records(records_path)
    check_same_vocab(records, checkpoint["vocab"], f"checkpoint {checkpoint_path}")
    batcher = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab))
    if batcher.lengths.max() > model.config.max_len:
        raise RecordsError(
            f"records file {records.path} has sequences of {batcher.lengths.max()} tokens; checkpoint max_len is {model.config.max_len}"
        )

    per_record: list[np.ndarray | None] = [None] * len(batcher)
    computed, started = 0, time.perf_counter()
    with torch.inference_mode():
        for batch in batcher.epoch(batch_size):
            nll = token_nll(model(batch), batch.y).float().numpy()
            for row, i in enumerate(batch.index.tolist()):
                per_record[i] = nll[row, : len(batcher.ys[i])]
            computed += batch.num_tokens
    elapsed = time.perf_counter() - started

    frame = pd.DataFrame({"id": records.frame["id"], "n": records.frame["y_length"].astype("int32"), "token_nll": per_record})
    provenance = {
        "checkpoint": str(checkpoint_path),
        "checkpoint_sha256": sha256_file(checkpoint_path),
        # the reference block the scores belong to: a z-free model's seed (an entangled run's checkpoint has none)
        "zfree_seed": checkpoint["train_config"].get("seed") if checkpoint["kind"] == "zfree" else None,
        "records": str(records.path),
        "records_sha256": sha256_file(records.path),
        "vocab": list(records.vocab),
    }
    write_scores(frame, out_path, split=records.split, metadata=provenance)
    real_tokens = int(batcher.lengths.sum())
    supervised = int(records.frame["y_length"].sum())
    return {
        "records": len(batcher),
        "tokens_per_s": real_tokens / elapsed,
        "padding_share": 1.0 - real_tokens / computed,
        "nll_per_token": float(sum(a.sum() for a in per_record) / supervised),
        "seconds": elapsed,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train the z-free decoder on the train split")
    train.add_argument("--train", required=True, help="train records parquet")
    train.add_argument("--val", required=True, help="validation records parquet (for the reported val NLL)")
    train.add_argument("--checkpoint", required=True, help="output .pt; a .json summary is written beside it")
    train.add_argument("--log", default=None, help="optional JSONL training log")
    add_settings_flags(train, ZFreeTrainConfig)
    score = commands.add_parser("score", help="write per-token NLL b_{i,t} of records with a frozen checkpoint")
    score.add_argument("--checkpoint", required=True)
    score.add_argument("--records", required=True, help="records parquet to score")
    score.add_argument("--out", required=True, help="output scores parquet")
    score.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        if args.command == "train":
            config = settings_from_flat(ZFreeTrainConfig, vars(args))
            summary = train_zfree(args.train, args.val, args.checkpoint, config, args.log)
            print(
                f"z-free val NLL {summary['val_nll_per_token']:.4f} nats/token vs uniform log V = {summary['uniform_nll_per_token']:.4f}",
                file=sys.stderr,
            )
        else:
            stats = score_records(args.checkpoint, args.records, args.out, args.batch_size)
            print(
                f"scored {stats['records']} records: {stats['nll_per_token']:.4f} nats/token, {stats['tokens_per_s']:.0f} tok/s, "
                f"padding {stats['padding_share']:.1%}",
                file=sys.stderr,
            )
    except (ValueError, FileNotFoundError, NonFiniteLoss) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
