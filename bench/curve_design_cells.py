"""A curve design's run, per (family, term): what it read and what the fixed grid would have needed for the same width
(issue 59, item 5).

    python -m bench.curve_design_cells results/curve_design [--grid config/curve.yaml] [--blocks 16] [--draws 100]

Per curve, from the run's tables (tables/beta_curves.csv, every run at the end) and its last look file: k with its 95%
population interval, the between-block SD of sum's effect (sd_mode) with its interval, the reading, the look and the
reason the design stopped (or "open"), and the runs it trained. Then the fixed grid's runs for that width: the fixed
grid (--grid's betas for the curve, both modes, its seeds per block) at --blocks blocks is simulated --draws times from
the curve's own fitted population model (population_curves.simulate_runs: new block effects, new outcomes), each fitted
and its 95% interval taken; the runs the fixed grid needs for the design's width follow from its median half-width of
log k as 1/sqrt(runs), as bench/curve_design.py scales them. A curve whose interval is open at either end has no
width to match ("-").
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from bench.curve_design import fixed_width
from experiments.synthetic_sequences.analysis.statistics import population_curves as population
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves
from experiments.synthetic_sequences.planning.grid import run_betas
from experiments.synthetic_sequences.sequential.curve_looks import read_curve_looks
from experiments.synthetic_sequences.sequential.design import OPEN
from experiments.synthetic_sequences.sequential.look_files import look_number

Curve = tuple[str, str, float]


def fixed_grid(config: dict) -> dict[Curve, list[float]]:
    """(family, term, alpha) -> the betas a fixed config trains it at, for its main families' curves."""
    grid = {}
    for family, spec in config["families"].items():
        if spec.get("control_of") or spec.get("controls", "none") != "none":
            continue
        for run in spec.get("runs") or []:
            betas, axis = run_betas(spec, run)
            if axis:
                grid[(family, run["term"], float(run.get("alpha", 0.0)))] = betas
    return grid


def grid_layout(betas: list[float], blocks: int, seeds: int) -> Curves:
    """The fixed grid's runs: every beta in both modes on `seeds` seeds in each of `blocks` blocks (outcomes unset)."""
    rows = [(math.log(beta), float(is_sum), block) for block in range(blocks) for is_sum in (0, 1) for beta in betas for _ in range(seeds)]
    log_beta, sums, block = (np.array(column) for column in zip(*rows, strict=True))
    return Curves(np.zeros(len(rows)), log_beta, sums, block.astype(int))


def fit_of(row: pd.Series) -> population.PopulationFit:
    return population.PopulationFit(row.intercept, row.slope, row.mode_effect, row.sd_block, row.sd_mode, math.nan)


def last_decisions(results: Path) -> dict[Curve, dict]:
    """(family, term, alpha) -> its decision at the last look that read it (a look file's groups carry stopped curves)."""
    paths = sorted((results / "design").glob("look*.json"), key=look_number)
    last = read_curve_looks(paths, recompute=False)[-1]  # the tables recomputed them
    return {(g["family"], g["term"], float(g["alpha"])): g["decisions"]["curve"] for g in last["groups"]}


def fixed_runs(row: pd.Series, betas: list[float], blocks: int, seeds: int, draws: int, rng: np.random.Generator) -> str:
    """The fixed grid's runs for this curve's 95% width, simulated from its fit (module docstring)."""
    if not (0 < row.ci_low and math.isfinite(row.ci_high)):
        return "-"
    width = (math.log(row.ci_high) - math.log(row.ci_low)) / 2
    layout, fit = grid_layout(betas, blocks, seeds), fit_of(row)
    fixed, _ = fixed_width(lambda: population.simulate_runs(layout, fit, rng), fit.log_k, draws)
    return "-" if not math.isfinite(fixed) else f"{len(layout.took_up) * (fixed / width) ** 2:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--grid", type=Path, default=Path("config/curve.yaml"))
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.time()
    grid_config = yaml.safe_load(args.grid.read_text())
    grid, seeds = fixed_grid(grid_config), int(grid_config["seeds"])
    table = pd.read_csv(args.results / "tables" / "beta_curves.csv")
    decisions = last_decisions(args.results)
    rng = np.random.default_rng(args.seed)
    print("| family | term | k (95% population interval) | sd_mode (95%) | reading | stop | runs | fixed grid's runs |")
    print("|---|---|---|---|---|---|---|---|")
    for row in table.itertuples(index=False):
        curve = (row.family, row.term, float(row.alpha))
        decision = decisions[curve]
        stop = "open" if decision["decision"] == OPEN else f"look {decision['look']}: {decision['decision']}"
        needed = fixed_runs(pd.Series(row._asdict()), grid[curve], args.blocks, seeds, args.draws, rng)
        said = [f"{row.k:.2f} ({row.ci_low:.2f}-{row.ci_high:.2f})", f"{row.sd_mode:.2f} ({row.sd_mode_low:.2f}-{row.sd_mode_high:.2f})"]
        print(f"| {row.family} | {row.term} | {said[0]} | {said[1]} | {row.reading} | {stop} | {row.runs} | {needed} |", flush=True)
    said = f"{args.grid}'s betas x 2 modes x {seeds} seeds at {args.blocks} blocks, {args.draws} draws each"
    print(f"\nfixed grid: {said}; wall {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
