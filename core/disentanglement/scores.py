"""Per-token z-free NLL b_{i,t} of records, as parquet.

Columns: id, n (= n_i, supervised tokens), token_nll (list of n float32, y
order). Schema metadata: the split, the vocabulary, and the sha256 of the
checkpoint and records that produced them.
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
import torch

from core.disentanglement.artifacts import atomic_path, sha256_file
from core.disentanglement.records import Records, RecordsError, read_parquet_table

SCORE_SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int32()), ("token_nll", pa.list_(pa.float32()))])


@dataclass(frozen=True)
class Scores:
    frame: pd.DataFrame
    split: str
    metadata: dict
    path: Path

    def padded(self, rows: np.ndarray | None = None, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """(b [N, T], mask [N, T]) for the given rows (all by default), y-aligned like SequenceBatch."""
        arrays = list(self.frame["token_nll"] if rows is None else self.frame["token_nll"].iloc[rows])
        width = max(len(a) for a in arrays)
        values = np.zeros((len(arrays), width), dtype=np.float64)
        mask = np.zeros((len(arrays), width), dtype=bool)
        for i, a in enumerate(arrays):
            values[i, : len(a)] = a
            mask[i, : len(a)] = True
        return torch.as_tensor(values, dtype=dtype), torch.from_numpy(mask)


def write_scores(frame: pd.DataFrame, path: str | os.PathLike, *, split: str, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame[SCORE_SCHEMA.names], schema=SCORE_SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({"split": split, "provenance": json.dumps(metadata, sort_keys=True)})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_scores(path: str | os.PathLike) -> Scores:
    path = Path(path)
    table = read_parquet_table(path, "scores")
    meta = table.schema.metadata or {}
    if table.schema.names[:3] != SCORE_SCHEMA.names or b"split" not in meta:
        raise RecordsError(f"scores file {path} is not a z-free scores file (columns {table.schema.names}, expected {SCORE_SCHEMA.names})")
    frame = table.to_pandas()
    if frame.empty:
        raise RecordsError(f"scores file {path} holds no records (empty split)")
    if (frame["token_nll"].map(len) != frame["n"]).any() or (frame["n"] < 1).any():
        raise RecordsError(f"scores file {path}: n disagrees with token_nll, or n < 1, for some records")
    # an NLL is finite and >= 0; negated or corrupted scores would silently reweight every token-weighted term
    bad = ~frame["token_nll"].map(lambda nll: bool(np.isfinite(nll).all() and (nll >= 0).all()))
    if bad.any():
        raise RecordsError(f"scores file {path}: token_nll holds a negative or non-finite NLL for ids {frame.loc[bad, 'id'].tolist()[:5]}")
    return Scores(frame=frame, split=meta[b"split"].decode(), metadata=json.loads(meta.get(b"provenance", b"{}")), path=path)


def check_scores_of(scores: Scores, records: Records, split: str) -> None:
    """Refuse scores that are not b of exactly `records`, the `split` split: the split named by both files, the records
    file they were scored from (sha256), the ids in order, and n_i = the record's supervised token count."""
    for what, path, actual in (("scores", scores.path, scores.split), ("records", records.path, records.split)):
        if actual != split:
            raise RecordsError(f"{what} file {path}: split is {actual!r}, but it was given as the {split!r} split")
    scored_from = scores.metadata.get("records_sha256")
    if scored_from is None:
        raise RecordsError(f"scores file {scores.path}: provenance lacks records_sha256; was it written by 'zfree score'?")
    if scored_from != sha256_file(records.path):
        raise RecordsError(f"scores file {scores.path}: records_sha256 {scored_from[:12]}... is not that of {records.path}")
    if scores.frame["id"].tolist() != records.frame["id"].tolist():
        raise RecordsError(f"scores file {scores.path}: id does not list the records of {records.path} in the same order")
    differs = scores.frame["n"].to_numpy() != records.frame["y_length"].to_numpy()
    if differs.any():
        ids = scores.frame.loc[differs, "id"].tolist()[:5]
        raise RecordsError(f"scores file {scores.path}: n disagrees with y_length of {records.path} for ids {ids}")
