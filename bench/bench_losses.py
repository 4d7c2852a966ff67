"""Cost of the whole reconstruction family against a plain masked token-mean NLL and a decoder training step.

    python bench/bench_losses.py [--samples 4] [--batch 64] [--threads 2]

Inputs are a real batch of generated records: token NLL [S, B, T] from the
default-size decoder run on S copies of the batch (S latent samples). Reports
medians from torch.utils.benchmark and three ratios:
  family / plain          the loss arithmetic alone, forward + backward
  step(family) / step(plain)   a full decoder training step with each loss (target < 1.03)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils import benchmark

from core.disentanglement.batching import RecordBatcher, SpecialTokens
from core.disentanglement.decoder import Decoder, DecoderConfig, token_nll
from core.disentanglement.losses import reconstruction_terms
from core.disentanglement.records import read_records
from experiments.synthetic_sequences.generate import SequenceConfig, generate


def family_loss(nll: torch.Tensor, base: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Every term of the family at once, so one backward pays for all of them."""
    terms = reconstruction_terms(nll, base, mask, mode=mode, alpha=1.0, c_base=1.0, epsilon=1e-3)
    return terms["raw"] + terms["dist"] + terms["ex"] + terms["tok"] + terms["tokcc"] + terms["tokinv"]


def plain_loss(nll: torch.Tensor, base: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    return torch.where(mask, nll, 0.0).sum() / (nll.shape[0] * mask.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-run-time", type=float, default=2.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory() as tmp:
        generate(SequenceConfig(seed=0, n_train=args.batch, n_val=1, n_test=1), tmp)
        records = read_records(Path(tmp) / "train.parquet")
    batch = RecordBatcher(records.frame, SpecialTokens.from_vocab(records.vocab)).batch(range(args.batch))
    repeated = type(batch)(
        *(t.repeat(args.samples, *[1] * (t.dim() - 1)) for t in (batch.tokens, batch.y_start, batch.y, batch.mask, batch.index))
    )
    model = Decoder(DecoderConfig(vocab_size=len(records.vocab)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    base = torch.rand(batch.mask.shape) * 3 + 0.1
    shape = (args.samples, *batch.mask.shape)
    leaf = torch.rand(shape, requires_grad=True)

    def loss_only(loss_fn, mode):
        loss_fn(leaf, base, batch.mask, mode).backward()

    def train_step(loss_fn, mode):
        nll = token_nll(model(repeated), repeated.y).view(shape)  # [S, B, T]
        loss = loss_fn(nll, base, batch.mask, mode)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def median(fn, *fn_args) -> float:
        timer = benchmark.Timer(stmt="fn(*fn_args)", globals={"fn": fn, "fn_args": fn_args}, num_threads=args.threads)
        return timer.blocked_autorange(min_run_time=args.min_run_time).median

    print(f"# python bench/bench_losses.py --samples {args.samples} --batch {args.batch} --threads {args.threads}")
    print(f"# [S, B, T] = {list(shape)}, torch {torch.__version__}, {args.threads} threads")
    plain_loss_s = median(loss_only, plain_loss, "mean")
    # the plain step is timed before and after the family steps and averaged, so drift on a shared machine cancels
    plain_steps = [median(train_step, plain_loss, "mean")]
    family = {mode: (median(loss_only, family_loss, mode), median(train_step, family_loss, mode)) for mode in ("mean", "sum")}
    plain_steps.append(median(train_step, plain_loss, "mean"))
    plain_step_s = sum(plain_steps) / 2
    print(
        f"plain masked token mean: loss fwd+bwd {plain_loss_s * 1e6:9.1f} us   train step {plain_step_s * 1e3:7.2f} ms "
        f"(before {plain_steps[0] * 1e3:.2f}, after {plain_steps[1] * 1e3:.2f})"
    )
    for mode, (family_loss_s, family_step_s) in family.items():
        print(
            f"family ({mode:4s}):           loss fwd+bwd {family_loss_s * 1e6:9.1f} us   train step {family_step_s * 1e3:7.2f} ms   "
            f"loss ratio {family_loss_s / plain_loss_s:5.2f}   step ratio {family_step_s / plain_step_s:5.3f}   "
            f"family share of a plain step {family_loss_s / plain_step_s:6.2%}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
