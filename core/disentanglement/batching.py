"""Length-bucketed batches of records for the decoder.

A sequence is [<bos>] + x + [<sep>] + y, right-padded. Only y is supervised;
`y` and `mask` are laid out [B, T] with y's first token at column 0, the layout
every token-level loss (and the stored z-free scores b_{i,t}) uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch


@dataclass(frozen=True)
class SequenceBatch:
    tokens: torch.Tensor  # [B, L] long: <bos> x <sep> y, padded
    y_start: torch.Tensor  # [B] long: column of y's first token in `tokens`
    y: torch.Tensor  # [B, T] long: supervised targets, padded
    mask: torch.Tensor  # [B, T] bool: supervised positions
    index: torch.Tensor  # [B] long: row of each example in the records frame

    def _map(self, fn) -> SequenceBatch:
        return SequenceBatch(*(fn(getattr(self, f.name)) for f in fields(self)))

    def to(self, device: torch.device | str) -> SequenceBatch:
        return self._map(lambda t: t.to(device, non_blocking=True))

    def select(self, rows: torch.Tensor) -> SequenceBatch:
        """The examples at `rows`, trimmed to the longest of them: a sub-batch pads only to its own maximum."""
        length, y_max = int(self.lengths()[rows].max()), int(self.mask[rows].sum(dim=1).max())
        return SequenceBatch(
            self.tokens[rows, :length], self.y_start[rows], self.y[rows, :y_max], self.mask[rows, :y_max], self.index[rows]
        )

    def length_groups(self, groups: int) -> list[torch.Tensor]:
        """Row indices sorted by sequence length and cut into `groups` near-equal chunks (fewer for a small batch)."""
        order = torch.argsort(self.lengths(), stable=True)
        return [rows for rows in order.tensor_split(min(groups, len(order))) if len(rows)]

    def repeat(self, times: int) -> SequenceBatch:
        """The batch stacked `times` over (sample-major: row s * B + i is example i), for S latents per example."""
        return self._map(lambda t: t.repeat(times, *[1] * (t.dim() - 1)))

    def lengths(self) -> torch.Tensor:
        """[B] long: the real tokens of each example, <bos> x <sep> y."""
        return self.y_start + self.mask.sum(dim=1)

    def sequence_mask(self) -> torch.Tensor:
        """[B, L] bool: the real tokens <bos> x <sep> y."""
        columns = torch.arange(self.tokens.shape[1], device=self.tokens.device)
        return columns < self.lengths()[:, None]

    def prompt_mask(self) -> torch.Tensor:
        """[B, L] bool: the conditioning tokens <bos> x <sep> alone."""
        columns = torch.arange(self.tokens.shape[1], device=self.tokens.device)
        return columns < self.y_start[:, None]

    @property
    def num_tokens(self) -> int:
        """Positions the decoder computes, padding included."""
        return self.tokens.numel()

    @property
    def num_supervised(self) -> int:
        return int(self.mask.sum())


@dataclass(frozen=True)
class SpecialTokens:
    pad: int
    bos: int
    sep: int

    @classmethod
    def from_vocab(cls, vocab: Sequence[str]) -> SpecialTokens:
        return cls(pad=vocab.index("<pad>"), bos=vocab.index("<bos>"), sep=vocab.index("<sep>"))


def collate(xs: Sequence[Sequence[int]], ys: Sequence[Sequence[int]], index: Sequence[int], special: SpecialTokens) -> SequenceBatch:
    batch = len(xs)
    lengths = [len(x) + len(y) + 2 for x, y in zip(xs, ys, strict=True)]
    y_max = max(len(y) for y in ys)
    tokens = np.full((batch, max(lengths)), special.pad, dtype=np.int64)
    y_pad = np.full((batch, y_max), special.pad, dtype=np.int64)
    mask = np.zeros((batch, y_max), dtype=bool)
    y_start = np.empty(batch, dtype=np.int64)
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        start = len(x) + 2
        tokens[i, 0] = special.bos
        tokens[i, 1 : start - 1] = x
        tokens[i, start - 1] = special.sep
        tokens[i, start : start + len(y)] = y
        y_pad[i, : len(y)] = y
        mask[i, : len(y)] = True
        y_start[i] = start
    return SequenceBatch(
        tokens=torch.from_numpy(tokens),
        y_start=torch.from_numpy(y_start),
        y=torch.from_numpy(y_pad),
        mask=torch.from_numpy(mask),
        index=torch.as_tensor(np.asarray(index, dtype=np.int64)),
    )


def _chunks(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def random_batches(count: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Index batches of a random permutation: every batch mixes lengths (and so strategies)."""
    return _chunks(rng.permutation(count), batch_size)


def bucketed_batches(lengths: Sequence[int], batch_size: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Index batches of similar total length, so padding is a small share of the work.

    With rng, ties are broken at random and the batch order is shuffled (training);
    without, batches are in length order (scoring, deterministic).
    """
    lengths = np.asarray(lengths)
    tie_break = rng.random(len(lengths)) if rng is not None else np.arange(len(lengths))
    order = np.lexsort((tie_break, lengths))
    batches = _chunks(order, batch_size)
    if rng is not None:
        rng.shuffle(batches)
    return batches


class RecordBatcher:
    """Batches over one records frame; holds the token lists once, builds batches on demand."""

    def __init__(self, frame, special: SpecialTokens):
        self.xs = [np.asarray(x) for x in frame["x"]]
        self.ys = [np.asarray(y) for y in frame["y"]]
        self.lengths = np.array([len(x) + len(y) + 2 for x, y in zip(self.xs, self.ys, strict=True)])
        self.special = special

    def __len__(self) -> int:
        return len(self.xs)

    def batch(self, index: Sequence[int]) -> SequenceBatch:
        return collate([self.xs[i] for i in index], [self.ys[i] for i in index], index, self.special)

    def epoch(self, batch_size: int, rng: np.random.Generator | None = None):
        for index in bucketed_batches(self.lengths, batch_size, rng):
            yield self.batch(index)

    def padding_share(self, batch_size: int) -> float:
        """Share of computed positions that are padding, over one epoch of bucketed batches."""
        batches = bucketed_batches(self.lengths, batch_size)
        computed = sum(len(b) * self.lengths[b].max() for b in batches)
        return 1.0 - self.lengths.sum() / computed


class BatchSchedule:
    """The batch of every step, a pure function of (seed, step): a resumed run sees the same batches."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, batching: str):
        self.lengths, self.batch_size, self.seed, self.batching = lengths, batch_size, seed, batching
        self.per_epoch = -(-len(lengths) // batch_size)
        self._epoch, self._batches = None, None

    def __call__(self, step: int) -> np.ndarray:
        epoch = step // self.per_epoch
        if epoch != self._epoch:
            rng = np.random.default_rng([self.seed, epoch])
            if self.batching == "bucketed":
                self._batches = bucketed_batches(self.lengths, self.batch_size, rng)
            else:
                self._batches = random_batches(len(self.lengths), self.batch_size, rng)
            self._epoch = epoch
        return self._batches[step % self.per_epoch]


def step_generator(seed: int, step: int, device) -> torch.Generator:
    """Sampling noise (Gumbel, reparameterisation) of one step, reproducible from (seed, step) alone."""
    return torch.Generator(device=device).manual_seed(seed * 1_000_003 + step)
