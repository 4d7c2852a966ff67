"""How well a curve config reads the shift factor k: the coverage of k's 95% interval, its width and the readings, on
take-up drawn from a known logistic curve at a design's shape.

    python -m bench.curve_shift [--draws 1000] [--blocks 4] [--seeds 2] [--betas 5] [--span 10] [--below 1]
                                [--log-k 0 0.693] [--bootstrapped 200]

Each simulated pilot draws, per reference block, an offset a_block ~ N(0, block_sd) (blocks differ in how readily
they take up), then each run's take-up with P = expit(a_block + slope (log beta - log beta_50 + s log k)), s = 1 for
sum: sum at beta takes up as mean does at k x beta. The betas are log-spaced over `span` (a factor) around beta_50,
where the mean arm of an average block takes up half the time (or a factor `below` under their centre); slope -2.45
takes it from 0.9 to 0.1 over a factor of 6 in beta (the calibration's cliff: 3 to 10). Each pilot goes through
analysis/statistics/beta_curves.py's own fits: k's profile-likelihood interval, the parallelism test and the reading. A
simulation, not a timing: it prints its table.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from experiments.synthetic_sequences.analysis.statistics import beta_curves
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.arms import TOOK_UP

SLOPE = -2.45  # logit units per unit of log beta: 0.9 to 0.1 over a factor of exp(2 * 2.197 / 2.45) = 6
BLOCK_SD = 0.5


def pilot(
    rng: np.random.Generator,
    log_k: float,
    blocks: int,
    seeds: int,
    betas: np.ndarray,
    slope: float = SLOPE,
    below: float = 1.0,
    block_sd: float = BLOCK_SD,
    mode_sd: float = 0.0,
) -> pd.DataFrame:
    """One simulated curve config's mean and sum runs of one (family, term) (module docstring); mean's beta_50 lies a
    factor `below` under the betas' geometric centre (a design centred between mean's cliff and sum's). With `mode_sd`,
    each block's sum also moves its logit by its own v_block ~ N(0, mode_sd): the blocks disagree about the shift."""
    offsets = rng.normal(0.0, block_sd, blocks)
    mode_effects = rng.normal(0.0, mode_sd, blocks) if mode_sd > 0 else np.zeros(blocks)
    centre = float(np.mean(np.log(betas))) - math.log(below)
    rows = []
    for block, (offset, mode_effect) in enumerate(zip(offsets, mode_effects, strict=True)):
        for beta in betas:
            for mode in ("mean", "sum"):
                logit = offset + slope * (math.log(beta) - centre + (mode == "sum") * log_k) + (mode == "sum") * mode_effect
                chance = 1.0 / (1.0 + math.exp(-logit))
                took_up = rng.random(seeds) < chance
                rows += [{"reference": block, "beta": beta, "mode": mode, "controls": "none", TOOK_UP: float(t)} for t in took_up]
    return pd.DataFrame(rows)


def bootstrap_interval(runs: pd.DataFrame, draws: int, seed: int = 0) -> tuple[float, float]:
    """The 2.5% and 97.5% percentiles of log k refitted on reference blocks resampled with replacement (a block
    drawn twice counts as two); a draw whose fit has no slope gives no k and is left out."""
    rng = np.random.default_rng(seed)
    blocks = sorted(runs.reference.unique())
    by_block = {reference: runs[runs.reference == reference] for reference in blocks}
    estimates = []
    for _ in range(draws):
        chosen = rng.choice(blocks, size=len(blocks), replace=True)
        sample = pd.concat([by_block[reference].assign(reference=index) for index, reference in enumerate(chosen)])
        if math.isfinite(log_k := beta_curves.free_log_k(beta_curves.additive(beta_curves.Curves.of(sample)))):
            estimates.append(log_k)
    if len(estimates) < draws / 2:
        return -math.inf, math.inf
    low, high = np.percentile(estimates, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def simulate(
    log_k: float, draws: int, blocks: int, seeds: int, betas: np.ndarray, rng: np.random.Generator, bootstrapped: int, below: float
) -> dict:
    """The profile interval's coverage, openness and width and the readings over `draws` pilots; the block bootstrap's
    coverage over the first `bootstrapped` of them (100 resamples each)."""
    covered, open_ends, widths, readings, boot_covered = 0, 0, [], {}, 0
    for draw in range(draws):
        runs = pilot(rng, log_k, blocks, seeds, betas, below=below)
        shift = beta_curves.read_shift(beta_curves.Curves.of(runs))
        low, high, said = shift.log_low, shift.log_high, shift.reading
        covered += low <= log_k <= high
        if draw < bootstrapped:
            boot_low, boot_high = bootstrap_interval(runs, draws=100, seed=draw)
            boot_covered += boot_low <= log_k <= boot_high
        if math.isfinite(low) and math.isfinite(high):
            widths.append(math.exp((high - low) / 2))
        else:
            open_ends += 1
        readings[said] = readings.get(said, 0) + 1
    return {
        "coverage": covered / draws,
        "open": open_ends / draws,
        "median factor either way": float(np.median(widths)) if widths else math.nan,
        "bootstrap coverage": boot_covered / bootstrapped if bootstrapped else math.nan,
        **{name: readings.get(name, 0) / draws for name in ("beyond scale", "no shift", "a shift", "cannot be resolved")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000, help="simulated pilots per true k")
    parser.add_argument("--blocks", type=int, default=4, help="reference blocks")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per (block, beta, mode)")
    parser.add_argument("--betas", type=int, default=5, help="log-spaced betas")
    parser.add_argument("--span", type=float, default=10.0, help="the largest beta over the smallest")
    parser.add_argument("--log-k", type=float, nargs="+", default=[0.0, math.log(2.0)], help="true log k values")
    parser.add_argument("--below", type=float, default=1.0, help="mean's beta_50 this factor under the betas' centre")
    parser.add_argument("--bootstrapped", type=int, default=200, help="pilots whose block-bootstrap interval is also drawn")
    args = parser.parse_args()
    betas = np.geomspace(1.0, args.span, args.betas) / math.sqrt(args.span)  # centred on beta_50 = 1
    rng = np.random.default_rng(0)
    runs = args.blocks * args.seeds * args.betas * 2
    print(
        f"{args.blocks} blocks x {args.seeds} seeds x {args.betas} betas over a factor of {args.span:g} x 2 modes = {runs} runs "
        f"per (family, term); slope {SLOPE}, block sd {BLOCK_SD}; mean's beta_50 a factor {args.below:g} under the betas' "
        f"centre; {args.draws} pilots per true k"
    )
    keys = (
        "coverage",
        "open",
        "median factor either way",
        "bootstrap coverage",
        "beyond scale",
        "no shift",
        "a shift",
        "cannot be resolved",
    )
    print("| true k | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    started = time.perf_counter()
    for log_k in args.log_k:
        figures = simulate(log_k, args.draws, args.blocks, args.seeds, betas, rng, min(args.bootstrapped, args.draws), args.below)
        print(f"| {math.exp(log_k):.3g} | " + " | ".join(f"{figures[key]:.3f}" for key in keys) + " |")
    se = math.sqrt(0.95 * 0.05 / args.draws)
    bootstrapped = min(args.bootstrapped, args.draws)
    boot = f" ({math.sqrt(0.95 * 0.05 / bootstrapped):.3f} for the bootstrap's)" if bootstrapped else ""
    print(f"Monte Carlo se of a coverage near 0.95: {se:.3f}{boot}; {time.perf_counter() - started:.0f} s")
    log_ks = " ".join(f"{value:g}" for value in args.log_k)
    print(
        f"command: python -m bench.curve_shift --draws {args.draws} --blocks {args.blocks} --seeds {args.seeds} "
        f"--betas {args.betas} --span {args.span:g} --below {args.below:g} --log-k {log_ks} --bootstrapped {args.bootstrapped}"
    )


if __name__ == "__main__":
    main()
