"""The confounds table: what else moves with length and mode, so that a mean-vs-sum difference can be read."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def confound_table(data_summary: dict, references: Sequence[dict], metrics: pd.DataFrame) -> pd.DataFrame:
    """Length against strategy and task, token counts, c_base per mode and reference block (scope ref<N>), and per
    mode the samples' parse rate and answer accuracy in each y-length bucket of the test prompts (mean over that mode's runs)."""
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
        block = "overall" if reference.get("zfree_seed") is None else f"ref{reference['zfree_seed']}"
        for name in ("c_base", "base_aggregate_min"):
            rows.append({"split": "val", "mode": reference["mode"], "diagnostic": name, "scope": block, "value": reference[name]})
    samples = metrics[metrics.scope.str.startswith("length:") & metrics.metric.isin(("parse_rate", "answer_accuracy"))]
    for (mode, scope, metric), values in samples.groupby(["mode", "scope", "metric"])["value"]:
        rows.append(
            {
                "split": "test",
                "mode": mode,
                "diagnostic": f"sample_{metric}",
                "scope": scope.removeprefix("length:"),
                "value": values.mean(),
            }
        )
    return pd.DataFrame(rows)
