"""How often k's interval holds the true k when blocks disagree: the random-block fit (population_curves.py) against
the fixed-block one (beta_curves.py), on pilots whose blocks each draw their own offset and their own effect of sum.

    python -m bench.population_coverage [--draws 200] [--blocks 4] [--seeds 2] [--mode-sd 0.5] [--log-k -0.693]
                                        [--slope -2.45] [--bartlett 0]

Each pilot: bench/curve_shift.pilot at `--betas` log-spaced betas over a factor 16, `--slope` (the calibration's
cliff; -6 is the steep regime where fixed-block fits separate), block SD 0.5 and v_block ~ N(0, mode_sd) on sum's
logit. Prints each interval's coverage of the true log k, its median width (a factor either way), how often each
parallelism test rejects the true shift at 5% and how often the spread test rejects sd_mode = 0, with their Monte Carlo
standard errors. A simulation, not a timing.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from bench.curve_shift import SLOPE, pilot
from experiments.synthetic_sequences.analysis.statistics import beta_curves
from experiments.synthetic_sequences.analysis.statistics import population_curves as population


def share(count: int, draws: int) -> str:
    rate = count / draws
    return f"{rate:.3f} (se {math.sqrt(rate * (1 - rate) / draws):.3f})"


def simulate(
    draws: int, blocks: int, seeds: int, mode_sd: float, log_k: float, slope: float, betas: np.ndarray, seed: int, bartlett: int
) -> dict:
    rng = np.random.default_rng(seed)
    names = ["population", "fixed blocks", *(["population, Bartlett-corrected"] if bartlett else [])]
    held = dict.fromkeys(names, 0)
    widths = {name: [] for name in names}
    spread_rejected, parallel_rejected = 0, {"population": 0, "fixed blocks": 0}
    for _ in range(draws):
        curves = beta_curves.Curves.of(pilot(rng, log_k, blocks, seeds, betas, slope=slope, mode_sd=mode_sd))
        fit = population.fit_population(curves)
        fixed = beta_curves.read_shift(curves)
        intervals = {"population": population.log_k_interval(curves, fit), "fixed blocks": (fixed.log_low, fixed.log_high)}
        if bartlett:
            factor = population.bartlett_factor(curves, fit, bartlett, seed=int(rng.integers(2**31)))
            intervals["population, Bartlett-corrected"] = population.log_k_interval(curves, fit, factor)
        for name, (low, high) in intervals.items():
            held[name] += low <= log_k <= high
            widths[name].append(math.exp((high - low) / 2))
        spread_rejected += population.mode_sd_p(curves, fit) < 0.05
        parallel_rejected["population"] += population.parallelism_p(curves, fit) < 0.05  # nan compares False
        parallel_rejected["fixed blocks"] += fixed.parallel_p < 0.05
    row = {}
    for name in held:
        row[f"{name} coverage"] = share(held[name], draws)
        row[f"{name} median factor"] = f"{np.median(widths[name]):.2f}"
    for name, count in parallel_rejected.items():
        row[f"{name} parallelism rejects"] = share(count, draws)
    row["spread test rejects"] = share(spread_rejected, draws)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--mode-sd", type=float, default=0.5)
    parser.add_argument("--log-k", type=float, default=math.log(0.5))
    parser.add_argument("--slope", type=float, default=SLOPE, help="logit units per unit of log beta (-6: steep, separating)")
    parser.add_argument("--betas", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bartlett", type=int, default=0, help="simulated datasets per pilot for the Bartlett factor (0: none)")
    args = parser.parse_args()
    betas = np.geomspace(0.01, 0.16, args.betas)
    row = simulate(args.draws, args.blocks, args.seeds, args.mode_sd, args.log_k, args.slope, betas, args.seed, args.bartlett)
    shape = f"{args.blocks} blocks x {args.seeds} seeds, {args.betas} betas, slope {args.slope:g}"
    print(f"{args.draws} pilots, {shape}, mode_sd {args.mode_sd}, log k {args.log_k:.3f}")
    for key, value in row.items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
