"""Which seeds of an arm train together: the run grid cut into seed chunks, one training job each.

An arm (family, term, mode, alpha and, on a beta axis, beta) of one reference block trains its seeds in blocks of
`seeds_per_job` consecutive seed values: block k
holds the arm's seeds in [k * seeds_per_job, (k + 1) * seeds_per_job) and is named by that range, e.g. seeds0-9.
A chunk's name and members depend only on the seed values, so adding seeds adds chunks, and a block that gains
seeds keeps its name: its job reruns, and the trainer keeps the seeds it finished before and trains only the new.
A chunk's record lives beside its runs (run_layout.CHUNK_TEMPLATE): the workflow's record that its seeds finished.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from experiments.synthetic_sequences.planning.grid import RunSpec
from experiments.synthetic_sequences.run_layout import GridError

CHUNK_PATTERN = r"[0-9]+-[0-9]+"
CHUNK_NAME = re.compile(f"^({CHUNK_PATTERN})$")


def chunk_name(seed: int, seeds_per_job: int) -> str:
    """The block of `seed`: '10-19' for seed 12 at 10 seeds per job."""
    if seeds_per_job < 1:
        raise GridError(f"seeds_per_job: {seeds_per_job} is not allowed; it must be >= 1")
    first = seed // seeds_per_job * seeds_per_job
    return f"{first}-{first + seeds_per_job - 1}"


def chunk_path(spec: RunSpec, seeds_per_job: int) -> str:
    """The chunk a run trains in, run_layout.CHUNK_TEMPLATE filled: {family}/ref{reference}/{key}/seeds{first}-{last}."""
    return spec.chunk_path(chunk_name(spec.seed, seeds_per_job))


def chunk_grid(specs: Iterable[RunSpec], seeds_per_job: int) -> dict[str, list[RunSpec]]:
    """Every chunk of the grid by its path, its runs in seed order."""
    chunks: dict[str, list[RunSpec]] = {}
    for spec in specs:
        chunks.setdefault(chunk_path(spec, seeds_per_job), []).append(spec)
    return {path: sorted(runs, key=lambda spec: spec.seed) for path, runs in chunks.items()}


def chunk_seed_range(name: str) -> range:
    """'10-19' -> range(10, 20): the seed values a chunk's name covers."""
    if not CHUNK_NAME.match(name):
        raise GridError(f"chunk {name!r} is not first-last (two seed values)")
    first, last = (int(part) for part in name.split("-"))
    if last < first:
        raise GridError(f"chunk {name!r}: its last seed comes before its first")
    return range(first, last + 1)
