"""Data draws: the records a reference block trains, scores and is evaluated on.

    {results}/data/{split}.parquet, summary.json                one draw (data.seed) shared by every block: the default
    {results}/data/ref{reference}/{split}.parquet, summary.json with `data.per_block: true`, block ref{reference}'s own
                                                                draw, data seed block_data_seed(data.seed, reference)

With one draw, blocks replicate the z-free reference and seeds replicate training, but every run reads the same
records, so a reading may belong to that draw (its length distribution, its tasks' strategies, its split). With a
draw per block, a block's data, z-free model, scores and c_base are all its own, and no run reads another block's
records: aggregation holds each run's recorded sha256 of its records to its own block's (bindings.check_inputs).

No torch or pandas: the Snakefile imports this module at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.synthetic_sequences.run_layout import REFERENCE_TEMPLATE

DATA_FOLDER = "data"  # under the results folder
DATA_ARTIFACTS = {"records": "{split}.parquet", "summary": "summary.json"}  # in a draw's folder
RECORD_INPUTS = ("train_records", "val_records", "test_records")  # a run's recorded inputs that are its draw's records
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
