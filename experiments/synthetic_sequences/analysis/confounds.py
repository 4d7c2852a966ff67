"""The confounds table: what else moves with length and mode, so that a mean-vs-sum difference can be read; and,
per (family, term), what length says about sum's effect on separation and what the runs' batches held in tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.synthetic_sequences.metrics import view

SEPARATION = view("verdict")[-1]  # the separation endpoint's metric
LENGTH_SCOPE = "length:"  # a metrics scope within one y-length bucket of the test records


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


def length_separation(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per (family, term, alpha) of a main family and per scope ('overall', then each y-length bucket of the test
    records): the separation endpoint averaged over the mean arm's runs and over the sum arm's, and sum - mean. A gain
    in separation that only length carries shows overall and vanishes within the buckets."""
    final = metrics[(metrics.controls == "none") & (metrics.metric == SEPARATION) & metrics.step.isna()]
    final = final[(final.scope == "overall") | final.scope.str.startswith(LENGTH_SCOPE)]
    arms = final.groupby(["family", "term", "alpha", "scope", "mode"]).value.agg(["mean", "size"]).unstack("mode")
    columns = ["family", "term", "alpha", "scope", "mean", "sum", "sum - mean", "runs"]
    if arms.empty or not {"mean", "sum"} <= set(arms["mean"].columns):
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(
        {
            "mean": arms["mean"]["mean"],
            "sum": arms["mean"]["sum"],
            "sum - mean": arms["mean"]["sum"] - arms["mean"]["mean"],
            "runs": arms["size"].min(axis=1),  # of the smaller arm
        }
    ).dropna(subset=["sum - mean"])
    table = table.reset_index()
    table["scope"] = table.scope.str.removeprefix(LENGTH_SCOPE)
    # overall first, then the buckets by their shortest length ('y_length 3-4' before 'y_length 10-17')
    table["order"] = [-1 if scope == "overall" else int(scope.split()[-1].split("-")[0]) for scope in table.scope]
    return table.sort_values(["family", "term", "alpha", "order"], kind="stable")[columns].reset_index(drop=True)


def length_line(table: pd.DataFrame, family: str, term: str, alpha: float) -> str | None:
    """The verdict's line on length for one (family, term, alpha), from length_separation; None without both arms."""
    mine = table[(table.family == family) & (table.term == term) & (table.alpha == alpha)]
    overall, buckets = mine[mine.scope == "overall"], mine[mine.scope != "overall"]
    if overall.empty:
        return None
    difference = float(overall["sum - mean"].iloc[0])
    within = ", ".join(f"{row['scope']} {row['sum - mean']:+.3f}" for row in buckets.to_dict("records"))
    same = int(((buckets["sum - mean"] > 0) == (difference > 0)).sum()) if difference != 0 else 0
    return (
        f"Length: strategy information, sum - mean (arm means), {difference:+.3f} over all test records; within "
        f"y-length buckets {within or 'none'}"
        + (f", the overall's sign in {same} of {len(buckets)}." if difference != 0 and len(buckets) else ".")
    )


def length_predicts_strategy(data_summary: Mapping) -> str:
    """How much y-length alone says about strategy, on the training records: the confound the length lines read."""
    accuracy = data_summary["train"]["length_only_strategy_accuracy"]
    tasks = ", ".join(f"{task} {value:.2f}" for task, value in accuracy.items() if task != "overall")
    counts = pd.DataFrame(data_summary["train"]["by_task_strategy"]).groupby("strategy")["count"].sum()
    chance = counts.max() / counts.sum()  # always guessing the commonest strategy, which knows no length
    return (
        f"Length alone predicts a training record's strategy with accuracy {accuracy['overall']:.2f} ({tasks}), "
        f"against {chance:.2f} for always guessing the commonest strategy."
    )


def token_line(runs: pd.DataFrame) -> str:
    """Supervised tokens per example in the runs' training and validation batches, per mode of the main arms (the
    note's token-count diagnostics): mean of the runs' means, least minimum, largest maximum; '' where none logged them."""
    parts = []
    for mode, arm in runs[runs.controls == "none"].groupby("mode", sort=False):
        splits = "; ".join(
            f"{split} mean {arm[f'{split}_tokens_mean'].mean():.2f} (min {arm[f'{split}_tokens_min'].min():g}, max "
            f"{arm[f'{split}_tokens_max'].max():g})"
            for split in ("train", "val")
            if f"{split}_tokens_mean" in arm  # a run's validation rows may not log them
        )
        if splits:
            parts.append(f"{mode}: {splits}")
    return f"Supervised tokens per example over the batches, by mode: {'. '.join(parts)}." if parts else ""
