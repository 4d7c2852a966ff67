"""The aggregate tables of the ablation, from every run's metrics file (records/metrics_files.py extracts them).

    python -m experiments.synthetic_sequences.analysis.tables aggregate --metrics M1.parquet ... \\
        --data-summary results/data/summary.json --references results/reference/*.json --out-dir results/tables

aggregate writes, as parquet + CSV (+ Markdown for the small ones):
  runs          one row per run: test metrics, the take-up event, diagnostics and the `converged` flag as columns
  aggregate     mean and sd over seeds per family, term, mode and alpha
  takeup        per arm: runs that took up the latent (k of n, Clopper-Pearson) and the Kaplan-Meier median onset
  mean_vs_sum   every contrast (sum-mean, scale-mean, balance-mean, sum-scale, sum-balance) of every endpoint, with
                its interval, exact test, adjusted p, equivalence p and seeds needed (contrasts.py)
  confounds     how much length says about strategy and task, token-count diagnostics (per data draw: one shared,
                or each block's own with data.per_block), sample quality per length bucket
  verdict       per family, term and alpha: take-up, onset, magnitude and separation, and each control's share
  curves        one row per (run, step, metric) of the validation learning curves (parquet + CSV)
and, where runs lie on a beta axis (beta_axis.py: each beta an arm of its own in the tables above):
  beta_curves       per (family, term, alpha): the shift factor k of sum's take-up curve against mean's over the
                    population of blocks, its interval, the blocks' SD of sum's effect, the parallelism test and the
                    reading, the fixed-block fit beside it (curve_table.py)
  beta_curve_cells  per (family, term, alpha, beta, mode): runs, how many took up, and the share the fixed-block shift
                    model expects
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from core.disentanglement.artifacts import atomic_path
from core.disentanglement.cli import refusals_exit
from experiments.synthetic_sequences.analysis.comparisons.beta_axis import controls_per_beta, has_axis, keyed_per_beta, per_beta
from experiments.synthetic_sequences.analysis.comparisons.confounds import confound_table, length_separation
from experiments.synthetic_sequences.analysis.comparisons.contrasts import contrast_table
from experiments.synthetic_sequences.analysis.comparisons.curve_table import cells_table, shift_table
from experiments.synthetic_sequences.analysis.comparisons.takeup_table import arm_table
from experiments.synthetic_sequences.analysis.records.metrics_files import (
    check_endpoints_finite,
    check_extracted,
    hybrid_mixes,
    read_metrics,
    row_run_path,
    runs_table,
)
from experiments.synthetic_sequences.analysis.records.run_files import read_json
from experiments.synthetic_sequences.analysis.report.cross_term import cross_term_table, planned_contrasts
from experiments.synthetic_sequences.analysis.report.verdict import verdict_table
from experiments.synthetic_sequences.analysis.report.verdict_text import markdown, verdict_markdown
from experiments.synthetic_sequences.arms import BLOCK
from experiments.synthetic_sequences.generate import statistics_differences
from experiments.synthetic_sequences.metrics import view
from experiments.synthetic_sequences.planning.bindings import (
    Binding,
    check_against_grid,
    check_inputs,
    keep_grid_record,
    parse_input,
    tables_grid_file,
)
from experiments.synthetic_sequences.planning.data_draws import (
    DATA_ARTIFACTS,
    SHARED_DRAW,
    DrawError,
    block_draw,
    parse_data_summaries,
    read_summary,
    redraw_advice,
)
from experiments.synthetic_sequences.planning.endpoints import parse_primary
from experiments.synthetic_sequences.planning.grid import parse_control_of
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand, add_pilot_flags
from experiments.synthetic_sequences.sequential.curve_design import CURVE
from experiments.synthetic_sequences.sequential.curve_looks import curve_stops, is_curve_look, read_curve_looks
from experiments.synthetic_sequences.sequential.look_files import read_looks
from experiments.synthetic_sequences.sequential.looks import check_looks_read, run_stages
from experiments.synthetic_sequences.splits import SPLITS


def write_table(frame: pd.DataFrame, stem: Path, formats: Sequence[str] = ("parquet", "csv", "md")) -> None:
    for fmt in formats:
        with atomic_path(stem.with_suffix(f".{fmt}")) as tmp:
            if fmt == "parquet":
                frame.to_parquet(tmp, index=False)
            elif fmt == "csv":
                frame.to_csv(tmp, index=False)
            else:
                tmp.write_text(markdown(frame, floatfmt=".4g") + "\n")


def curves_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The validation learning curves: one row per (run, step, metric)."""
    curves = metrics[metrics.scope == "curve"].drop(columns="scope")
    return curves.astype({"step": int}).dropna(subset=["value"]).reset_index(drop=True)


def aggregate_table(runs: pd.DataFrame) -> pd.DataFrame:
    keys = ["family", "model", "controls", "term", "mode", "alpha"]  # over every reference block and seed
    present = [m for m in view("headline") if m in runs.columns]
    grouped = runs.groupby(keys, sort=True)[present]
    table = grouped.mean().add_suffix("_mean").join(grouped.std(ddof=1).add_suffix("_sd")).join(grouped.size().rename("seeds"))
    return table.reset_index().dropna(axis=1, how="all")


def write_verdict(
    path: Path, tables: Mapping[str, pd.DataFrame], runs, control_of, looks, draws, pilot: PilotCommand, curve_looks=()
) -> None:
    """verdict.md from the tables (and a beta axis's curve tables, where there are, with a curve design's looks), the
    runs and control pairs as the fixed tables read them (per beta on an axis), and the pilot's command line its
    suggestions repeat."""
    verdict = verdict_markdown(
        tables["verdict"],
        runs,
        control_of,
        looks,
        tables["cross_term"],
        planned_contrasts(tables["mean_vs_sum"]),
        tables["length_separation"],
        draws,
        tables.get("beta_curves"),
        tables.get("beta_curve_cells"),
        pilot,
        curve_looks,
    )
    with atomic_path(path) as tmp:
        tmp.write_text(verdict)


def read_draws(data_summaries: Mapping[str, str | Path], runs: pd.DataFrame, pilot: PilotCommand = DEFAULT_PILOT) -> dict[str, dict]:
    """{draw: data summary} from {draw: its path}: the one shared draw, or each block's own, which must be the draws of
    the runs' blocks. Each summary is checked for shape (data_draws.read_summary) and its statistics against its
    records beside it (generate.statistics_differences): an edited summary would move the verdict's numbers."""
    paths = dict(data_summaries)
    if SHARED_DRAW not in paths:
        blocks = {block_draw(int(block)) for block in runs[BLOCK].unique()}
        if set(paths) != blocks:
            raise ValueError(
                f"--data-summary: the runs read the draws of blocks {sorted(blocks)}, but the summaries given are {sorted(paths)}"
            )
    draws = {}
    for draw, path in sorted(paths.items()):
        advice = redraw_advice([str(path)], pilot)
        summary = read_summary(path, advice)
        records = {split: pd.read_parquet(Path(path).parent / DATA_ARTIFACTS["records"].format(split=split)) for split in SPLITS}
        if differences := statistics_differences(summary, records):
            raise DrawError(f"{path}: {'; '.join(differences[:3])}: the summary was edited after drawing; {advice}")
        draws[draw] = summary
    return draws


def staged_runs(runs: pd.DataFrame, curve_looks: Sequence[Mapping]) -> pd.DataFrame:
    """The runs table with each run's stage beside its seed (looks.run_stages: the first look that read it), so that the
    table alone refits every look of a curve design."""
    stages = run_stages(curve_looks)
    staged = runs.copy()
    staged.insert(runs.columns.get_loc("seed") + 1, "stage", [stages[row_run_path(row)] for row in runs.to_dict("records")])
    return staged


def mean_tokens(draws: Mapping[str, Mapping]) -> float:
    """Supervised tokens per training record, averaged over the draws: what a scale change of sum is measured in."""
    return sum(summary["train"]["y_length"]["mean"] for summary in draws.values()) / len(draws)


def aggregate(
    metric_paths: Sequence[str | Path],
    data_summaries: Mapping[str, str | Path],
    reference_paths: Sequence[str | Path],
    out_dir: str | Path,
    control_of: dict[str, str],
    binding: Binding | None = None,
    looks: Sequence[dict] = (),
    primary: Mapping[tuple[str, str, float], str] | None = None,
    pilot: PilotCommand = DEFAULT_PILOT,
) -> dict[str, pd.DataFrame]:
    """Every table and verdict.md from the runs' metrics files; data_summaries: {draw: its summary's path}, the one
    shared draw or each block's own (data_draws.parse_data_summaries); `primary`: the (family, term, alpha) read on a declared primary
    endpoint other than take-up (planning/endpoints.py); `pilot`: the command line the verdict's suggestions repeat."""
    if not metric_paths:
        raise ValueError("aggregate needs at least one run's metrics file")
    metrics, records = read_metrics(metric_paths, pilot)
    if binding is not None:  # the runs the tables read are the grid's, trained on the current inputs (bindings.py)
        check_against_grid(records, binding.grid, binding.results, pilot)
        if looks:
            check_looks_read(looks, binding.grid)
        check_inputs([held[0] for held in records.values()], binding.input_hashes, binding.results, pilot)
        check_extracted(records, binding.results, pilot)
    check_endpoints_finite(metrics)
    runs = runs_table(metrics)
    # the fixed tables read each beta of an axis as an arm of its own (beta_axis.py); the curves read them together
    arm_runs, arm_controls, arm_primary = per_beta(runs), controls_per_beta(control_of, runs), keyed_per_beta(primary or {}, runs)
    contrasts = contrast_table(arm_runs, arm_controls, arm_primary)
    draws = read_draws(data_summaries, runs, pilot)
    tables = {
        "runs": runs,
        "aggregate": aggregate_table(arm_runs),
        "takeup": arm_table(arm_runs, arm_controls),
        "mean_vs_sum": contrasts,
        "confounds": confound_table(draws, [read_json(path) for path in reference_paths], metrics),
        "length_separation": length_separation(per_beta(metrics)),
        "verdict": verdict_table(arm_runs, contrasts, arm_controls, arm_primary),
    }
    mixes = keyed_per_beta(hybrid_mixes(records, pilot), runs)
    curve_looks = [look for look in looks if look["design"].get("kind") == CURVE]  # the curves' section reads them
    looks = [look for look in looks if look["design"].get("kind") != CURVE]
    tables["cross_term"] = cross_term_table(tables["verdict"], arm_runs, contrasts, arm_controls, looks, mixes)
    if curve_looks:
        tables["runs"] = staged_runs(runs, curve_looks)
    if has_axis(runs):
        tables["beta_curves"] = shift_table(runs, mean_tokens(draws), curve_stops(curve_looks))
        tables["beta_curve_cells"] = cells_table(runs)
    out_dir = Path(out_dir)
    with atomic_path(out_dir / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)
    for name, table in tables.items():
        write_table(table, out_dir / name, formats=("parquet", "csv") if name == "verdict" else ("parquet", "csv", "md"))
    write_verdict(out_dir / "verdict.md", tables, arm_runs, arm_controls, looks, draws, pilot, curve_looks)
    tables["curves"] = curves_table(metrics)
    write_table(tables["curves"], out_dir / "curves", formats=("parquet", "csv"))
    return tables


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    combine = commands.add_parser("aggregate", help="the aggregate tables from many runs' metrics")
    combine.add_argument("--metrics", nargs="+", required=True)
    combine.add_argument(
        "--data-summary",
        nargs="+",
        required=True,
        help="the shared draw's summary.json, or ref<N>=PATH for each block's own draw (data.per_block)",
    )
    combine.add_argument("--references", nargs="+", required=True)
    combine.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    combine.add_argument("--primary", default="", help="JSON [[family, term, alpha, endpoint], ...]: declared primary endpoints")
    combine.add_argument("--out-dir", required=True)
    combine.add_argument("--grid", required=True, help="the grid.json the Snakefile writes: the runs the tables may read")
    combine.add_argument("--grid-copy", default=None, help="where the tables keep a copy of it (default: grid-<its name> in --out-dir)")
    combine.add_argument("--looks", nargs="*", default=[], help="a sequential or curve design's look files, in order")
    combine.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a current input the runs must have been trained on: train_records, val_records, test_records (or, with a "
        "draw per block, ref<N>/train_records, ...), and per reference block ref<N>/train_scores, ref<N>/val_scores, "
        "ref<N>/reference_<mode>, ref<N>/init_decoder (repeat the flag)",
    )
    add_pilot_flags(combine)
    args = parser.parse_args(argv)
    with refusals_exit():
        control_of = parse_control_of(args.control_of)
        pilot = PilotCommand.of_flags(args)
        binding = Binding.from_files(args.grid, dict(parse_input(text) for text in args.input))
        curve = args.looks and is_curve_look(args.looks[0])
        looks = read_curve_looks(args.looks, pilot) if curve else read_looks(args.looks, control_of, pilot)
        primary = parse_primary(args.primary)
        summaries = parse_data_summaries(args.data_summary)
        tables = aggregate(args.metrics, summaries, args.references, args.out_dir, control_of, binding, looks, primary, pilot)
        keep_grid_record(binding.grid, args.grid_copy or Path(args.out_dir) / tables_grid_file(args.grid))
        print(f"aggregated {len(tables['runs'])} runs into {args.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
