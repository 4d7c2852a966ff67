"""How often three parallelism tests of the population fit reject a true shift at 5%: the shipped score test (block
SDs held at their estimates), the score test with the observed information over the SDs too, and the likelihood ratio
of the population shape model (a mode x log beta slope d) against the shift model.

    python -m bench.parallelism_tests BLOCKS MODE_SD SLOPE DRAWS [--seed 7]

Pilots as bench/population_coverage.py draws them (bench/curve_shift.pilot: 9 betas over a factor 16, 2 seeds per
block and beta, block SD 0.5, true k 0.5). A simulation, not a timing: it prints the three rejection rates.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import optimize, stats

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.statistics import population_curves as population
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves


def shape_design(curves: Curves) -> np.ndarray:
    return np.column_stack([np.ones(len(curves.took_up)), curves.log_beta, curves.sums, curves.sums * curves.log_beta])


def shape_loglik(curves: Curves, fit: population.PopulationFit) -> float:
    """The shape model's maximum log likelihood, started from the shift model's fit."""
    design = shape_design(curves)

    def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
        loglik, gradient = population.marginal_loglik(design, x[:4], curves, x[4], x[5])
        return -loglik, -gradient

    start = [fit.intercept, fit.slope, fit.mode_effect, 0.0, max(fit.sd_block, 0.05), max(fit.sd_mode, 0.05)]
    bounds = [(-population.EFFECT_LIMIT, population.EFFECT_LIMIT)] * 4 + [(-population.SD_LIMIT, population.SD_LIMIT)] * 2
    return -optimize.minimize(negative, start, jac=True, method="L-BFGS-B", bounds=bounds, options=population.TOLERANCES).fun


def score_with_sds(curves: Curves, fit: population.PopulationFit, step: float = 1e-5) -> float:
    """Rao's score test of d with the observed information over every parameter the fit moved, the SDs included."""
    design = shape_design(curves)
    at = np.array([fit.intercept, fit.slope, fit.mode_effect, 0.0, fit.sd_block, fit.sd_mode])
    moved = [*range(4), *(4 + index for index, sd in enumerate(at[4:]) if sd > 0)]

    def gradient(x: np.ndarray) -> np.ndarray:
        return population.marginal_loglik(design, x[:4], curves, x[4], x[5])[1][moved]

    information = np.empty((len(moved), len(moved)))
    for column, parameter in enumerate(moved):
        nudge = np.zeros(len(at))
        nudge[parameter] = step
        information[:, column] = (gradient(at - nudge) - gradient(at + nudge)) / (2 * step)
    information = (information + information.T) / 2
    if np.any(np.linalg.eigvalsh(information) <= 0):
        return math.nan
    return float(stats.chi2.sf(gradient(at)[3] ** 2 * np.linalg.inv(information)[3, 3], 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blocks", type=int)
    parser.add_argument("mode_sd", type=float)
    parser.add_argument("slope", type=float)
    parser.add_argument("draws", type=int)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng, betas = np.random.default_rng(args.seed), np.geomspace(0.01, 0.16, 9)
    rejected = np.zeros(3)
    for _ in range(args.draws):
        curves = Curves.of(pilot(rng, math.log(0.5), args.blocks, 2, betas, slope=args.slope, mode_sd=args.mode_sd))
        fit = population.fit_population(curves)
        ratio = max(2 * (shape_loglik(curves, fit) - fit.loglik), 0.0)
        p_values = [population.parallelism_p(curves, fit), score_with_sds(curves, fit), stats.chi2.sf(ratio, 1)]
        rejected += np.array([p < 0.05 for p in p_values])  # nan compares False
    held, with_sds, ratio = rejected / args.draws
    print(f"{args.draws} pilots, {args.blocks} blocks, mode SD {args.mode_sd:g}, slope {args.slope:g}: rejects a true shift at 5%:")
    print(f"  score test, SDs held (shipped): {held:.3f}; with the SDs: {with_sds:.3f}; likelihood ratio: {ratio:.3f}")


if __name__ == "__main__":
    main()
