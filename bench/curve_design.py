"""How the sequential curve design (sequential/curve_design.py) reads k against the fixed grid, simulated with its
adaptivity: each stage's betas from the fit of every run before it, new blocks each stage, the stopping rules.

    python -m bench.curve_design [--draws 200] [--log-k -0.693] [--slope -2.45] [--mode-sd 0.5] [--block-sd 0.5]
                                 [--first-blocks 4] [--stage-blocks 8] [--seeds 1] [--budget 160] [--precision-only]
                                 [--spending obrien-fleming] [--placement c-optimal] [--seed 0] [--rows FILE]
    python -m bench.curve_design --from-rows FILE [FILE ...] [--fixed-draws 100] [the scenario's flags]

The truth: take-up P = expit(u_b + slope (log beta - log beta_50 + s log k) + s v_b), u_b ~ N(0, block_sd), v_b ~
N(0, mode_sd) per block, mean's beta_50 at the geometric centre of the span [0.035, 0.35] (config/curve.yaml's
dist and tokcc span). Per simulated design: the look it stopped at, why, its runs, whether its interval at the look's
spent level and the 95% interval on every run at the stop cover the true log k, their widths, and whether it read
"beyond scale" (a true shift: a false alarm) or "a shift". The
fixed grid beside it: config/curve.yaml's 5 betas over the span on 2 seeds per block, at 4 and 16 blocks, each fitted
once at 95%; the runs it needs for the design's median width follow from its width at 16 blocks as 1/sqrt(runs).
A simulation, not a timing: it prints its table and the wall it took. --rows also writes each design's row (its seed,
scenario and stop) to FILE, so that a long simulation can be run in pieces with distinct --seed, across sessions or
side by side on the two cores; --from-rows reads the pieces' rows back, refuses pieces of another scenario or a seed
read twice, and prints the table for all of them with the fixed grid beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

from core.disentanglement.artifacts import atomic_path
from experiments.synthetic_sequences.analysis.statistics import population_curves as population
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.sequential.curve_design import CurveDesign, coarse_betas, informative_betas, stop_reason

SPAN = (0.035, 0.062, 0.11, 0.2, 0.35)


class Truth:
    """A simulated curve: draws blocks and their runs."""

    def __init__(self, log_k: float, slope: float, block_sd: float, mode_sd: float, rng: np.random.Generator):
        self.log_k, self.slope, self.block_sd, self.mode_sd, self.rng = log_k, slope, block_sd, mode_sd, rng
        self.centre = float(np.mean(np.log(SPAN)))

    def stage(self, betas: dict[int, list[float]], blocks: int, seeds: int, first_block: int) -> Curves:
        """`blocks` new blocks from index `first_block`, each running mode s at betas[s] on `seeds` seeds."""
        rows = []
        for block in range(first_block, first_block + blocks):
            u, v = self.rng.normal(0, self.block_sd), self.rng.normal(0, self.mode_sd)
            for is_sum, mode_betas in betas.items():
                for beta in mode_betas:
                    eta = u + self.slope * (math.log(beta) - self.centre + is_sum * self.log_k) + is_sum * v
                    rows += [(float(y), math.log(beta), float(is_sum), block) for y in self.rng.random(seeds) < special.expit(eta)]
        took_up, log_beta, sums, block = (np.array(column) for column in zip(*rows, strict=True))
        return Curves(took_up, log_beta, sums, block.astype(int))


def joined(first: Curves, second: Curves) -> Curves:
    return Curves(*(np.concatenate([getattr(first, name), getattr(second, name)]) for name in ("took_up", "log_beta", "sums", "block")))


def run_design(design: CurveDesign, truth: Truth) -> dict:
    """One simulated design, stage by stage until a stop (sequential/curve_design.py's rules)."""
    coarse = coarse_betas(SPAN)
    curves = truth.stage({0: coarse, 1: coarse}, design.first_blocks, design.seeds, 0)
    blocks, before, look = design.first_blocks, 0, 1
    while True:
        runs = len(curves.took_up)
        room = runs + design.stage_runs() <= design.budget
        alpha = design.increment(runs, before, ALPHA, last=not room)
        fit = population.fit_population(curves)
        low, high = population.log_k_interval(curves, fit, level=1 - alpha)
        reason = stop_reason(design, fit.log_k, low, high, population.parallelism_p(curves, fit), alpha, room)
        if reason:
            nominal = population.log_k_interval(curves, fit)  # every run at 95%, as the curve table reads them
            return {"look": look, "runs": runs, "reason": reason, "estimate": fit.log_k, "low": low, "high": high, "nominal": nominal}
        betas = {s: informative_betas(fit.intercept, fit.slope, fit.mode_effect, s, SPAN, design.placement) for s in (0, 1)}
        curves = joined(curves, truth.stage(betas, design.stage_blocks, design.seeds, blocks))
        blocks, before, look = blocks + design.stage_blocks, runs, look + 1


def fixed_width(draw: Callable[[], Curves], log_k: float, draws: int) -> tuple[float, float]:
    """A fixed grid's median half-width of log k's 95% population interval over `draws` of its runs (`draw`), and how
    often the interval covers the true `log_k`."""
    widths, covered = [], 0
    for _ in range(draws):
        curves = draw()
        fit = population.fit_population(curves)
        low, high = population.log_k_interval(curves, fit)
        widths.append((high - low) / 2)
        covered += low <= log_k <= high
    return float(np.median(widths)), covered / draws


def share(count: float, draws: int) -> str:
    rate = count / draws
    return f"{rate:.3f} (se {math.sqrt(rate * (1 - rate) / draws):.3f})"


SCENARIO = (  # the flags a piece of rows must share with the call that reads it
    "log_k",
    "slope",
    "block_sd",
    "mode_sd",
    "first_blocks",
    "stage_blocks",
    "seeds",
    "budget",
    "spending",
    "precision_only",
    "placement",
)


def write_rows(results: list[dict], args: argparse.Namespace, path: Path) -> None:
    """Each design's stop, with the scenario and the seed that drew it, to `path` (CSV, written whole or not at all)."""
    rows = pd.DataFrame(
        [{**{key: getattr(args, key) for key in (*SCENARIO, "seed")}, "design": index, **result} for index, result in enumerate(results)]
    )
    rows[["nominal_low", "nominal_high"]] = pd.DataFrame(rows.pop("nominal").tolist(), index=rows.index)
    with atomic_path(path) as tmp:
        rows.to_csv(tmp, index=False)


def read_rows(paths: list[Path], args: argparse.Namespace) -> list[dict]:
    """The designs of every piece in `paths`; each piece must be this scenario's, and no seed may be read twice."""
    rows = pd.concat([pd.read_csv(path).assign(piece=index) for index, path in enumerate(paths)], ignore_index=True)
    for key in SCENARIO:
        asked, found = getattr(args, key), rows[key].unique()
        if len(found) != 1 or (found[0] != asked if isinstance(asked, str | bool) else not math.isclose(found[0], asked)):
            said = ", ".join(sorted(set(map(str, found))))
            raise SystemExit(f"--from-rows: {key} is {said} in the pieces, {asked} asked: pieces of another scenario")
    pieces = rows.groupby("seed")["piece"].unique()
    if (twice := pieces[pieces.map(len) > 1]).size:
        said = ", ".join(str(paths[piece]) for piece in twice.iloc[0])
        raise SystemExit(f"--from-rows: seed {twice.index[0]} is in {said}: the same designs read twice")
    rows["nominal"] = list(zip(rows.pop("nominal_low"), rows.pop("nominal_high"), strict=True))
    return rows.drop(columns=[*SCENARIO, "seed", "design", "piece"]).to_dict("records")


def report(results: list[dict], args: argparse.Namespace, design: CurveDesign, truth: Truth) -> None:
    """The designs' coverage, stops and runs, then the fixed grid's (--fixed-draws of it, none at 0) beside them."""
    draws = len(results)
    covered = sum(r["low"] <= args.log_k <= r["high"] for r in results)
    nominal = sum(r["nominal"][0] <= args.log_k <= r["nominal"][1] for r in results)
    widths = [(r["high"] - r["low"]) / 2 for r in results]
    nominal_widths = [(r["nominal"][1] - r["nominal"][0]) / 2 for r in results]
    runs = [r["runs"] for r in results]
    truth_said = f"log k {args.log_k:.3f}, slope {args.slope:g}, block SD {args.block_sd:g}, mode SD {args.mode_sd:g}"
    print(f"{draws} designs: {design}; truth {truth_said}")
    print(f"  k's interval at the stopping look's level covers: {share(covered, draws)}")
    print(f"  k's 95% interval on every run at the stop covers: {share(nominal, draws)}")
    print(f"  a shift read: {share(sum(r['reason'] == 'a shift' for r in results), draws)}")
    print(f"  beyond scale read (a true shift): {share(sum(r['reason'] == 'beyond scale' for r in results), draws)}")
    print(f"  stops: {dict(sorted(Counter(r['reason'] for r in results).items()))}")
    print(f"  looks: {dict(sorted(Counter(r['look'] for r in results).items()))}")
    print(f"  runs: mean {np.mean(runs):.1f}, median {np.median(runs):.0f}, max {max(runs)}")
    median_width = float(np.median(nominal_widths))
    print(f"  median interval at the look's level: a factor {math.exp(float(np.median(widths))):.2f} either way")
    print(f"  median 95% interval at the stop: a factor {math.exp(median_width):.2f} either way")
    if not args.fixed_draws:
        return
    grid = {0: list(SPAN), 1: list(SPAN)}
    for blocks in (4, 16):
        width, coverage = fixed_width(functools.partial(truth.stage, grid, blocks, 2, 0), args.log_k, args.fixed_draws)
        said = f"factor {math.exp(width):.2f}, covers {coverage:.3f}"
        print(f"  fixed grid, {blocks} blocks x 2 seeds x 5 betas ({20 * blocks} runs): {said}")
    print(f"  fixed grid's runs for the design's median width: {320 * (width / median_width) ** 2:.0f} (from 16 blocks, 1/sqrt(runs))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--fixed-draws", type=int, default=100)
    parser.add_argument("--log-k", type=float, default=math.log(0.5))
    parser.add_argument("--slope", type=float, default=-2.45)
    parser.add_argument("--block-sd", type=float, default=0.5)
    parser.add_argument("--mode-sd", type=float, default=0.5)
    parser.add_argument("--first-blocks", type=int, default=4)
    parser.add_argument("--stage-blocks", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--budget", type=int, default=160)
    parser.add_argument("--spending", default="obrien-fleming")
    parser.add_argument("--precision-only", action="store_true", help="stop at the precision or the budget, not at a reading")
    parser.add_argument("--placement", default="c-optimal", choices=["c-optimal", "d-optimal"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=Path, help="write each design's row here, to be read back with --from-rows")
    parser.add_argument("--from-rows", type=Path, nargs="+", help="read the designs from these pieces instead of simulating")
    args = parser.parse_args()
    start = time.time()
    design = CurveDesign(args.first_blocks, args.stage_blocks, args.seeds, args.budget, alpha_spending=args.spending)
    design = dataclasses.replace(design, stop_at_reading=not args.precision_only, placement=args.placement)
    truth = Truth(args.log_k, args.slope, args.block_sd, args.mode_sd, np.random.default_rng(args.seed))
    if args.from_rows:
        results = read_rows(args.from_rows, args)
    else:
        results = [run_design(design, truth) for _ in range(args.draws)]
        if args.rows:
            write_rows(results, args, args.rows)
    report(results, args, design, truth)
    print(f"  wall {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
