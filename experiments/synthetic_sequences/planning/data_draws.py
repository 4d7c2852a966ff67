"""Data draws: the records a reference block trains, scores and is evaluated on.

    {results}/data/{split}.parquet, summary.json                one draw (data.seed) shared by every block: the default
    {results}/data/ref{reference}/{split}.parquet, summary.json with `data.per_block: true`, block ref{reference}'s own
                                                                draw, data seed block_data_seed(data.seed, reference)

With one draw, blocks replicate the z-free reference and seeds replicate training, but every run reads the same
records, so a reading may belong to that draw (its length distribution, its tasks' strategies, its split). With a
draw per block, a block's data, z-free model, scores and c_base are all its own, and no run reads another block's
records: aggregation holds each run's recorded sha256 of its records to its own block's (bindings.check_inputs).

A draw's summary.json records the generator's settings and the sha256 of its records (RECORDS_SHA256). Before any job
the Snakefile holds every draw on disk to the config (check_draws: its shape and ranges, its settings and seed, its
records' hashes) and the folder to one layout (check_draw_layout); the tables hold the summary's statistics to its
records (generate.statistics_differences). A refusal redraws the draws it names, with the pilot's own command.

No torch or pandas: the Snakefile imports this module at parse time.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand
from experiments.synthetic_sequences.planning.record_shape import SHA256, read_record
from experiments.synthetic_sequences.run_layout import REFERENCE_TEMPLATE
from experiments.synthetic_sequences.splits import SPLITS

DATA_FOLDER = "data"  # under the results folder
DATA_ARTIFACTS = {"records": "{split}.parquet", "summary": "summary.json"}  # in a draw's folder
RECORD_INPUTS = ("train_records", "val_records", "test_records")  # a run's recorded inputs that are its draw's records
DRAW_RULE = "synthetic_sequences"  # the rule that draws (rules/data.smk): --forcerun it to redraw every draw
SHARED_DRAW = "shared"  # how the tables name the one draw every block reads; a block's own is named as the block


def data_folder(per_block: bool, reference: int | str = "{reference}") -> str:
    """A draw's folder under the results folder: the one shared draw's, or block `reference`'s own."""
    return f"{DATA_FOLDER}/{REFERENCE_TEMPLATE.format(reference=reference)}" if per_block else DATA_FOLDER


def data_artifact(name: str, per_block: bool, reference: int | str = "{reference}", **fields) -> str:
    """A draw's records ('records', with split=...) or summary ('summary') under the results folder; a rule's path
    keeps {reference} a wildcard."""
    return f"{data_folder(per_block, reference)}/{DATA_ARTIFACTS[name].format(**fields)}"


def block_data_seed(data_seed: int, reference: int) -> int:
    """The data seed of block `reference`'s own draw: data.seed + 1 + reference. The blocks' draws differ from one
    another, and none redraws the one shared draw of the same data.seed, so a per-block pilot shares no records with
    its one-draw twin."""
    return data_seed + 1 + reference


def block_draw(reference: int) -> str:
    """How the tables name block `reference`'s own draw: as the block ('ref3')."""
    return REFERENCE_TEMPLATE.format(reference=reference)


def format_data_summaries(paths: Mapping[str, str]) -> list[str]:
    """--data-summary of the tables from {draw: summary}: the shared draw's path alone, or ref<N>=PATH per block
    (parse_data_summaries reads it back)."""
    return [path if draw == SHARED_DRAW else f"{draw}={path}" for draw, path in paths.items()]


def parse_data_summaries(texts: Sequence[str]) -> dict[str, str]:
    """['results/data/summary.json'] -> {'shared': path}; ['ref0=PATH', 'ref1=PATH'] -> {'ref0': PATH, 'ref1': PATH}.
    One shared summary or one per block, not both; a block named twice is refused."""
    prefix = REFERENCE_TEMPLATE.format(reference="")
    summaries: dict[str, str] = {}
    for text in texts:
        name, separator, path = text.partition("=")
        blocked = bool(separator) and name.startswith(prefix) and name[len(prefix) :].isdigit()
        if not blocked:
            name, path = SHARED_DRAW, text
        if name in summaries:
            raise ValueError(f"--data-summary: {name} is given twice ({summaries[name]} and {path})")
        summaries[name] = path
    if SHARED_DRAW in summaries and len(summaries) > 1:
        raise ValueError(
            f"--data-summary: {sorted(summaries)} mixes the one shared draw's summary with blocks' own; give one path, "
            "or ref<N>=PATH for every block"
        )
    return summaries


RECORDS_SHA256 = "records_sha256"  # the summary's field that binds it to its records: {split: sha256 of its parquet}
SPLIT_STATISTICS = {  # generate.summarise's record of one split
    "type": "object",
    "required": ["records", "y_length", "length_only_strategy_accuracy", "by_task_strategy"],
    "properties": {
        "records": {"type": "integer", "minimum": 1},
        "y_length": {
            "type": "object",
            "required": ["mean", "min", "max"],
            "properties": {
                "mean": {"type": "number", "exclusiveMinimum": 0},
                "min": {"type": "integer", "minimum": 1},
                "max": {"type": "integer"},
            },
        },
        "length_only_strategy_accuracy": {
            "type": "object",
            "required": ["overall"],
            "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "by_task_strategy": {"type": "array", "minItems": 1, "items": {"type": "object"}},
    },
}
SUMMARY_SCHEMA = {  # generate.generate's summary.json
    "type": "object",
    "required": ["config", "vocab_size", RECORDS_SHA256, *SPLITS],
    "properties": {
        "config": {"type": "object", "required": ["seed"], "properties": {"seed": {"type": "integer", "minimum": 0}}},
        "vocab_size": {"type": "integer", "minimum": 1},
        RECORDS_SHA256: {"type": "object", "required": list(SPLITS), "properties": dict.fromkeys(SPLITS, SHA256)},
        **dict.fromkeys(SPLITS, SPLIT_STATISTICS),
    },
}


class DrawError(ValueError):
    """A data draw that is not what the config draws: edited, swapped, of other settings, or of the other layout."""


def read_summary(path: str | Path, advice: str) -> dict:
    """A draw's summary.json, checked for shape and ranges; `advice` ends a refusal."""
    summary = read_record(path, SUMMARY_SCHEMA, advice, DrawError)
    for split in SPLITS:
        lengths = summary[split]["y_length"]
        if not lengths["min"] <= lengths["mean"] <= lengths["max"]:
            raise DrawError(
                f"{path}: {split}.y_length has mean {lengths['mean']} outside [min {lengths['min']}, max {lengths['max']}]; {advice}"
            )
    return summary


DEFAULT_TASKS = ("add", "sort", "count")  # generate.SequenceConfig's tasks where data.tasks is not set (a test holds them equal)


def draw_settings(data: Mapping, per_block: bool, reference: int) -> dict:
    """The generator's settings of one draw from the config's data section: block `reference`'s own seed where each block
    draws its own."""
    settings = {name: value for name, value in data.items() if name != "per_block"}
    if list(settings.get("tasks", ())) == list(DEFAULT_TASKS):  # written at its default: the same draw, the same job
        del settings["tasks"]
    if per_block:
        settings["seed"] = block_data_seed(settings["seed"], reference)
    return settings


def redraw_advice(summaries: Sequence[str], pilot: PilotCommand, remove: bool = False) -> str:
    """Redraw these draws (named by their summaries) from their seeds, and retrain what was trained on them: forced,
    since snakemake leaves a missing file alone where what was made from it exists. `remove`: the draws go first, for
    a refusal that reads them before any job (check_draws passes a draw that is not all there)."""
    them = "it" if len(summaries) == 1 else "them"
    command = pilot.command(flags=["--forcerun", *summaries])
    if remove:
        command = f"rm -r {shlex.join(str(Path(summary).parent) for summary in summaries)}; then {command}"
    return f"redraw {them} (what was trained on {them} retrains): {command}"


def draw_problem(results: str, data: Mapping, per_block: bool, reference: int, blocks: Sequence[int]) -> str | None:
    """How the draw on disk for block `reference` (the one shared draw where per_block is false) is not the one the
    config draws, in words, or None: a summary of other settings (a block's draw in another block's folder, of
    `blocks`: swapped; data settings changed since), or records whose sha256 are not those the summary recorded at
    drawing (edited, swapped). A draw that is not all there is passed: snakemake draws it."""
    summary_path = f"{results}/{data_artifact('summary', per_block, reference)}"
    records = {split: f"{results}/{data_artifact('records', per_block, reference, split=split)}" for split in SPLITS}
    if not all(os.path.exists(path) for path in (summary_path, *records.values())):
        return None
    try:
        summary = read_summary(summary_path, "redraw it")
    except DrawError as error:
        return str(error).removesuffix("; redraw it")
    wanted = draw_settings(data, per_block, reference)
    differs = [
        f"{name} {summary['config'].get(name, 'unset')!r} (config: {value!r})"
        for name, value in json.loads(json.dumps(wanted)).items()
        if summary["config"].get(name, "unset") != value
    ]
    if differs:
        drawn_for = summary["config"]["seed"] - data["seed"] - 1
        whose = f" (block {drawn_for}'s seed: swapped?)" if per_block and drawn_for in blocks and drawn_for != reference else ""
        return f"{summary_path} was drawn with {'; '.join(differs)}{whose}, not as the config draws it"
    recorded = summary[RECORDS_SHA256]
    changed = [f"{path} hashes {digest[:12]}" for split, path in records.items() if (digest := sha256_file(path)) != recorded[split]]
    if changed:
        at_drawing = ", ".join(recorded[split][:12] for split in SPLITS)
        return f"{'; '.join(changed)}, but {summary_path} recorded {at_drawing} at drawing: the records changed since"
    return None


def check_draws(results: str, data: Mapping, per_block: bool, blocks: Sequence[int], pilot: PilotCommand) -> None:
    """Refuse, in one line, every draw on disk that is not the one the config draws (draw_problem): each block's own
    where per_block is true, else the one shared draw; the advice redraws those draws alone, with the pilot's own
    command."""
    summaries = {block: f"{results}/{data_artifact('summary', per_block, block)}" for block in (blocks if per_block else [0])}
    problems = {block: problem for block in summaries if (problem := draw_problem(results, data, per_block, block, blocks)) is not None}
    if problems:
        advice = redraw_advice([summaries[block] for block in problems], pilot, remove=True)
        raise DrawError(f"{'; '.join(problems.values())}; {advice}")


def check_draw_layout(results: str, per_block: bool, pilot: PilotCommand) -> None:
    """Refuse to switch a results folder between one shared draw and a draw per block in place: every z-free model and
    run in it would retrain on new records without a word. The refusal offers a folder of its own, or removing the
    other layout's draws and redrawing (every run retrains)."""
    shared = Path(results, data_artifact("summary", False))
    own = sorted(Path(results, DATA_FOLDER).glob(data_artifact("summary", True, "*").removeprefix(f"{DATA_FOLDER}/")))
    found = own if not per_block else [shared] if shared.exists() else []
    if not found:
        return
    layout, other = ("a draw per block", "one shared draw") if per_block else ("one shared draw", "a draw per block")
    if per_block:  # the shared draw's own files: the folder also holds the blocks' draws
        paths = [path for path in (Path(results, data_artifact("records", False, split=split)) for split in SPLITS) if path.exists()]
        paths.append(shared)
    else:
        paths = [path.parent for path in found]
    redraw = pilot.command(flags=["--forcerun", DRAW_RULE])  # the removed layout's consumers exist: nothing would redraw
    raise DrawError(
        f"results: {results} holds {other} ({found[0]}), but data.per_block: {str(per_block).lower()} asks for {layout}: "
        "every z-free model and run in it would retrain on new records. Give it a results folder of its own (--config "
        f"results=...), or remove the other draws and redraw this folder in place: rm -r {shlex.join(map(str, paths))}; then {redraw}"
    )
