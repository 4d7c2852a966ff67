import json
from dataclasses import replace

import pandas as pd
import pytest

from core.disentanglement.records import RecordsError, read_records, write_records
from experiments.synthetic_sequences.generate import (
    SequenceConfig,
    generate,
    generate_split,
    length_only_accuracy,
    main,
    records_to_evaluate,
)
from experiments.synthetic_sequences.splits import SPLITS
from experiments.synthetic_sequences.tasks import EOS, TASKS, VOCAB, ParseError, parse_output

SMALL = SequenceConfig(seed=3, n_train=600, n_val=200, n_test=200)


def tokens(ids):
    return [VOCAB[i] for i in ids]


@pytest.fixture(scope="module")
def frame():
    return generate_split(SMALL, "train")


def test_every_generated_output_parses_to_its_own_strategy_and_answer(frame):
    for row in frame.itertuples():
        parsed = parse_output(row.task, tokens(row.y))
        assert (parsed.strategy, parsed.answer) == (row.strategy, row.answer), row.id


def test_every_task_and_strategy_appears(frame):
    seen = set(zip(frame.task, frame.strategy, strict=True))
    assert seen == {(name, s) for name, task in TASKS.items() for s in task.strategies}


def test_answers_are_right(frame):
    for row in frame.itertuples():
        x = tokens(row.x)
        if row.task == "add":
            a, b = "".join(x[1:]).split("+")
            assert row.answer == str(int(a) + int(b))
        elif row.task == "sort":
            assert row.answer == "".join(sorted(x[1:]))
        else:
            assert row.answer == str(x[3:].count(x[1]))


def corruptions(y):
    """Structural corruptions of one output: each must fail to parse."""
    yield y[:-1]  # truncated: no <eos>
    yield y + [EOS]  # two <eos>
    yield [t for t in y if t != "ANS"]  # no answer marker
    cut = y.index("ANS")
    yield y[: cut + 1] + ["+"] + y[cut + 1 :]  # non-digit in the answer
    yield y[: cut + 1] + [EOS]  # empty answer
    if cut > 0:  # a working: change the answer so the working disagrees with it
        answer = y[cut + 1 : -1]
        wrong = [str((int(answer[-1]) + 1) % 10)] if len(answer) == 1 else answer[::-1] + ["9"]
        yield y[: cut + 1] + wrong + [EOS]
        yield ["<sep>", *y[1:]]  # a foreign token in the working


def test_corrupted_outputs_fail_to_parse(frame):
    checked = 0
    for row in frame.itertuples():
        y = tokens(row.y)
        for bad in corruptions(y):
            with pytest.raises(ParseError):
                parse_output(row.task, bad)
            checked += 1
    assert checked > 5 * len(frame)


@pytest.mark.parametrize(
    "task, y",
    [
        ("add", ["1", "2", "0", ">", "4", ";", "ANS", "3", EOS]),  # 1+2+0 is 3, not 4
        ("add", ["5", "5", "1", ">", "0", ";", "ANS", "1", "0", EOS]),  # carry-in must start at 0
        ("sort", ["3", ";", "1", "3", ";", "1", "2", ";", "ANS", "1", "2", EOS]),  # drops the 3
        ("sort", ["2", ":", "1", ";", "1", ":", "1", ";", "ANS", "2", "1", EOS]),  # counts out of order
        ("count", ["0", "2", "ANS", "2", EOS]),  # running count jumps by 2
        ("count", [":", "|", "1", "ANS", "1", EOS]),  # tally holds a digit
        ("sort", ["ANS", "1", EOS, "2"]),  # tokens after <eos>
    ],
)
def test_inconsistent_workings_fail_to_parse(task, y):
    with pytest.raises(ParseError):
        parse_output(task, y)


def test_unknown_task_is_an_error():
    with pytest.raises(ValueError, match="allowed values: add, sort, count"):
        parse_output("divide", ["ANS", "1", EOS])


def test_same_seed_gives_byte_identical_parquet(tmp_path):
    generate(SMALL, tmp_path / "a")
    generate(SMALL, tmp_path / "b")
    for split in SPLITS:
        assert (tmp_path / "a" / f"{split}.parquet").read_bytes() == (tmp_path / "b" / f"{split}.parquet").read_bytes()
    other = SequenceConfig(seed=4, n_train=600, n_val=200, n_test=200)
    generate(other, tmp_path / "c")
    assert (tmp_path / "a" / "train.parquet").read_bytes() != (tmp_path / "c" / "train.parquet").read_bytes()


def test_splits_differ_and_records_round_trip(tmp_path):
    generate(SMALL, tmp_path)
    train, val = read_records(tmp_path / "train.parquet"), read_records(tmp_path / "val.parquet")
    assert (train.split, val.split) == ("train", "val")
    assert train.vocab == VOCAB and len(val) == 200
    assert train.metadata["seed"] == 3
    assert train.frame.id.str.startswith("train-").all() and val.frame.id.str.startswith("val-").all()
    assert train.frame.x.map(tuple).head(50).tolist() != val.frame.x.map(tuple).head(50).tolist()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["train"]["records"] == 600


def test_a_summary_is_bound_to_its_records_and_its_statistics_to_what_they_give(tmp_path):
    """The summary records each split's sha256 (the Snakefile holds the records to it) and statistics that its records
    give back exactly; an edit of either statistic is named with the value the records give."""
    from core.disentanglement.artifacts import sha256_file
    from experiments.synthetic_sequences.generate import statistics_differences
    from experiments.synthetic_sequences.planning.data_draws import RECORDS_SHA256, read_summary

    generate(SMALL, tmp_path)
    summary = read_summary(tmp_path / "summary.json", "redraw it")
    assert summary[RECORDS_SHA256] == {split: sha256_file(tmp_path / f"{split}.parquet") for split in SPLITS}
    records = {split: pd.read_parquet(tmp_path / f"{split}.parquet") for split in SPLITS}
    assert statistics_differences(summary, records) == []
    drawn = summary["train"]["y_length"]["mean"]
    summary["train"]["y_length"]["mean"] = drawn + 0.25
    summary["test"]["length_only_strategy_accuracy"]["overall"] = 0.5
    assert statistics_differences(summary, records) == [
        f"train.y_length.mean {drawn + 0.25!r}, its records give {drawn!r}",
        f"test.length_only_strategy_accuracy.overall 0.5, its records give {records['test'].pipe(length_only_accuracy)!r}",
    ]


def test_length_overlap_knob_makes_length_less_telling():
    accuracy = {}
    for overlap in (0.0, 1.0):
        frame = generate_split(SequenceConfig(seed=0, n_train=4000, length_overlap=overlap), "train")
        accuracy[overlap] = (length_only_accuracy(frame), length_only_accuracy(frame[frame.task == "sort"]))
        lengths = frame.groupby("strategy")["y_length"]
        assert lengths.min().max() <= lengths.max().min()  # pooled over tasks, strategy length ranges overlap
    assert accuracy[1.0][0] < accuracy[0.0][0] - 0.02
    assert accuracy[1.0][1] < accuracy[0.0][1] - 0.03


@pytest.mark.parametrize(
    "flag, message",
    [
        (["--n-val", "0"], "n_val"),
        (["--length-overlap", "1.5"], "length_overlap"),
        (["--max-size", "12"], "max_size"),
        (["--tasks", "divide"], "allowed values: add, sort, count"),
    ],
)
def test_cli_rejects_bad_settings_and_writes_nothing(tmp_path, capsys, flag, message):
    with pytest.raises(SystemExit):
        main(["--out-dir", str(tmp_path / "out"), *flag])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_bad_records_files_are_named_in_the_error(tmp_path):
    with pytest.raises(RecordsError, match="does not exist"):
        read_records(tmp_path / "missing.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(RecordsError, match=r"junk.parquet is not a readable parquet"):
        read_records(tmp_path / "junk.parquet")
    empty = generate_split(SMALL, "val").iloc[:0]
    write_records(empty, tmp_path / "empty.parquet", vocab=list(VOCAB), split="val", metadata={})
    with pytest.raises(RecordsError, match=r"empty.parquet holds no records"):
        read_records(tmp_path / "empty.parquet")
    pd.DataFrame({"id": ["a"]}).to_parquet(tmp_path / "foreign.parquet")
    with pytest.raises(RecordsError, match=r"foreign.parquet lacks columns"):
        read_records(tmp_path / "foreign.parquet")
    frame = generate_split(SMALL, "val").head(3)
    write_records(frame, tmp_path / "small_vocab.parquet", vocab=list(VOCAB[:5]), split="val", metadata={})
    with pytest.raises(RecordsError, match="outside the vocabulary of size 5"):
        read_records(tmp_path / "small_vocab.parquet")
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("split", ["val", "test"])
def test_a_split_too_small_to_evaluate_is_refused_naming_the_size_that_would_do(tmp_path, split):
    with pytest.raises(SystemExit) as stop:
        main(["--out-dir", str(tmp_path / "out"), "--n-train", "50", f"--n-{split}", "1", "--tasks", "sort", "count"])
    error = str(stop.value)
    config = SequenceConfig(tasks=("sort", "count"))
    needed = records_to_evaluate(config, split)
    assert f"error: data.n_{split}: 1 records hold" in error and f"set n_{split} to at least {needed}" in error
    assert not (tmp_path / "out").exists()  # nothing written, the other splits neither

    def evaluable(n):  # counted by hand from the split itself
        counts = generate_split(replace(config, **{f"n_{split}": n}), split).groupby(["task", "strategy"]).size()
        return len(counts) == 6 and counts.min() >= 2

    assert evaluable(needed) and not evaluable(needed - 1)
