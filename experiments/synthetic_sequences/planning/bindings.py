"""What the tables may read: the runs the grid asks for, with the settings it gives them, trained on the inputs
the tables describe.

The grid's record, every run's path and the settings that decide its numbers, is named by its content:
`grid/<sha256 prefix>.json` under the results folder (grid_file). The Snakefile computes it at parse time and a job
writes it (rule record_grid), so a dry run writes nothing and a run going on beside a dry run of another config keeps
reading its own. The tables keep a copy named as the record (tables_grid_file): a grid that changes is a new name,
which the tables are rebuilt for. Extraction carries each run's own record
(its path, settings and input hashes, read from the run directory) in its metrics file. Aggregation then
refuses, naming them, a missing or an extra run, two files for one run, a file whose content disagrees with its
path, a run whose settings are not the grid's (stale: trained before the config changed), and a run trained on
other inputs than the current records, scores, reference or warm-start checkpoint. This holds whatever
`.snakemake` remembers: a copied results folder, a fresh clone with results restored, a deleted `.snakemake`.

No pandas or torch here: the Snakefile imports this module at parse time.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.disentanglement.artifacts import sha256_file, sha256_json, write_json
from experiments.synthetic_sequences.planning.chunks import retrain_advice
from experiments.synthetic_sequences.planning.data_draws import RECORD_INPUTS, data_artifact
from experiments.synthetic_sequences.planning.grid import training_seed
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, PilotCommand
from experiments.synthetic_sequences.planning.record_shape import read_record
from experiments.synthetic_sequences.run_layout import (
    REFERENCE_ARTIFACTS,
    REFERENCE_TEMPLATE,
    misplaced_metrics,
    parse_run_path,
    run_path,
)
from experiments.synthetic_sequences.training.settings import INPUT_PATHS

# run settings that name where things are or how often progress is logged, not what the numbers are; whether the
# decoder was warm-started stays, as run.warm_start
NOT_COMPARED = (*INPUT_PATHS, "run_dir", "device", "log_every", "checkpoint_every")
RUN_FIELDS = ("family", "reference", "term", "mode", "alpha", "seed")  # run_layout.parse_run_path's, and its beta on a beta axis
RUN_FIELD_SCHEMAS = {  # what each can be, as a run path spells it (run_layout.parse_run_path)
    **dict.fromkeys(("family", "term", "mode"), {"type": "string"}),
    **dict.fromkeys(("reference", "seed"), {"type": "integer", "minimum": 0}),
    "alpha": {"type": "number", "minimum": 0},
    "beta": {"type": "number", "exclusiveMinimum": 0},
}
BLOCK_INPUTS = ("train_scores", "val_scores")  # each block's own, as are its reference_<mode> and init_decoder
GRID_FOLDER = "grid"  # under the results folder: one record per grid, named by its content (grid_file)
GRID_SCHEMA = {  # grid_document's record
    "type": "object",
    "required": ["runs"],
    "properties": {
        "runs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": [*RUN_FIELDS, "settings"],
                "properties": {**RUN_FIELD_SCHEMAS, "settings": {"type": "object"}},
            },
        }
    },
}


class BindingError(ValueError):
    """Runs the tables must not read; the message names them and what is wrong."""


@dataclass(frozen=True)
class Binding:
    """What aggregation holds the runs to: the grid, the current inputs' sha256 and the results folder (for advice)."""

    grid: Mapping
    input_hashes: Mapping[str, str]
    results: str

    @classmethod
    def from_files(cls, grid_path: str | Path, inputs: Mapping[str, str]) -> Binding:
        grid_path = Path(grid_path)
        grid = read_record(grid_path, GRID_SCHEMA, "rule record_grid writes it: delete it and rerun", BindingError)
        # the record lies at <results>/GRID_FOLDER/<name> (grid_file)
        return cls(grid, {name: sha256_file(path) for name, path in inputs.items()}, str(grid_path.parent.parent))


def block_input(reference: int, name: str) -> str:
    """The name of a reference block's input among the current inputs: 'ref1/val_scores', 'ref1/reference_sum'."""
    return f"{REFERENCE_TEMPLATE.format(reference=reference)}/{name}"


def parse_input(text: str) -> tuple[str, str]:
    """'ref0/reference_sum=results/reference/ref0/sum.json' -> its name and path (the path may hold '=' or ',')."""
    name, separator, path = text.partition("=")
    if not separator or not name or not path:
        raise BindingError(f"--input: {text!r} is not NAME=PATH")
    return name, path


def compared_settings(run_config: Mapping) -> dict:
    """The settings of a nested run_config (TrainConfig.to_dict()) that decide a run's numbers, as {'group.name': value}."""
    flat = {}
    for group, values in run_config.items():
        for name, value in values.items():
            if group == "run" and name in NOT_COMPARED:
                continue
            if isinstance(value, Mapping) and group == "model" and name == "latent":
                flat.update({f"model.latent.{key}": item for key, item in value.items()})
            else:
                flat[f"{group}.{name}"] = value
    flat["run.warm_start"] = bool(run_config["run"].get("init_decoder"))
    return json.loads(json.dumps(flat))  # tuples as lists, as they come back from a run's JSON


def grid_document(specs: Iterable) -> dict:
    """grid.json: every run of the grid by its path, with its parameters and compared settings."""
    runs = {}
    for spec in specs:
        settings = compared_settings(spec.train_config().to_dict())
        settings["run.warm_start"] = spec.warm_start  # the grid wires the checkpoint; the flag is what decides the numbers
        runs[spec.path] = {**spec.parameters(), "settings": settings}
    return {"runs": runs}


def grid_file(document: Mapping) -> str:
    """The record of a grid, relative to the results folder: grid/<first 16 hex digits of its sha256>.json."""
    return f"{GRID_FOLDER}/{sha256_json(document)[:16]}.json"


def tables_grid_file(record: str | Path) -> str:
    """The copy of the grid's record that the tables keep, named as the record: `grid-<digest>.json` in the tables
    folder. It is an output of aggregate_tables, so a grid that changes leaves it missing and the tables are rebuilt
    (and held to the new grid) even where snakemake keeps no metadata of them, as in a copied results folder."""
    return f"grid-{Path(record).name}"


def write_grid(document: Mapping, path: str | Path) -> None:
    """Write a grid's record (grid_document) atomically; its name is its content's (grid_file)."""
    if Path(path).name != Path(grid_file(document)).name:
        raise ValueError(f"{path} is not the record of this grid: it is named {grid_file(document)}")
    write_json(document, path)


def keep_grid_record(grid: Mapping, kept: str | Path) -> None:
    """The tables' copy of the grid they were held to, at `kept` (tables_grid_file under the fixed design); the copies
    of earlier grids beside it go."""
    kept = Path(kept)
    write_json(grid, kept)
    for earlier in kept.parent.glob(tables_grid_file("*")):
        if earlier != kept:
            earlier.unlink()


def setting_differences(got: Mapping, want: Mapping) -> list[str]:
    names = sorted(set(got) | set(want))
    return [
        f"{name} {got.get(name, 'unset')!r} (grid: {want.get(name, 'unset')!r})"
        for name in names
        if got.get(name, "unset") != want.get(name, "unset")
    ]


def check_placed(records: Mapping[str, list[dict]], pilot: PilotCommand = DEFAULT_PILOT) -> None:
    """Refuse metrics files that hold another run than their path names (run_layout.misplaced_metrics), with the
    command that extracts them again: read as they are, their own runs would be missing and others count twice."""
    if misplaced := misplaced_metrics({path: held[0]["run"] for path, held in records.items() if len(held) == 1}):
        raise BindingError(
            f"{misplaced[0]} holds run {records[misplaced[0]][0]['run']}, not the run its path names ({len(misplaced)} such "
            f"file(s)): a link to or a copy of another run's metrics file. Extract them again from their own runs: rm "
            f"{shlex.join(map(str, misplaced))}; then {pilot.command()}"
        )


def check_against_grid(records: Mapping[str, list[dict]], grid: Mapping, results: str, pilot: PilotCommand = DEFAULT_PILOT) -> None:
    """records: {metrics file: [its run record, one per run it holds]}. Refuses what the module docstring lists."""
    check_placed(records, pilot)
    seen: dict[str, str] = {}
    problems: list[str] = []
    stale: list[str] = []
    for path, held in records.items():
        if len(held) != 1:
            problems.append(f"{path} holds {len(held)} runs, not one")
            continue
        record = held[0]
        run = record["run"]
        if run in seen:
            problems.append(f"run {run} has two metrics files: {seen[run]} and {path}")
        seen[run] = path
        if run in grid["runs"]:
            differences = setting_differences(record["settings"], grid["runs"][run]["settings"])
            if differences:
                stale.append(f"{run} ({'; '.join(differences[:3])}{'; ...' if len(differences) > 3 else ''})")
    missing = sorted(set(grid["runs"]) - set(seen))
    extra = sorted(set(seen) - set(grid["runs"]))
    problems += [f"the grid's run {run} has no metrics file" for run in missing[:5]] + (["..."] if len(missing) > 5 else [])
    problems += [f"{seen[run]} holds run {run}, which the grid does not ask for" for run in extra[:5]] + (["..."] if len(extra) > 5 else [])
    if problems:
        raise BindingError("the tables would read other runs than the grid's: " + "; ".join(problems))
    if stale:
        raise BindingError(
            f"{len(stale)} run(s) were trained with other settings than the grid gives them (stale): {'; '.join(stale[:5])}. "
            + retrain_advice(stale, results, pilot)
        )


def check_inputs(records: Iterable[dict], current: Mapping[str, str], results: str, pilot: PilotCommand = DEFAULT_PILOT) -> None:
    """Every run's recorded input hashes equal the current artifacts' of its own reference block (current: {input
    name: sha256}, a block's named by block_input; the reference as reference_<mode>; the records the one shared
    draw's, `train_records`, or, with a draw per block, the block's own, `ref3/train_records`); refuses naming the
    runs and the inputs that differ (a run moved across blocks or draws), and first a block artifact that changed
    under all of its runs (changed_artifacts)."""
    wrong, recorded_by_input = [], {}
    for record in records:
        block = record["reference"]
        # the current name of each input the run recorded; a block the current inputs do not hold expects nothing a
        # run can match
        keys = {name: name if name in current else block_input(block, name) for name in RECORD_INPUTS}
        keys |= {name: block_input(block, name) for name in BLOCK_INPUTS}
        keys["reference"] = block_input(block, f"reference_{record['mode']}")
        if record["settings"]["run.warm_start"]:
            keys["init_decoder"] = block_input(block, "init_decoder")
        expected = {name: current.get(key) for name, key in keys.items()}
        for name, key in keys.items():
            recorded_by_input.setdefault(key, []).append(record["inputs_sha256"].get(name))
        differs = sorted(name for name, digest in expected.items() if record["inputs_sha256"].get(name) != digest)
        if differs:
            wrong.append(f"{record['run']} ({', '.join(differs)})")
    if changed := changed_artifacts(recorded_by_input, current):
        raise BindingError(f"{'; '.join(changed)}. The artifact changed under its runs: {rebuild_advice(changed, results, pilot)}")
    if wrong:
        raise BindingError(
            f"{len(wrong)} run(s) were trained on other inputs than the current ones: {'; '.join(wrong[:5])}"
            f"{'; ...' if len(wrong) > 5 else ''}. " + retrain_advice(wrong, results, pilot)
        )


def rebuild_advice(changed: list[str], results: str, pilot: PilotCommand) -> str:
    """For changed inputs (changed_artifacts' lines, each starting with the input's name): a block's scores, c_base or
    warm start are rebuilt from its z-free model, trained again from the block's seed; records that changed under
    their runs are drawn again (the Snakefile holds each draw to its summary). Forcing that job retrains every run
    that read its outputs."""
    forced = set()
    for name in (line.split(" ")[0] for line in changed):
        block, _, input_name = name.rpartition("/")
        if input_name in RECORD_INPUTS:
            reference = int(block.removeprefix(REFERENCE_TEMPLATE.format(reference=""))) if block else 0
            forced.add(f"{results}/{data_artifact('summary', bool(block), reference)}")
        else:
            forced.add(f"{results}/{REFERENCE_ARTIFACTS['checkpoint'].replace(REFERENCE_TEMPLATE, block)}")
    return f"rebuild it and retrain the runs that read it: {pilot.command(flags=['--forcerun', *sorted(forced)])}"


def changed_artifacts(recorded_by_input: Mapping[str, list], current: Mapping[str, str]) -> list[str]:
    """The inputs (a block's scores, c_base or warm start; the records) that every run reading them, two or more (one
    run alone may be a run moved, not a file changed), recorded alike, but that now hash otherwise: the file changed
    under the runs. Each is named, with the input that now holds what the runs read, where one does (two blocks'
    artifacts swapped)."""
    changed = []
    for name, recorded in sorted(recorded_by_input.items()):
        read = set(recorded)
        if len(recorded) < 2 or len(read) != 1 or (digest := read.pop()) is None or name not in current or current[name] == digest:
            continue
        holders = [other for other, now in sorted(current.items()) if now == digest]
        where = f" (that is {holders[0]}'s now: swapped?)" if holders else ""
        changed.append(
            f"{name} hashes {current[name][:12]}, but all {len(recorded)} run(s) that read it were trained on {digest[:12]}{where}"
        )
    return changed


def run_record(run_dir: Path, run_config: Mapping, metadata: Mapping) -> dict:
    """What a metrics file carries of its run: its path, settings and input hashes. Refuses a run_config.json whose
    reference, term, mode, alpha, seed or (on a beta axis) beta disagree with the directory it sits in (a run copied to
    another reference block, seed, term, alpha or beta)."""
    params = parse_run_path(str(run_dir))
    reconstruction = run_config["reconstruction"]
    recorded = {
        "reference": run_config.get("run", {}).get("zfree_seed"),
        "term": reconstruction.get("term"),
        "mode": reconstruction.get("reconstruction_loss_token_aggregation_mode"),
        "alpha": reconstruction.get("token_weight_alpha"),
        "seed": run_config.get("optim", {}).get("seed"),
    }
    if "beta" in params:
        recorded["beta"] = run_config.get("objective", {}).get("beta")
    expected = {**params, "seed": training_seed(params["reference"], params["seed"])}
    wrong = [f"{name} {value!r} (path: {expected[name]!r})" for name, value in recorded.items() if value != expected[name]]
    if wrong:
        raise BindingError(f"{run_dir}/run_config.json disagrees with its path in {', '.join(wrong)}: it is not this directory's run")
    return {
        "run": run_path(**params),
        **params,
        "settings": compared_settings(run_config),
        "inputs_sha256": dict(metadata.get("inputs_sha256", {})),
    }
