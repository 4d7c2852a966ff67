"""How often a pilot's take-up contrast reads "raises": the power of the verdict's own take-up test by layout.

    python -m bench.takeup_power [--draws 2000] [--mean-rate 0.05] [--sum-rates 0.7 0.8 0.9]

For each layout (references x seeds per reference) and take-up rate of the sum arm, it draws take-up outcomes of
both arms per block (every block alike), puts them through `contrasts.takeup_row`, the verdict's own take-up test
(Boschloo with one block, the exact test stratified by block with more), and counts the pilots whose p clears
Holm's first step over the planned contrasts (p x len(COMPARISONS) < 0.05): the most the smallest p of them needs, so a lower
bound of the power of the verdict's "raises" on this contrast. A simulation, not a timing: it prints its table.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import takeup_row
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.arms import BLOCK, COMPARISONS, TOOK_UP

LAYOUTS = ((5, 2), (2, 5), (1, 10), (5, 3), (5, 4))  # (references, seeds per reference)


def arm(took_up: np.ndarray, seeds: int) -> pd.DataFrame:
    """An arm's runs: took_up per run, seeds runs per block in block order."""
    return pd.DataFrame({TOOK_UP: took_up, BLOCK: np.repeat(np.arange(len(took_up) // seeds), seeds), "converged": 1.0})


def power(references: int, seeds: int, sum_rate: float, mean_rate: float, draws: int, rng: np.random.Generator) -> float:
    cleared = 0
    for _ in range(draws):
        sum_arm = arm(rng.random(references * seeds) < sum_rate, seeds)
        mean_arm = arm(rng.random(references * seeds) < mean_rate, seeds)
        cleared += takeup_row(sum_arm, mean_arm)["p"] * len(COMPARISONS) < ALPHA
    return cleared / draws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000, help="simulated pilots per cell")
    parser.add_argument("--mean-rate", type=float, default=0.05, help="the mean arm's take-up rate")
    parser.add_argument("--sum-rates", type=float, nargs="+", default=[0.7, 0.8, 0.9], help="the sum arm's take-up rates")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    header = " | ".join(f"{r} x {s}" for r, s in LAYOUTS)
    print(f"P(Holm's first step clears) at mean's rate {args.mean_rate}, {args.draws} pilots per cell")
    print(f"| sum's rate | {header} |\n|---|{'---|' * len(LAYOUTS)}")
    for sum_rate in args.sum_rates:
        cells = [power(r, s, sum_rate, args.mean_rate, args.draws, rng) for r, s in LAYOUTS]
        print(f"| {sum_rate} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    print(f"Monte Carlo se at most {0.5 / np.sqrt(args.draws):.3f}")
    rates = " ".join(map(str, args.sum_rates))
    print(f"command: python -m bench.takeup_power --draws {args.draws} --mean-rate {args.mean_rate} --sum-rates {rates}")


if __name__ == "__main__":
    main()
