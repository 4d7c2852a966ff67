"""Sequence records on disk: one parquet file per split.

Columns: id, task, strategy, answer (strings), x and y (lists of token ids; y is
the supervised region), y_length. The schema metadata carries the vocabulary,
the split name and the generator settings, so every downstream artifact can
check it was given records in the vocabulary it expects.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.disentanglement.artifacts import atomic_path

RECORD_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("task", pa.string()),
        ("strategy", pa.string()),
        ("answer", pa.string()),
        ("x", pa.list_(pa.int32())),
        ("y", pa.list_(pa.int32())),
        ("y_length", pa.int32()),
    ]
)


class RecordsError(ValueError):
    """A records file that is missing, unreadable or inconsistent; the message names the file."""


@dataclass(frozen=True)
class Records:
    frame: pd.DataFrame
    vocab: tuple[str, ...]
    split: str
    metadata: dict
    path: Path

    def __len__(self) -> int:
        return len(self.frame)

    def token_id(self, token: str) -> int:
        return self.vocab.index(token)


def write_records(frame: pd.DataFrame, path: str | os.PathLike, *, vocab: list[str], split: str, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame[RECORD_SCHEMA.names], schema=RECORD_SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata(
        {"vocab": json.dumps(list(vocab)), "split": split, "generator": json.dumps(metadata, sort_keys=True)}
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_parquet_table(path: str | os.PathLike, what: str) -> pa.Table:
    path = Path(path)
    if not path.is_file():
        raise RecordsError(f"{what} file {path} does not exist")
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise RecordsError(f"{what} file {path} is not a readable parquet file: {err}") from err


def read_records(path: str | os.PathLike) -> Records:
    path = Path(path)
    table = read_parquet_table(path, "records")
    missing = [name for name in RECORD_SCHEMA.names if name not in table.column_names]
    if missing:
        raise RecordsError(f"records file {path} lacks columns {missing}; expected {RECORD_SCHEMA.names}")
    meta = table.schema.metadata or {}
    if b"vocab" not in meta or b"split" not in meta:
        raise RecordsError(f"records file {path} has no vocab/split metadata; was it written by write_records?")
    vocab = tuple(json.loads(meta[b"vocab"]))
    frame = table.select(RECORD_SCHEMA.names).to_pandas()
    if frame.empty:
        raise RecordsError(f"records file {path} holds no records (empty split)")
    lengths = frame["y"].map(len)
    if (lengths != frame["y_length"]).any() or (lengths == 0).any():
        bad = frame.loc[(lengths != frame["y_length"]) | (lengths == 0), "id"].tolist()[:5]
        raise RecordsError(f"records file {path}: y_length disagrees with y, or y is empty, for ids {bad}")
    tokens = np.concatenate([*frame["x"], *frame["y"]])
    if tokens.min() < 0 or tokens.max() >= len(vocab):
        raise RecordsError(
            f"records file {path}: token ids span [{tokens.min()}, {tokens.max()}], outside the vocabulary of size {len(vocab)}"
        )
    return Records(
        frame=frame,
        vocab=vocab,
        split=meta[b"split"].decode(),
        metadata=json.loads(meta.get(b"generator", b"{}")),
        path=path,
    )
