"""A curve design's looks recomputed from their runs under other float paths: how far each figure moves, and whether
any decision does (issue 59). The tables and the next look refit every look and refuse one whose figures its runs do
not give within sequential/curve_looks.RECOMPUTE_TOLERANCE; this measures what that tolerance must absorb.

    python -m bench.look_float_drift results/curve_design

Each variant recomputes every look of the design (its open curves' population fits, intervals, tests, placements) in
a process of its own whose environment changes only how the floats are summed: BLAS threads (OpenBLAS splits its
products over threads), OpenBLAS's kernels for another CPU (OPENBLAS_CORETYPE), numpy without its AVX2/AVX512 loops.
Per variant: the largest relative difference of any number from the first variant's (the files', made under the
code that made them, beside it), where it is, and any field that is not a number (a decision, a reading, a
placement) that differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from experiments.synthetic_sequences.sequential.look_files import look_number

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VARIANTS = {
    "1 BLAS thread (as snakemake runs it)": ONE_THREAD,
    "2 BLAS threads": {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
    "OpenBLAS Sandybridge kernels": {**ONE_THREAD, "OPENBLAS_CORETYPE": "Sandybridge"},
    "numpy without AVX2/AVX512": {**ONE_THREAD, "NPY_DISABLE_CPU_FEATURES": "AVX2 FMA3 AVX512F AVX512CD AVX512_SKX"},
}


def recompute(results: Path, out: Path) -> None:
    """Every look's groups as its runs give them now, written to `out` (one list per look, in order)."""
    from experiments.synthetic_sequences.analysis.records.metrics_files import read_metrics, runs_table
    from experiments.synthetic_sequences.run_layout import metrics_path
    from experiments.synthetic_sequences.sequential.curve_design import curve_design_from_record
    from experiments.synthetic_sequences.sequential.curve_looks import curve_groups

    looks = [json.loads(path.read_text()) for path in sorted((results / "design").glob("look*.json"), key=look_number)]
    design = curve_design_from_record(looks[0]["design"])
    made = []
    for index, look in enumerate(looks):
        runs = runs_table(read_metrics([metrics_path(results, run) for run in sorted(look["runs_read"])])[0])
        made.append(curve_groups(runs, design, look["look"], looks[index - 1] if index else None, look["spans"]))
        print(f"look {look['look']} recomputed", file=sys.stderr)
    out.write_text(json.dumps(made))


def leaves(value, where: str = "") -> Iterator[tuple[str, object]]:
    """(path, value) of every leaf of a JSON value."""
    if isinstance(value, Mapping):
        for key in sorted(value):
            yield from leaves(value[key], f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{where}[{index}]")
    else:
        yield where, value


def drift(filed: list, made: list) -> tuple[float, str, list[str]]:
    """The largest relative difference of a number (and where), and the fields that are not numbers and differ."""
    largest, at, differ = 0.0, "-", []
    old_leaves, new_leaves = dict(leaves(filed)), dict(leaves(made))
    differ += [f"{where}: only in the file" for where in old_leaves.keys() - new_leaves.keys()]
    differ += [f"{where}: only recomputed" for where in new_leaves.keys() - old_leaves.keys()]
    for where in sorted(old_leaves.keys() & new_leaves.keys()):
        old, new = old_leaves[where], new_leaves[where]
        if isinstance(old, float | int) and isinstance(new, float | int) and not isinstance(old, bool):
            if old == new or (math.isnan(old) and math.isnan(new)):
                continue
            if not (math.isfinite(old) and math.isfinite(new)):  # nan or an open end on one side only
                differ.append(f"{where}: {old!r} -> {new!r}")
                continue
            relative = abs(new - old) / max(abs(old), abs(new), 1e-9)
            if relative > largest:
                largest, at = relative, where
        elif old != new:
            differ.append(f"{where}: {old!r} -> {new!r}")
    return largest, at, differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a curve design's results folder, with design/look*.json")
    parser.add_argument("--recompute-to", type=Path, help=argparse.SUPPRESS)  # a variant's own process
    args = parser.parse_args()
    if args.recompute_to:
        recompute(args.results, args.recompute_to)
        return
    paths = sorted((args.results / "design").glob("look*.json"), key=look_number)
    if not paths:
        raise SystemExit(f"{args.results}/design: no look files; run the design first")
    filed = [json.loads(path.read_text())["groups"] for path in paths]
    print(f"{len(paths)} looks of {args.results}; the largest relative difference of any number, and where:")
    base = None
    for name, env in VARIANTS.items():
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "made.json"
            command = [sys.executable, "-m", "bench.look_float_drift", str(args.results), "--recompute-to", str(out)]
            subprocess.run(command, env={**os.environ, **env}, check=True)
            made = json.loads(out.read_text())
        if base is None:
            base = made
            report("the files against it", *drift(filed, made))
        report(f"{name}, against the first", *drift(base, made))


def report(name: str, largest: float, at: str, differ: list[str]) -> None:
    print(f"  {name}: {largest:.2g} at groups{at}; other fields differing: {len(differ)}", flush=True)
    for line in differ[:5]:
        print(f"    {line}")


if __name__ == "__main__":
    main()
