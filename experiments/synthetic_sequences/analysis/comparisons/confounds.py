"""The confounds table: what else moves with length and mode, so that a mean-vs-sum difference can be read; and,
per (family, term), what length says about sum's effect on separation and what the runs' batches held in tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.synthetic_sequences.arms import NO_CONTROL
from experiments.synthetic_sequences.metrics import view
from experiments.synthetic_sequences.planning.data_draws import SHARED_DRAW, block_draw

SEPARATION = view("verdict")[-1]  # the separation endpoint's metric
LENGTH_SCOPE = "length:"  # a metrics scope within one y-length bucket of the test records


def confound_table(draws: Mapping[str, Mapping], references: Sequence[dict], metrics: pd.DataFrame) -> pd.DataFrame:
    """Length against strategy and task and token counts per data draw (column `draw`: 'shared', or a block's own,
    'ref3'; draws: {draw: its data summary}), c_base per mode and reference block (scope ref<N>, on the block's draw),
    and per mode the samples' parse rate and answer accuracy in each y-length bucket of the test prompts (mean over
    that mode's runs, draw 'pooled')."""
    rows = [{"draw": draw, **row} for draw, summary in draws.items() for row in draw_rows(summary)]
    for reference in references:
        block = "overall" if reference.get("zfree_seed") is None else block_draw(reference["zfree_seed"])
        for name in ("c_base", "base_aggregate_min"):
            where = {"draw": block if block in draws else SHARED_DRAW, "split": "val", "mode": reference["mode"]}
            rows.append({**where, "diagnostic": name, "scope": block, "value": reference[name]})
    samples = metrics[metrics.scope.str.startswith("length:") & metrics.metric.isin(("parse_rate", "answer_accuracy"))]
    for (mode, scope, metric), values in samples.groupby(["mode", "scope", "metric"])["value"]:
        rows.append(
            {
                "draw": "pooled",
                "split": "test",
                "mode": mode,
                "diagnostic": f"sample_{metric}",
                "scope": scope.removeprefix("length:"),
                "value": values.mean(),
            }
        )
    return pd.DataFrame(rows)


def draw_rows(summary: Mapping) -> list[dict]:
    """One data draw's rows of the confounds table: length against strategy, and supervised tokens, per split."""
    rows = []
    for split in ("train", "val", "test"):
        summary_split = summary[split]
        for scope, accuracy in summary_split["length_only_strategy_accuracy"].items():
            rows.append({"split": split, "mode": "any", "diagnostic": "length_only_strategy_accuracy", "scope": scope, "value": accuracy})
        for stat, value in summary_split["y_length"].items():
            rows.append({"split": split, "mode": "any", "diagnostic": f"supervised_tokens_{stat}", "scope": "overall", "value": value})
        for row in pd.DataFrame(summary_split["by_task_strategy"]).itertuples():
            scope = f"{row.task}/{row.strategy}"
            rows.append({"split": split, "mode": "any", "diagnostic": "supervised_tokens_mean", "scope": scope, "value": row.mean})
    return rows


def length_separation(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per (family, term, alpha) of a main family and per scope ('overall', then each y-length bucket of the test
    records): the separation endpoint averaged over the mean arm's runs and over the sum arm's, and sum - mean. A gain
    in separation that only length carries shows overall and vanishes within the buckets."""
    final = metrics[(metrics.controls == NO_CONTROL) & (metrics.metric == SEPARATION) & metrics.step.isna()]
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


def length_predicts_strategy(draws: Mapping[str, Mapping]) -> str:
    """How much y-length alone says about strategy on the training records, the confound the length lines read, from
    the data summaries ({draw: summary}): one draw's per task, or each of the blocks' own draws with their range, and
    the supervised tokens per record across them."""
    accuracy = {draw: summary["train"]["length_only_strategy_accuracy"] for draw, summary in draws.items()}
    chance = {draw: commonest_share(summary) for draw, summary in draws.items()}
    if len(draws) == 1:
        ((draw, only),) = accuracy.items()
        tasks = ", ".join(f"{task} {value:.2f}" for task, value in only.items() if task != "overall")
        return (
            f"Length alone predicts a training record's strategy with accuracy {only['overall']:.2f} ({tasks}), "
            f"against {chance[draw]:.2f} for always guessing the commonest strategy."
        )
    overall = {draw: value["overall"] for draw, value in accuracy.items()}
    tokens = {draw: summary["train"]["y_length"] for draw, summary in draws.items()}
    means = [value["mean"] for value in tokens.values()]
    return (
        f"Length alone predicts a training record's strategy with accuracy {span(overall.values())} over the "
        f"{len(draws)} blocks' own data draws ({', '.join(f'{draw} {value:.2f}' for draw, value in overall.items())}), "
        f"against {span(chance.values())} for always guessing the commonest strategy. Supervised tokens per training "
        f"record: mean {span(means)} across the draws (min {min(t['min'] for t in tokens.values()):g}, max "
        f"{max(t['max'] for t in tokens.values()):g})."
    )


def commonest_share(summary: Mapping) -> float:
    """The training records' share of their commonest strategy: the accuracy of a guess that knows no length."""
    counts = pd.DataFrame(summary["train"]["by_task_strategy"]).groupby("strategy")["count"].sum()
    return float(counts.max() / counts.sum())


def span(values) -> str:
    """'0.71 to 0.76', or '0.73' where the values round alike."""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low} to {high}"


def token_line(runs: pd.DataFrame) -> str:
    """Supervised tokens per example in the runs' training and validation batches, per mode of the main arms (the
    note's token-count diagnostics): mean of the runs' means, least minimum, largest maximum; '' where none logged them."""
    parts = []
    for mode, arm in runs[runs.controls == NO_CONTROL].groupby("mode", sort=False):
        splits = "; ".join(
            f"{split} mean {arm[f'{split}_tokens_mean'].mean():.2f} (min {arm[f'{split}_tokens_min'].min():g}, max "
            f"{arm[f'{split}_tokens_max'].max():g})"
            for split in ("train", "val")
            if f"{split}_tokens_mean" in arm  # a run's validation rows may not log them
        )
        if splits:
            parts.append(f"{mode}: {splits}")
    return f"Supervised tokens per example over the batches, by mode: {'. '.join(parts)}." if parts else ""
