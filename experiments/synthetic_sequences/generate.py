"""Generate train / val / test records of tasks x strategies, deterministic from a seed.

    python -m experiments.synthetic_sequences.generate --out-dir results/data --seed 0

Traces are longer than direct answers of the same problem. --length-overlap
lets direct answers take larger problems: their sizes are drawn from
[min_size, max_size + round(length_overlap * (9 - max_size))] while traces keep
[min_size, max_size], so long direct answers overlap short traces and length
alone says less about the strategy; summary.json reports how much it still
says, overall and within each task. Larger problems for direct answers make
problem size weakly predictive of strategy, one of the spec's expected confounds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.disentanglement.artifacts import sha256_file, write_json
from core.disentanglement.cli import add_settings_flags, setting
from core.disentanglement.records import write_records
from experiments.synthetic_sequences.planning.data_draws import DATA_ARTIFACTS, RECORDS_SHA256
from experiments.synthetic_sequences.splits import SPLITS
from experiments.synthetic_sequences.tasks import DIRECT, TASKS, VOCAB, render_output

MAX_ITEMS = 9  # running counts are single digits
EVALUATED_SPLITS = ("val", "test")  # the learning curves' and the final evaluation's
EVALUATED_PER_STRATEGY = 2  # records of each strategy of each task those splits need: a probe's two folds
MAX_RECORDS = 100_000  # how far records_to_evaluate looks


@dataclass(frozen=True)
class SequenceConfig:
    seed: int = setting(0, "seed of every drawn problem and strategy")
    n_train: int = setting(4000, "records in the train split")
    n_val: int = setting(500, "records in the validation split")
    n_test: int = setting(500, "records in the test split")
    min_size: int = setting(2, "smallest problem size")
    max_size: int = setting(5, "largest problem size of the traced strategy")
    length_overlap: float = setting(0.5, "0: strategies share problem sizes; 1: direct answers reach the largest problems")
    tasks: tuple[str, ...] = tuple(TASKS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        for split in SPLITS:
            if getattr(self, f"n_{split}") < 1:
                raise ValueError(f"n_{split}: {getattr(self, f'n_{split}')} is not allowed; every split needs >= 1 record")
        if not 1 <= self.min_size <= self.max_size <= MAX_ITEMS:
            raise ValueError(f"min_size/max_size: need 1 <= min_size <= max_size <= {MAX_ITEMS}, got {self.min_size}, {self.max_size}")
        if not 0.0 <= self.length_overlap <= 1.0:
            raise ValueError(f"length_overlap: {self.length_overlap} is not allowed; it must be in [0, 1]")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            raise ValueError(f"tasks: {unknown or 'empty'} not allowed; allowed values: {', '.join(TASKS)}")

    def size_range(self, strategy: str) -> tuple[int, int]:
        if strategy != DIRECT:
            return self.min_size, self.max_size
        return self.min_size, self.max_size + round(self.length_overlap * (MAX_ITEMS - self.max_size))


def draw_records(config: SequenceConfig, split: str) -> Iterator[dict]:
    """The split's records one after another: the first n of them are the split of n_<split> = n."""
    rng = np.random.default_rng([config.seed, SPLITS.index(split)])
    token_id = {token: i for i, token in enumerate(VOCAB)}
    for i in itertools.count():
        task_name = config.tasks[rng.integers(len(config.tasks))]
        task = TASKS[task_name]
        strategy = task.strategies[rng.integers(len(task.strategies))]
        low, high = config.size_range(strategy)
        problem = task.sample(rng, int(rng.integers(low, high + 1)))
        y = render_output(task_name, problem, strategy)
        yield {
            "id": f"{split}-{i:06d}",
            "task": task_name,
            "strategy": strategy,
            "answer": problem.answer,
            "x": [token_id[t] for t in problem.x],
            "y": [token_id[t] for t in y],
            "y_length": len(y),
        }


def generate_split(config: SequenceConfig, split: str) -> pd.DataFrame:
    return pd.DataFrame(itertools.islice(draw_records(config, split), getattr(config, f"n_{split}")))


def strategy_cells(config: SequenceConfig) -> list[tuple[str, str]]:
    return [(task, strategy) for task in config.tasks for strategy in TASKS[task].strategies]


def records_to_evaluate(config: SequenceConfig, split: str) -> int | None:
    """The fewest records of the split (at this data seed) that hold every strategy of every task EVALUATED_PER_STRATEGY
    times, or None if the first MAX_RECORDS do not."""
    missing = dict.fromkeys(strategy_cells(config), EVALUATED_PER_STRATEGY)
    for count, record in enumerate(itertools.islice(draw_records(config, split), MAX_RECORDS), start=1):
        cell = (record["task"], record["strategy"])
        if missing.get(cell):
            missing[cell] -= 1
            if not any(missing.values()):
                return count
    return None


def check_evaluable(config: SequenceConfig, split: str, frame: pd.DataFrame) -> None:
    """Refuse a validation or test split that evaluation cannot read: one that lacks a strategy of a task, or holds
    it once (a linear probe needs two folds of every strategy; strategy information within a task needs its
    strategies), naming the setting and the smallest value that would do."""
    counts = frame.groupby(["task", "strategy"]).size() if len(frame) else pd.Series(dtype=int)
    short = [
        f"{task}/{strategy} {int(counts.get((task, strategy), 0))}x"
        for task, strategy in strategy_cells(config)
        if counts.get((task, strategy), 0) < EVALUATED_PER_STRATEGY
    ]
    if not short:
        return
    needed = records_to_evaluate(config, split)
    advice = (
        f"set n_{split} to at least {needed} (at data.seed {config.seed} its first {needed} records hold them)"
        if needed
        else f"not even {MAX_RECORDS} records hold them at data.seed {config.seed}"
    )
    raise ValueError(
        f"n_{split}: {len(frame)} records hold {', '.join(short)}; evaluation needs every strategy of every task at least "
        f"{EVALUATED_PER_STRATEGY} times in the {split} split (a probe's two folds, strategy information within each task): "
        f"{advice}"
    )


def length_only_accuracy(frame: pd.DataFrame) -> float:
    """Accuracy of the best strategy guess from y_length alone (the majority strategy at each length)."""
    return float(frame.groupby("y_length")["strategy"].agg(lambda s: s.value_counts().iloc[0]).sum() / len(frame))


def summarise(frame: pd.DataFrame) -> dict:
    by_strategy = frame.groupby(["task", "strategy"])["y_length"].agg(["count", "mean", "min", "max"]).reset_index()
    return {
        "records": len(frame),
        "y_length": {"mean": float(frame.y_length.mean()), "min": int(frame.y_length.min()), "max": int(frame.y_length.max())},
        "length_only_strategy_accuracy": {
            "overall": length_only_accuracy(frame),
            **{task: length_only_accuracy(group) for task, group in frame.groupby("task")},
        },
        "by_task_strategy": by_strategy.to_dict(orient="records"),
    }


def generate(config: SequenceConfig, out_dir: str | Path) -> dict:
    """Write {split}.parquet for every split and summary.json; return the summary. A split that evaluation could not
    read is refused before anything is written."""
    out_dir = Path(out_dir)
    frames = {split: generate_split(config, split) for split in SPLITS}
    for split in EVALUATED_SPLITS:
        check_evaluable(config, split, frames[split])
    summary = {"config": asdict(config), "vocab_size": len(VOCAB), RECORDS_SHA256: {}}
    for split, frame in frames.items():
        path = out_dir / DATA_ARTIFACTS["records"].format(split=split)
        write_records(frame, path, vocab=list(VOCAB), split=split, metadata=asdict(config))
        summary[split] = summarise(frame)
        summary[RECORDS_SHA256][split] = sha256_file(path)  # binds the summary to its records (data_draws.check_draw)
    write_json(summary, out_dir / DATA_ARTIFACTS["summary"])
    return summary


def statistics_differences(summary: dict, records: dict[str, pd.DataFrame]) -> list[str]:
    """Where a summary's statistics of each split differ from those its records give ('train.y_length.mean 1.0, its
    records give 6.57'): a summary edited after drawing."""

    def differences(recorded, computed, where: str) -> list[str]:
        if isinstance(recorded, dict) and isinstance(computed, dict):
            keys = sorted(set(recorded) | set(computed))
            return [line for key in keys for line in differences(recorded.get(key), computed.get(key), f"{where}.{key}")]
        return [] if recorded == computed else [f"{where} {recorded!r:.40}, its records give {computed!r:.40}"]

    # through JSON, as the summary was written: tuples as lists, numpy numbers as plain ones, floats exact
    computed = {split: json.loads(json.dumps(summarise(frame))) for split, frame in records.items()}
    return [line for split in records for line in differences(summary[split], computed[split], split)]


def main(argv: Sequence[str] | None = None) -> None:
    defaults = SequenceConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", required=True, help="folder for train/val/test.parquet and summary.json")
    add_settings_flags(parser, SequenceConfig, skip=("tasks",))
    parser.add_argument("--tasks", nargs="+", default=list(defaults.tasks), help=f"tasks to draw from (choices: {', '.join(TASKS)})")
    args = vars(parser.parse_args(argv))
    out_dir = args.pop("out_dir")
    try:
        config = SequenceConfig(**args)
    except ValueError as err:
        parser.error(str(err))
    try:
        summary = generate(config, out_dir)
    except ValueError as err:
        sys.exit(f"error: data.{err}")
    for split in SPLITS:
        acc = summary[split]["length_only_strategy_accuracy"]["overall"]
        print(f"{split}: {summary[split]['records']} records, length-only strategy accuracy {acc:.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
