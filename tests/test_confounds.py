"""The length confound per term and the token-count line, on constructed metrics whose answer is computed by hand."""

import math

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.confounds import (
    length_line,
    length_predicts_strategy,
    length_separation,
    token_line,
)

NAN = math.nan


def separation_rows(mode: str, seed: int, overall: float, buckets: dict[str, float], controls: str = "none") -> list[dict]:
    base = {
        "family": "main",
        "term": "dist",
        "alpha": 0.0,
        "mode": mode,
        "seed": seed,
        "controls": controls,
        "metric": "strategy_information",
    }
    rows = [{**base, "scope": "overall", "step": NAN, "value": overall}]
    rows += [{**base, "scope": f"length:{bucket}", "step": NAN, "value": value} for bucket, value in buckets.items()]
    rows.append({**base, "scope": "curve", "step": 50.0, "value": 9.0})  # a learning-curve point: not a final value
    return rows


def test_sum_minus_mean_is_the_difference_of_arm_means_overall_and_in_each_bucket_in_length_order():
    """mean arm: overall 0.1 and 0.3 (mean 0.2); sum arm: 0.5 and 0.7 (mean 0.6): +0.4 overall. Within buckets the
    gain is +0.1 in 'y_length 3-4' and -0.1 in 'y_length 10-17', which sorts after 3-4 by length, not by text."""
    metrics = pd.DataFrame(
        separation_rows("mean", 0, 0.1, {"y_length 10-17": 0.4, "y_length 3-4": 0.1})
        + separation_rows("mean", 1, 0.3, {"y_length 10-17": 0.6, "y_length 3-4": 0.3})
        + separation_rows("sum", 0, 0.5, {"y_length 10-17": 0.3, "y_length 3-4": 0.2})
        + separation_rows("sum", 1, 0.7, {"y_length 10-17": 0.5, "y_length 3-4": 0.4})
        + separation_rows("mean", 0, 5.0, {}, controls="scale")  # a control arm: not part of sum - mean
    )
    table = length_separation(metrics)
    assert list(table.scope) == ["overall", "y_length 3-4", "y_length 10-17"]
    assert table["sum - mean"].round(12).tolist() == [0.4, 0.1, -0.1]
    assert table["mean"].round(12).tolist() == [0.2, 0.2, 0.5] and set(table.runs) == {2}
    line = length_line(table, "main", "dist", 0.0)
    assert line.startswith("Length: strategy information, sum - mean (arm means), +0.400 over all test records")
    assert "y_length 3-4 +0.100, y_length 10-17 -0.100, the overall's sign in 1 of 2." in line
    assert length_line(table, "main", "raw", 0.0) is None


def test_without_a_sum_arm_there_is_no_length_table():
    table = length_separation(pd.DataFrame(separation_rows("mean", 0, 0.1, {"y_length 3-4": 0.1})))
    assert table.empty and "sum - mean" in table.columns


def test_the_token_line_gives_each_mode_its_batches_mean_least_minimum_and_largest_maximum():
    runs = pd.DataFrame(
        [
            {
                "controls": "none",
                "mode": "mean",
                "train_tokens_mean": 6.0,
                "train_tokens_min": 3,
                "train_tokens_max": 15,
                "val_tokens_mean": 5.0,
                "val_tokens_min": 3,
                "val_tokens_max": 12,
            },
            {
                "controls": "none",
                "mode": "mean",
                "train_tokens_mean": 7.0,
                "train_tokens_min": 4,
                "train_tokens_max": 17,
                "val_tokens_mean": 6.0,
                "val_tokens_min": 2,
                "val_tokens_max": 11,
            },
            {
                "controls": "scale",
                "mode": "mean",
                "train_tokens_mean": 99.0,
                "train_tokens_min": 0,
                "train_tokens_max": 99,
                "val_tokens_mean": 99.0,
                "val_tokens_min": 0,
                "val_tokens_max": 99,
            },
        ]
    )
    assert token_line(runs) == (
        "Supervised tokens per example over the batches, by mode: mean: train mean 6.50 (min 3, max 17); val mean 5.50 (min 2, max 12)."
    )


def test_a_split_without_token_counts_is_left_out_and_none_leaves_no_line():
    runs = pd.DataFrame([{"controls": "none", "mode": "sum", "train_tokens_mean": 6.0, "train_tokens_min": 3, "train_tokens_max": 15}])
    assert token_line(runs) == "Supervised tokens per example over the batches, by mode: sum: train mean 6.00 (min 3, max 15)."
    assert token_line(runs[["controls", "mode"]]) == ""


def test_length_alone_is_read_from_the_training_records():
    by_task_strategy = [  # 30 direct, 50 stepwise, 20 alternative records: the commonest strategy is half of them
        {"task": "count", "strategy": "direct", "count": 10},
        {"task": "sort", "strategy": "direct", "count": 20},
        {"task": "count", "strategy": "stepwise", "count": 35},
        {"task": "sort", "strategy": "stepwise", "count": 15},
        {"task": "sort", "strategy": "alternative", "count": 20},
    ]
    summary = {
        "train": {
            "length_only_strategy_accuracy": {"overall": 0.735, "count": 0.7321, "sort": 0.9091},
            "by_task_strategy": by_task_strategy,
        }
    }
    assert length_predicts_strategy({"shared": summary}) == (
        "Length alone predicts a training record's strategy with accuracy 0.73 (count 0.73, sort 0.91), "
        "against 0.50 for always guessing the commonest strategy."
    )
