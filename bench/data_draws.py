"""What the data draw adds: two results folders of one grid, one on a shared draw and one with a draw per block
(data.per_block), read arm by arm with the verdict's own stratified tests.

    python -m bench.data_draws results results/per_block

Per arm (family, term, mode, alpha): take-up k/n in each folder, with each block's count, and the exact stratified
test of "the draw changed take-up" (analysis/statistics/stratified.py: block i of one folder against block i of the other; they
share the z-free seed and the training seeds, and differ in the records). Per (family, term, alpha) and folder: sum
- mean's take-up counts and Breslow-Day's p that the blocks agree on it (larger between-block variance shows as a
smaller p). Each folder's verdict reading is in its tables/cross_term.csv.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.synthetic_sequences.analysis.statistics.stratified import breslow_day_p, exact_stratified_p
from experiments.synthetic_sequences.arms import BLOCK, TOOK_UP

ARM = ["family", "term", "mode", "alpha"]


def read_runs(results: str | Path) -> pd.DataFrame:
    path = Path(results) / "tables" / "runs.parquet"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no runs table; run the pipeline into {results} first")
    return pd.read_parquet(path)


def block_counts(arm: pd.DataFrame) -> dict[int, tuple[int, int]]:
    """{block: (took up, runs)} of one arm."""
    return {int(block): (int(runs[TOOK_UP].sum()), len(runs)) for block, runs in arm.groupby(BLOCK)}


def counts_text(counts: dict[int, tuple[int, int]]) -> str:
    k, n = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    return f"{k}/{n} ({', '.join(f'ref{block} {c[0]}/{c[1]}' for block, c in sorted(counts.items()))})"


def arm_rows(shared: pd.DataFrame, own: pd.DataFrame) -> pd.DataFrame:
    """Per arm present in both: each folder's counts and the exact stratified p of the draw's effect on take-up."""
    rows = []
    own_arms = dict(tuple(own.groupby(ARM)))
    for key, arm in shared.groupby(ARM):
        if key not in own_arms:
            continue
        one, each = block_counts(arm), block_counts(own_arms[key])
        tables = [(*one[block], *each[block]) for block in sorted(set(one) & set(each))]
        rows.append(
            {
                **dict(zip(ARM, key, strict=True)),
                "one draw": counts_text(one),
                "a draw per block": counts_text(each),
                "exact stratified p": exact_stratified_p(tables),
            }
        )
    return pd.DataFrame(rows)


def agreement_rows(runs: pd.DataFrame, label: str) -> list[dict]:
    """Per (family, term, alpha) of the main families: sum and mean take-up and Breslow-Day's p over the blocks."""
    rows = []
    main = runs[runs.controls == "none"]
    for (family, term, alpha), group in main.groupby(["family", "term", "alpha"]):
        arms = {mode: block_counts(group[group["mode"] == mode]) for mode in ("sum", "mean")}
        if not all(arms.values()):
            continue
        tables = [(*arms["sum"][block], *arms["mean"][block]) for block in sorted(set(arms["sum"]) & set(arms["mean"]))]
        rows.append(
            {
                "folder": label,
                "family": family,
                "term": term,
                "alpha": alpha,
                "sum": counts_text(arms["sum"]),
                "mean": counts_text(arms["mean"]),
                "Breslow-Day p": breslow_day_p(tables),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("one_draw", help="results folder of the shared draw (data.per_block false)")
    parser.add_argument("per_block", help="results folder of the same grid with a draw per block")
    args = parser.parse_args(argv)
    try:
        shared, own = read_runs(args.one_draw), read_runs(args.per_block)
    except FileNotFoundError as err:
        sys.exit(f"error: {err}")
    print(f"$ python -m bench.data_draws {args.one_draw} {args.per_block}\n")
    print(arm_rows(shared, own).to_markdown(index=False, floatfmt=".3g"), "\n")
    agreement = agreement_rows(shared, "one draw") + agreement_rows(own, "a draw per block")
    print(pd.DataFrame(agreement).to_markdown(index=False, floatfmt=".3g"))


if __name__ == "__main__":
    main()
