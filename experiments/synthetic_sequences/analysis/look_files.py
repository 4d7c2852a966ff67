"""A look file checked against what it claims before anything uses it: planning/looks.py checks it against itself,
the look before and the runs' metrics files; here its decisions are recomputed from those runs by the code that made
them (sequential.look_groups). The Snakefile, the next look and the tables read look files only through here, and
each look's file is written here:

    python -m experiments.synthetic_sequences.analysis.look_files --look 2 --design '{"kind": "sequential", ...}' \
        --control-of discrete-scale=discrete,discrete-balance=discrete --metrics results/metrics/...parquet ... \
        --previous results/design/look1.json --out results/design/look2.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, sha256_json, write_json
from experiments.synthetic_sequences.analysis.metrics_files import check_extracted, read_metrics, runs_table
from experiments.synthetic_sequences.analysis.sequential import look_groups
from experiments.synthetic_sequences.planning.bindings import BindingError
from experiments.synthetic_sequences.planning.design import Design, DesignError, parse_design
from experiments.synthetic_sequences.planning.grid import parse_control_of
from experiments.synthetic_sequences.planning.looks import (
    RECOMPUTE,
    check_look_runs,
    design_from_record,
    look_document,
    read_look,
    record_design,
    results_of,
)
from experiments.synthetic_sequences.run_layout import metrics_path


def verified_look(
    path: str | Path,
    design: Design,
    control_of: Mapping[str, str],
    previous: Mapping | None,
    expected_runs: Collection[str] | None = None,
    require_runs: bool = True,
) -> dict:
    """A look file that may be used: read_look and check_look_runs (planning/looks.py), then its decisions recomputed
    from the runs it read with look_groups, the function that made them. Raises DesignError naming the file and the
    first disagreement. With require_runs False (the Snakefile, while extraction may still rewrite a metrics file),
    a look some of whose metrics files are missing is not recomputed; the job that reads it next checks it whole."""
    document = read_look(path, design)
    check_look_runs(document, path, previous, expected_runs)
    paths = [metrics_path(results_of(path), run) for run in sorted(document["runs_read"])]
    if missing := [metrics for metrics in paths if not Path(metrics).exists()]:
        if require_runs:
            raise DesignError(f"{path}: {missing[0]}, a run it read, is missing ({len(missing)} of {len(paths)})")
        return document
    counts = runs_table(read_metrics(paths)[0])
    groups = json.loads(json.dumps(look_groups(counts, control_of, design, document["look"], previous)))
    if sha256_json(groups) != sha256_json(document["groups"]):
        raise DesignError(f"{path}: {first_difference(document['groups'], groups)}; the file does not follow from its runs; {RECOMPUTE}")
    return document


def verified_looks(paths: Sequence[str | Path], design: Design, control_of: Mapping[str, str]) -> list[dict]:
    """Looks 1..k in order, each verified against the one before it."""
    documents: list[dict] = []
    for path in paths:
        documents.append(verified_look(path, design, control_of, documents[-1] if documents else None))
    return documents


def first_difference(recorded: list[Mapping], recomputed: list[Mapping]) -> str:
    """The first place where a look file's groups and those its runs give differ, in words."""

    def by_group(groups: list[Mapping]) -> dict:
        return {(g["family"], g["term"], float(g["alpha"])): g for g in groups}

    have, want = by_group(recorded), by_group(recomputed)
    for key in sorted(set(have) | set(want)):
        where = f"{key[0]} {key[1]} alpha={key[2]:g}"
        if key not in have or key not in want:
            return f"group {where} is {'in its runs but not in the file' if key in want else 'in the file but not in its runs'}"
        for name in sorted(set(have[key]["decisions"]) | set(want[key]["decisions"])):
            filed, made = have[key]["decisions"].get(name, {}), want[key]["decisions"].get(name, {})
            for field in sorted(set(filed) | set(made), key=lambda field: (field != "decision", field)):
                if json.dumps(filed.get(field)) != json.dumps(made.get(field)):
                    return f"{where} {name}: {field} {filed.get(field)!r} in the file, {made.get(field)!r} from its runs"
        if have[key]["train_next"] != want[key]["train_next"]:
            return f"{where}: train_next {have[key]['train_next']} in the file, {want[key]['train_next']} from its runs"
    return "its groups are not those its runs give"


def read_looks(paths: Sequence[str | Path], control_of: dict[str, str]) -> list[dict]:
    """A sequential design's look files, verified in order (verified_looks) under the design the first records."""
    if not paths:
        return []
    try:
        design = design_from_record(json.loads(Path(paths[0]).read_text())["design"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{paths[0]}: not a readable look file ({err})") from err
    return verified_looks(paths, design, control_of)


def check_looks_read(looks: Sequence[dict], grid: dict) -> None:
    """The runs the look files read, together, are the runs of the grid record the tables hold the metrics to."""
    read = set().union(*(look["runs_read"] for look in looks))
    if read != set(grid["runs"]):
        odd = sorted(read ^ set(grid["runs"]))
        raise BindingError(
            f"the look files read {len(read)} runs and the grid record names {len(grid['runs'])}; {odd[0]} is in "
            f"{'the looks only' if odd[0] in read else 'the grid record only'}: the record is not of these looks"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--look", type=int, required=True, help="the look, from 1")
    parser.add_argument("--design", required=True, help="the config's design block, as JSON")
    parser.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    parser.add_argument("--metrics", nargs="+", required=True, help="the metrics files of the runs this look reads")
    parser.add_argument("--previous", nargs="*", default=[], help="the look files of every look before, in order (none at look 1)")
    parser.add_argument("--design-reset", action="store_true", help="look 1 may follow another design (config design_reset)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        design = parse_design(json.loads(args.design))
        if design is None or not 1 <= args.look <= len(design.looks):
            raise DesignError(f"--look {args.look}: the design has looks 1..{len(design.looks) if design else 0}")
        if len(args.previous) != args.look - 1:
            raise DesignError(f"--previous: look {args.look} reads the {args.look - 1} look file(s) before it, got {len(args.previous)}")
        control_of = parse_control_of(args.control_of)
        earlier = verified_looks(args.previous, design, control_of)
        previous = earlier[-1] if earlier else None
        designs_before = record_design(results_of(args.out), design, args.design_reset) if args.look == 1 else []
        metrics, records = read_metrics(args.metrics)
        check_extracted(records, results_of(args.out))  # "recompute the look from the runs" means the runs
        groups = look_groups(runs_table(metrics), control_of, design, args.look, previous)
        runs_read = {held[0]["run"]: sha256_file(path) for path, held in records.items()}
        write_json(look_document(args.look, design, groups, runs_read, previous, designs_before), Path(args.out))
    except OSError as err:
        sys.exit(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}")
    except ValueError as err:
        sys.exit(f"error: {err}")
    for group in groups:
        decided = ", ".join(f"{name} {d['decision']}" for name, d in group["decisions"].items())
        print(f"look {args.look}, {group['family']} {group['term']} alpha={group['alpha']:g}: {decided}", file=sys.stderr)


if __name__ == "__main__":
    main()
