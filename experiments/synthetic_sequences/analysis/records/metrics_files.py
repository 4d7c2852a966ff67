"""A run's metrics file, its one home: extracted from the run's own files (run_metrics), written with the run's record in
its metadata, read back many at a time, checked against its run (check_extracted: what extracting the run gives
today), and the runs table (one row per run) that the looks and the tables count from.

    python -m experiments.synthetic_sequences.analysis.records.metrics_files --run-dir RUN --out METRICS.parquet

writes one run's tidy (long) table: its parameters, then one row per (metric, scope, step): test-split metrics (step
empty), per-run diagnostics (scope `run`: token counts, base-loss minima, kappa/eta extremes, convergence) and the
validation learning curves (scope `curve`, one row per evaluation step). Snakemake runs it once per run, so it
imports pandas and pyarrow, not the statistics or the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from core.disentanglement.artifacts import atomic_path
from core.disentanglement.cli import refusals_exit
from experiments.synthetic_sequences.analysis.records.curves import convergence
from experiments.synthetic_sequences.analysis.records.run_files import (
    check_evaluation,
    execution_label,
    numerics_label,
    parse_json,
    parse_run_config,
    read_finished_run,
    validation_rows,
)
from experiments.synthetic_sequences.metrics import view
from experiments.synthetic_sequences.planning.bindings import RUN_FIELD_SCHEMAS, RUN_FIELDS, run_record
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand
from experiments.synthetic_sequences.planning.plan_tables import EXTRACT_METRICS
from experiments.synthetic_sequences.planning.record_shape import SHA256, check_shape
from experiments.synthetic_sequences.run_layout import (
    ENDED_AT_TAKE_UP,
    EVALUATION,
    METADATA,
    METRICS_LOG,
    RUN_CONFIG,
    RunLayout,
    format_beta,
    run_directory,
    run_path,
)

RUN_RECORD = "run_record"
HYBRID_SETTING = "reconstruction.hybrid_coefficients"  # bindings.compared_settings' name of TrainConfig's field
RUN_RECORD_SCHEMA = {  # bindings.run_record's fields, as a metrics file carries them
    "type": "object",
    "required": ["run", *RUN_FIELDS, "settings", "inputs_sha256"],
    "properties": {
        "run": {"type": "string"},
        **RUN_FIELD_SCHEMAS,  # beta: a run on a beta axis only
        "settings": {"type": "object"},
        "inputs_sha256": {"type": "object", "additionalProperties": SHA256},
    },
}


def reextract_advice(pilot: PilotCommand) -> str:
    """How to re-extract every run's metrics file without retraining: this pilot's command, extraction forced."""
    return f"re-extract without retraining: {pilot.command(targets=['tables'], flags=['--forcerun', 'extract_metrics'])}"


RUN_COLUMNS = [
    "family",
    "reference",
    "model",
    "controls",
    "term",
    "mode",
    "alpha",
    "seed",
    "key_beta",  # the beta in the run's key: its own on a beta axis, as the key spells it; '' for a run without one
    "beta",  # the KL weight it trained with (a balance control's: its key's x the mean train token count)
    "reconstruction_scale",
    "warm_start",
    "numerics",
    "execution",
]


def _scalar_items(section: dict, prefix: str = ""):
    for name, value in section.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            yield prefix + name, float(value)


def take_up_event(validation: list[dict], metadata: dict) -> dict[str, float]:
    """A run's take-up event and convergence (curves.convergence); where it ended at its confirmed take-up (the
    trainer's stop_at_take_up), that step, and convergence not read: its last quarter is not its budget's."""
    event = convergence(validation)
    if ENDED_AT_TAKE_UP in metadata:
        event.update({"converged": float("nan"), ENDED_AT_TAKE_UP: float(metadata[ENDED_AT_TAKE_UP])})
    return event


def run_metrics(run_dir: str | Path) -> pd.DataFrame:
    """The tidy metrics table of one finished run directory."""
    run_dir = Path(run_dir)
    files = read_finished_run(run_dir)
    layout = RunLayout(run_dir)
    metadata = parse_json(files[METADATA], layout.metadata)
    evaluation = parse_json(files[EVALUATION], layout.evaluation)
    run_config = parse_run_config(files[RUN_CONFIG], run_dir)
    check_evaluation(evaluation, layout.evaluation)
    validation = validation_rows(files[METRICS_LOG], layout.metrics_log)
    record = run_record(run_dir, run_config, metadata)
    if not validation:
        raise ValueError(f"{run_dir}/metrics.jsonl has no validation rows; a finished run has at least one")

    records: list[tuple[str, str, float, float]] = []  # (metric, scope, step, value); step is nan off the curves
    nan = float("nan")

    def add(section: dict, scope: str, skip: tuple[str, ...] = ()) -> None:
        records.extend((m, scope, nan, v) for m, v in _scalar_items(section) if m not in skip)

    separation = evaluation["strategy_separation"]
    add(evaluation["latent_usage"], "overall")
    add(separation["overall"], "overall", skip=("n",))
    add(separation["shuffled_label_baseline"], "shuffled_labels")
    for group, scope in (("within_task", "task"), ("within_length_bucket", "length")):
        for name, values in separation[group].items():
            add(values, f"{scope}:{name}", skip=("n",))
    add(evaluation["samples"], "overall", skip=("prompts",))
    for bucket, values in evaluation["samples"].get("by_length_bucket", {}).items():
        add(values, f"length:{bucket}")
    final = validation[-1]
    records.append(("reconstruction_to_kl", "overall", nan, final["reconstruction_to_kl"] if final["reconstruction_to_kl"] else nan))
    for name, value in metadata["train_diagnostics"].items():
        records.append((f"train_{name}", "run", nan, value))
        if name in final:
            records.append((f"val_{name}", "run", nan, float(final[name])))
    add(take_up_event(validation, metadata), "run")
    curves = set(view("curves"))
    for row in validation:
        records.extend((m, "curve", float(row["step"]), v) for m, v in _scalar_items(row) if m in curves)

    resolved = metadata["resolved"]
    run = {
        "family": record["family"],
        "reference": record["reference"],
        "model": run_config["model"]["model"],
        "controls": resolved["controls"],
        **{column: record[column] for column in ("term", "mode", "alpha", "seed")},
        "key_beta": format_beta(record["beta"]) if "beta" in record else "",
        "beta": resolved["beta"],
        "reconstruction_scale": resolved["reconstruction_scale"],
        "warm_start": bool(run_config["run"]["init_decoder"]),
        "numerics": numerics_label(metadata.get("numerics")),
        "execution": execution_label(metadata.get("numerics")),
    }
    metric, scope, step, value = zip(*records, strict=True)
    columns = {column: [v] * len(records) for column, v in run.items()}
    frame = pd.DataFrame({**columns, "metric": metric, "scope": scope, "step": step, "value": value})
    frame.attrs[RUN_RECORD] = record  # written into the parquet file's metadata (write_metrics)
    return frame


def write_metrics(frame: pd.DataFrame, path: str | Path) -> None:
    """One run's metrics file: the tidy table, and the run's record (bindings.run_record) in the file's metadata."""
    plain = frame.copy(deep=False)
    plain.attrs = {}  # the record goes in once, as the file's own metadata, not in pandas' attrs that every derived frame keeps
    table = pa.Table.from_pandas(plain, preserve_index=False)
    table = table.replace_schema_metadata({**table.schema.metadata, RUN_RECORD.encode(): json.dumps(frame.attrs[RUN_RECORD]).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_metrics(paths: Sequence[str | Path], pilot: PilotCommand = DEFAULT_PILOT) -> tuple[pd.DataFrame, dict[str, list[dict]]]:
    """Every metrics file as one frame, and each file's run records (an older extraction carries none, or lacks a
    column of RUN_COLUMNS: refused, with the command that re-extracts)."""
    reextract = reextract_advice(pilot)
    records = {}
    for path in paths:
        schema = pq.read_schema(path)
        carried = (schema.metadata or {}).get(RUN_RECORD.encode())
        if carried is None:
            raise ValueError(f"{path} carries no run record: it was extracted by an older version; {reextract}")
        if missing := [column for column in RUN_COLUMNS if column not in schema.names]:
            raise ValueError(f"{path} lacks the column(s) {', '.join(missing)}: it was extracted by an older version; {reextract}")
        try:
            record = json.loads(carried)
        except ValueError as error:
            raise ValueError(f"{path}: its run record is not valid JSON ({error}); {reextract}") from None
        check_shape(record, RUN_RECORD_SCHEMA, f"{path}'s run record", reextract)
        records[str(path)] = [record]
    # one dataset read, in the files' order, converted to pandas once: 40% faster than a table per file at 1,000 runs
    table = ds.dataset([str(path) for path in paths], format="parquet").to_table()
    pooled = {key: value for key, value in (table.schema.metadata or {}).items() if key != RUN_RECORD.encode()}
    return table.replace_schema_metadata(pooled).to_pandas(), records  # the pooled table carries no one run's record


def hybrid_mixes(records: Mapping[str, list[dict]], pilot: PilotCommand = DEFAULT_PILOT) -> dict[str, str]:
    """family -> the coefficients its hybrid runs train with, as text ('tokcc 0.5 + dist 0.5'), from the run records
    (read_metrics) of the families that run the hybrid."""
    mixes = {}
    for path, (record,) in records.items():
        if record["term"] == "hybrid":
            coefficients = record["settings"].get(HYBRID_SETTING)
            if not isinstance(coefficients, dict) or not coefficients:
                raise ValueError(f"{path}'s run record: a hybrid run whose settings lack {HYBRID_SETTING}; {reextract_advice(pilot)}")
            mixes[record["family"]] = " + ".join(f"{term} {weight:g}" for term, weight in coefficients.items())
    return mixes


def runs_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its test-split metrics, its diagnostics (scope `run`) and its strategy information within each
    task (`strategy_information_<task>`) as columns."""
    within_task = metrics[metrics.scope.str.startswith("task:") & (metrics.metric == "strategy_information")]
    within_task = within_task.assign(metric="strategy_information_" + within_task.scope.str.removeprefix("task:"))
    per_run = pd.concat([metrics[metrics.scope.isin(("overall", "run"))], within_task])
    table = per_run.pivot_table(index=RUN_COLUMNS, columns="metric", values="value").reset_index().rename_axis(columns=None)
    return table.dropna(axis=1, how="all")


def check_extracted(records: Mapping[str, list[dict]], results: str | Path, pilot: PilotCommand = DEFAULT_PILOT) -> None:
    """Each metrics file (read_metrics' records: path -> its run's record) is what extracting its run under `results`
    gives today. A metrics file edited by hand, or left from a run retrained since, is refused in one line naming the
    file, its run, the first difference and the command that re-extracts it (every file's, where several differ)."""
    differing = []
    for path, (record, *_) in records.items():
        run_dir = run_directory(str(results), record["run"])
        if (difference := first_difference(pd.read_parquet(path), run_metrics(run_dir))) is not None:
            differing.append((path, run_dir, difference))
    if not differing:
        return
    path, run_dir, difference = differing[0]
    if len(differing) == 1:
        command = EXTRACT_METRICS.format(run_dir=shlex.quote(run_dir), out=shlex.quote(str(path)))
        raise ValueError(f"{path} is not what extracting its run {run_dir} gives today ({difference}); re-extract it: {command}")
    raise ValueError(
        f"{len(differing)} metrics files are not what extracting their runs gives today, the first {path} (run {run_dir}: "
        f"{difference}); {reextract_advice(pilot)}"
    )


def first_difference(held: pd.DataFrame, fresh: pd.DataFrame) -> str | None:
    """Where a metrics file's table and a fresh extraction's first differ, in words; None where they are the same
    (nan equal to nan)."""
    if list(held.columns) != list(fresh.columns):
        return f"columns {list(held.columns)} in the file, {list(fresh.columns)} from the run"
    if len(held) != len(fresh):
        return f"{len(held)} rows in the file, {len(fresh)} from the run"
    for column in held.columns:
        a, b = held[column].tolist(), fresh[column].tolist()  # plain Python values: their repr is the file's value
        for row, (x, y) in enumerate(zip(a, b, strict=True)):
            if not (x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))):
                where = f"{fresh.metric.iat[row]} ({fresh.scope.iat[row]})"
                return f"{column} of {where}: {x!r} in the file, {y!r} from the run"
    return None


def row_run_path(row: Mapping) -> str:
    """The run path of a metrics or runs table's row: its RUN_FIELDS and the beta its key spells (key_beta)."""
    key_beta = row["key_beta"]
    return run_path(**{field: row[field] for field in RUN_FIELDS}, beta=float(key_beta) if key_beta else None)


def check_endpoints_finite(metrics: pd.DataFrame) -> None:
    """Every run of the pooled metrics has a finite value of every endpoint the verdict reads (metrics.view('verdict')),
    checked before runs_table pivots them: the pivot would drop a nan, and with it the run's pair from a contrast,
    without a word. Refused naming the run and the field."""
    keys = [*RUN_FIELDS, "key_beta"]
    endpoints = metrics[metrics.metric.isin(view("verdict")) & metrics.scope.isin(("overall", "run"))]
    runs = pd.MultiIndex.from_frame(metrics[keys].drop_duplicates())
    wide = endpoints.set_index([*keys, "metric"]).value.unstack("metric").reindex(index=runs, columns=list(view("verdict")))
    present = endpoints.assign(held=True).set_index([*keys, "metric"]).held.unstack("metric")
    present = present.reindex(index=runs, columns=list(view("verdict"))).notna()
    for run, values in wide.iterrows():
        for name, value in values.items():
            if not math.isfinite(value):
                path = row_run_path(dict(zip(keys, run, strict=True)))
                held = f"is {value}" if present.at[run, name] else "is missing"
                raise ValueError(f"run {path}: its {name} {held}, not a finite number; no contrast may leave it out unsaid")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True, help="a finished run's directory")
    parser.add_argument("--out", required=True, help="its metrics file (parquet)")
    args = parser.parse_args(argv)
    with refusals_exit():
        write_metrics(run_metrics(args.run_dir), args.out)


if __name__ == "__main__":
    main()
