"""Per-run metric extraction and the aggregate tables of the ablation.

    python -m experiments.synthetic_sequences.disentangled.tables extract --run-dir RUN --out METRICS.parquet
    python -m experiments.synthetic_sequences.disentangled.tables aggregate --metrics M1.parquet ... \\
        --data-summary results/data/summary.json --references results/reference/*.json --out-dir results/tables

extract writes one tidy (long) table per run: its parameters, then one row per
(metric, scope). aggregate writes, as parquet + CSV + Markdown:
  runs          one row per run, overall metrics as columns
  aggregate     mean and sd over seeds per family, term, mode and alpha
  mean_vs_sum   paired sum - mean deltas (same family, term, alpha, seed) with a
                bootstrap CI over seeds, the scale and balance controls beside them
  confounds     how much length says about strategy and task, and token-count diagnostics
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from core.disentanglement.artifacts import atomic_path
from experiments.synthetic_sequences.disentangled.grid import parse_run_path

RUN_COLUMNS = ["family", "model", "controls", "term", "mode", "alpha", "seed", "beta", "reconstruction_scale"]
# the headline metrics: compared across modes, aggregated over seeds, plotted
HEADLINE = [
    "nmi",
    "ami",
    "ari",
    "probe_accuracy",
    "mutual_information",
    "kl",
    "shuffled_z_nll_rise_per_token",
    "parse_rate",
    "answer_accuracy",
    "strategy_consistency",
    "reconstruction_to_kl",
]
BOOTSTRAP_DRAWS = 2000


def _scalar_items(section: dict, prefix: str = ""):
    for name, value in section.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            yield prefix + name, float(value)


def run_metrics(run_dir: str | Path) -> pd.DataFrame:
    """The tidy metrics table of one finished run directory."""
    run_dir = Path(run_dir)
    missing = [name for name in ("eval.json", "metadata.json", "run_config.json", "metrics.jsonl") if not (run_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"run directory {run_dir} lacks {missing}; is the run finished?")
    evaluation = json.loads((run_dir / "eval.json").read_text())
    metadata = json.loads((run_dir / "metadata.json").read_text())
    run_config = json.loads((run_dir / "run_config.json").read_text())
    # one parse of the whole file: a run logs a row per step, and per-line parsing dominated extraction time
    rows = json.loads("[" + ",".join((run_dir / "metrics.jsonl").read_text().splitlines()) + "]")
    params = parse_run_path(str(run_dir))
    if run_config["reconstruction_loss_token_aggregation_mode"] != params["mode"]:
        raise ValueError(
            f"{run_dir}: run_config mode {run_config['reconstruction_loss_token_aggregation_mode']!r} disagrees with the run key"
        )

    records: list[tuple[str, str, float]] = []  # (metric, scope, value)
    separation = evaluation["strategy_separation"]
    records += [(m, "overall", v) for m, v in _scalar_items(evaluation["latent_usage"])]
    records += [(m, "overall", v) for m, v in _scalar_items(separation["overall"]) if m != "n"]
    records += [(m, "shuffled_labels", v) for m, v in _scalar_items(separation["shuffled_label_baseline"])]
    for group, scope in (("within_task", "task"), ("within_length_bucket", "length")):
        for name, values in separation[group].items():
            records += [(m, f"{scope}:{name}", v) for m, v in _scalar_items(values) if m != "n"]
    records += [(m, "overall", v) for m, v in _scalar_items(evaluation["samples"]) if m != "prompts"]
    validation = [row for row in rows if row["split"] == "val"]
    if validation:
        records += [(m, "val_final", v) for m, v in _scalar_items(validation[-1]) if m != "step"]
    train = [row for row in rows if row["split"] == "train"]
    records += [
        ("tokens_mean", "train", float(np.mean([row["tokens_mean"] for row in train]))),
        ("tokens_min", "train", float(min(row["tokens_min"] for row in train))),
        ("tokens_max", "train", float(max(row["tokens_max"] for row in train))),
        ("base_aggregate_min", "train", float(min(row["base_aggregate_min"] for row in train))),
        (
            "reconstruction_to_kl",
            "overall",
            validation[-1]["reconstruction_to_kl"] if validation and validation[-1]["reconstruction_to_kl"] else float("nan"),
        ),
    ]
    resolved = metadata["resolved"]
    run = {
        "family": params["family"],
        "model": run_config["model"],
        "controls": resolved["controls"],
        **{column: params[column] for column in ("term", "mode", "alpha", "seed")},
        "beta": resolved["beta"],
        "reconstruction_scale": resolved["reconstruction_scale"],
    }
    metric, scope, value = zip(*records, strict=True)
    return pd.DataFrame({**{column: [v] * len(records) for column, v in run.items()}, "metric": metric, "scope": scope, "value": value})


def write_table(frame: pd.DataFrame, stem: Path, formats: Sequence[str] = ("parquet", "csv", "md")) -> None:
    for fmt in formats:
        with atomic_path(stem.with_suffix(f".{fmt}")) as tmp:
            if fmt == "parquet":
                frame.to_parquet(tmp, index=False)
            elif fmt == "csv":
                frame.to_csv(tmp, index=False)
            else:
                tmp.write_text(frame.to_markdown(index=False, floatfmt=".4g") + "\n")


def runs_table(metrics: pd.DataFrame) -> pd.DataFrame:
    overall = metrics[metrics.scope == "overall"]
    return overall.pivot_table(index=RUN_COLUMNS, columns="metric", values="value").reset_index().rename_axis(columns=None)


def aggregate_table(runs: pd.DataFrame) -> pd.DataFrame:
    keys = ["family", "model", "controls", "term", "mode", "alpha"]
    present = [m for m in HEADLINE if m in runs.columns]
    grouped = runs.groupby(keys, sort=True)[present]
    table = grouped.mean().add_suffix("_mean").join(grouped.std(ddof=1).add_suffix("_sd")).join(grouped.size().rename("seeds"))
    return table.reset_index()


def bootstrap_ci(values: np.ndarray, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over seeds; (nan, nan) with fewer than two seeds."""
    if len(values) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(BOOTSTRAP_DRAWS, len(values)), replace=True).mean(axis=1)
    tail = (1 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def _delta_rows(left: pd.DataFrame, right: pd.DataFrame, on: list[str], comparison: str, family: str) -> list[dict]:
    """Per (term, alpha, metric): mean of right - left over the seeds both have, with its bootstrap CI."""
    merged = left.merge(right, on=on, suffixes=("_a", "_b"))
    rows = []
    for (term, alpha), group in merged.groupby(["term", "alpha"]):
        for metric in HEADLINE:
            if f"{metric}_a" not in group:
                continue
            deltas = (group[f"{metric}_b"] - group[f"{metric}_a"]).dropna().to_numpy()
            if len(deltas) == 0:
                continue
            low, high = bootstrap_ci(deltas)
            rows.append(
                {
                    "family": family,
                    "term": term,
                    "alpha": alpha,
                    "metric": metric,
                    "comparison": comparison,
                    "delta": float(deltas.mean()),
                    "ci_low": low,
                    "ci_high": high,
                    "seeds": len(deltas),
                }
            )
    return rows


def mean_vs_sum_table(runs: pd.DataFrame, control_of: dict[str, str]) -> pd.DataFrame:
    """sum - mean per (family, term, alpha), paired by seed; control deltas (control - main mean run) beside them.

    comparison = sum-mean: the effect of the mode; scale-mean: the global scale alone
    (mean mode x token count); balance-mean: sum's length weighting at mean's balance.
    """
    rows: list[dict] = []
    on = ["term", "alpha", "seed"]
    main = runs[runs.controls == "none"]
    for family, group in main.groupby("family"):
        mean_runs, sum_runs = group[group["mode"] == "mean"], group[group["mode"] == "sum"]
        rows += _delta_rows(mean_runs, sum_runs, on, "sum-mean", family)
        for control_family, parent in control_of.items():
            if parent != family:
                continue
            control = runs[runs.family == control_family]
            for kind in control.controls.unique():
                rows += _delta_rows(mean_runs, control[control.controls == kind], on, f"{kind}-mean", family)
    columns = ["family", "term", "alpha", "metric", "comparison", "delta", "ci_low", "ci_high", "seeds"]
    table = pd.DataFrame(rows, columns=columns)
    if table.empty:
        return table
    # dropna=False keeps the CI columns when a single seed leaves them all NaN
    wide = table.pivot_table(
        index=["family", "term", "alpha", "metric"], columns="comparison", values=["delta", "ci_low", "ci_high"], dropna=False
    )
    wide.columns = [f"{comparison}:{stat}" for stat, comparison in wide.columns]
    return wide[sorted(wide.columns)].reset_index()


def confound_table(data_summary: dict, references: Sequence[dict]) -> pd.DataFrame:
    rows = []
    for split in ("train", "val", "test"):
        summary = data_summary[split]
        for scope, accuracy in summary["length_only_strategy_accuracy"].items():
            rows.append({"split": split, "mode": "any", "diagnostic": "length_only_strategy_accuracy", "scope": scope, "value": accuracy})
        for stat, value in summary["y_length"].items():
            rows.append({"split": split, "mode": "any", "diagnostic": f"supervised_tokens_{stat}", "scope": "overall", "value": value})
        by = pd.DataFrame(summary["by_task_strategy"])
        for row in by.itertuples():
            rows.append(
                {
                    "split": split,
                    "mode": "any",
                    "diagnostic": "supervised_tokens_mean",
                    "scope": f"{row.task}/{row.strategy}",
                    "value": row.mean,
                }
            )
    for reference in references:
        for name in ("c_base", "base_aggregate_min"):
            rows.append({"split": "val", "mode": reference["mode"], "diagnostic": name, "scope": "overall", "value": reference[name]})
    return pd.DataFrame(rows)


def aggregate(
    metric_paths: Sequence[str | Path],
    data_summary_path: str | Path,
    reference_paths: Sequence[str | Path],
    out_dir: str | Path,
    control_of: dict[str, str],
) -> dict[str, pd.DataFrame]:
    if not metric_paths:
        raise ValueError("aggregate needs at least one run's metrics file")
    # one arrow concat, converted to pandas once: half the time of a pandas frame per run at 1,000 runs
    metrics = pa.concat_tables([pq.read_table(path) for path in metric_paths]).to_pandas()
    runs = runs_table(metrics)
    tables = {
        "runs": runs,
        "aggregate": aggregate_table(runs),
        "mean_vs_sum": mean_vs_sum_table(runs, control_of),
        "confounds": confound_table(
            json.loads(Path(data_summary_path).read_text()), [json.loads(Path(p).read_text()) for p in reference_paths]
        ),
    }
    out_dir = Path(out_dir)
    with atomic_path(out_dir / "metrics.parquet") as tmp:
        metrics.to_parquet(tmp, index=False)
    for name, table in tables.items():
        write_table(table, out_dir / name)
    return tables


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    extract = commands.add_parser("extract", help="one run's tidy metrics table")
    extract.add_argument("--run-dir", required=True)
    extract.add_argument("--out", required=True)
    combine = commands.add_parser("aggregate", help="the aggregate tables from many runs' metrics")
    combine.add_argument("--metrics", nargs="+", required=True)
    combine.add_argument("--data-summary", required=True)
    combine.add_argument("--references", nargs="+", required=True)
    combine.add_argument("--control-of", default="", help="control families and their main family: fam-scale=fam,fam-balance=fam")
    combine.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            frame = run_metrics(args.run_dir)
            with atomic_path(args.out) as tmp:
                frame.to_parquet(tmp, index=False)
        else:
            control_of = dict(item.split("=", 1) for item in filter(None, args.control_of.split(",")))
            tables = aggregate(args.metrics, args.data_summary, args.references, args.out_dir, control_of)
            print(f"aggregated {len(tables['runs'])} runs into {args.out_dir}", file=sys.stderr)
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
