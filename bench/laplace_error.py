"""The Laplace approximation against the grid quadrature the population fit takes (issue 59, item 5).

    python -m bench.laplace_error [--pilots 20] [--blocks 12] [--slope -30] [--block-sd 30] [--mode-sd 9] [--seed 0]

lme4's glmer integrates each block's effects by the Laplace approximation (nAGQ = 1); the population fit
(analysis/statistics/population_curves.py) took it so until 2026-12-07, and now by quadrature on a grid
(analysis/statistics/block_quadrature.py). Where each block's runs are a step over beta, as one seed per (block, beta,
mode) on a steep curve leaves them, the two part. This draws such pilots (bench/curve_shift.pilot: 5 betas over a
factor of 10, one seed, true k 0.5; by default a slope of -30 with block SDs of 30 and 9 on the logit scale, cliffs that
spread over a factor of e between blocks) and fits each with either likelihood, the block SDs searched up to 10 and up
to 30, printing per pilot the log likelihood each gives at the Laplace fit, and per likelihood and bound how often k's
95% profile interval covers the truth, its median width (a factor) and where the SDs stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import math

import numpy as np
from scipy import special

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.statistics import population_curves as population
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves

BETAS = np.geomspace(0.035, 0.35, 5)
LOG_K = math.log(0.5)
NEWTON_STEPS = 100


def laplace_loglik(design: np.ndarray, effects: np.ndarray, curves: Curves, sd_block: float, sd_mode: float) -> tuple[float, np.ndarray]:
    """The model's log likelihood and its gradient in (effects, sd_block, sd_mode), the fixed part being design @
    effects (runs x effects), each block's integral over its (u_b, v_b) by the Laplace approximation.

    With (u_b, v_b) = (sd_block xi_1, sd_mode xi_2), xi ~ N(0, I) and a_i = (sd_block, sd_mode s_i), so that
    eta_i = fixed_i + a_i . xi_b: log L_b = g_b(xi_hat) - log det H_b / 2, g_b(xi) = loglik_b(xi) - |xi|^2 / 2 at its
    maximum xi_hat, H_b = sum_i w_i a_i a_i' + I its negative Hessian (w = mu (1 - mu)). The gradient: dg/dphi at
    xi_hat (the envelope theorem) less tr(H^-1 dH/dphi) / 2, where dH/dphi moves with w through eta, xi_hat itself
    moving as dxi_hat/dphi = H^-1 d(grad_xi g)/dphi (the implicit function theorem), and with a_i through the SDs.
    """
    blocks = int(curves.block.max()) + 1
    y, s, block = curves.took_up, curves.sums, curves.block
    fixed = design @ effects
    a = np.column_stack([np.full(len(y), sd_block), sd_mode * s])  # runs x 2

    def per_block(values: np.ndarray) -> np.ndarray:  # sums over each block's runs, along the first axis
        return np.stack([np.bincount(block, weights=column, minlength=blocks) for column in np.reshape(values, (len(y), -1)).T], axis=-1)

    def penalised(xi: np.ndarray) -> tuple[float, np.ndarray]:
        eta = fixed + np.sum(a * xi[block], axis=1)
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)) - 0.5 * np.sum(xi**2)), eta

    def hessians(weight: np.ndarray) -> np.ndarray:  # blocks x 2 x 2
        return per_block((weight[:, None, None] * a[:, :, None] * a[:, None, :]).reshape(len(y), 4)).reshape(blocks, 2, 2) + np.eye(2)

    xi = np.zeros((blocks, 2))
    value, eta = penalised(xi)
    for _ in range(NEWTON_STEPS):
        mu = special.expit(eta)
        gradient = per_block(a * (y - mu)[:, None]) - xi
        step = np.linalg.solve(hessians(mu * (1.0 - mu)), gradient[:, :, None])[:, :, 0]
        for _ in range(30):  # halve a step that overshoots: the penalised log likelihood is concave in xi
            candidate, candidate_eta = penalised(xi + step)
            if candidate >= value - 1e-12:
                break
            step /= 2
        xi, value, eta = xi + step, candidate, candidate_eta
        if np.max(np.abs(step)) < 1e-10:
            break
    mu = special.expit(eta)
    weight, residual = mu * (1.0 - mu), y - mu
    hessian = hessians(weight)
    inverse = np.linalg.inv(hessian)[block]  # runs x 2 x 2: each run's block's H^-1
    # d eta / d phi holding xi (runs x parameters), and d a / d phi for the SDs (runs x 2 x parameters)
    partial = np.column_stack([design, xi[block, 0], s * xi[block, 1]])
    moves_a = np.zeros((len(y), 2, partial.shape[1]))
    moves_a[:, 0, -2], moves_a[:, 1, -1] = 1.0, s
    # d (grad_xi g) / d phi per block, then d xi_hat / d phi = H^-1 of it
    pulled = per_block((moves_a * residual[:, None, None] - a[:, :, None] * (weight[:, None] * partial)[:, None, :]).reshape(len(y), -1))
    moves_xi = np.linalg.solve(hessian, pulled.reshape(blocks, 2, -1))[block]  # runs x 2 x parameters
    total = partial + np.einsum("ij,ijk->ik", a, moves_xi)  # d eta / d phi, xi_hat moving
    h_inverse_a = np.einsum("ijk,ik->ij", inverse, a)  # H^-1 a_i
    spread = np.sum(a * h_inverse_a, axis=1)  # a_i' H^-1 a_i
    trace = (weight * (1.0 - 2.0 * mu) * spread) @ total + 2.0 * np.einsum("ij,ijk->k", weight[:, None] * h_inverse_a, moves_a)
    loglik = value - 0.5 * float(np.sum(np.linalg.slogdet(hessian)[1]))
    return loglik, residual @ partial - 0.5 * trace


@contextlib.contextmanager
def fitting_with(likelihood, limit: float):
    """The population fit, its profiles and tests with `likelihood` and the SDs searched up to `limit`, inside."""
    shipped = population.marginal_loglik, population.SD_LIMIT
    population.marginal_loglik, population.SD_LIMIT = likelihood, limit  # read by the fit, its profiles and tests
    try:
        yield
    finally:
        population.marginal_loglik, population.SD_LIMIT = shipped


def fitted(curves: Curves, likelihood, limit: float) -> tuple[population.PopulationFit, float, float]:
    """The population fit and k's 95% interval with `likelihood` in the fit and the SDs searched up to `limit`."""
    with fitting_with(likelihood, limit):
        fit = population.fit_population(curves)
        return fit, *population.log_k_interval(curves, fit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pilots", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--slope", type=float, default=-30.0)
    parser.add_argument("--block-sd", type=float, default=30.0)
    parser.add_argument("--mode-sd", type=float, default=9.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    methods = {"laplace": laplace_loglik, "quadrature": population.marginal_loglik}
    read = {(name, limit): [] for name in methods for limit in (10.0, 30.0)}
    for draw in range(args.pilots):
        runs = pilot(rng, LOG_K, args.blocks, 1, BETAS, slope=args.slope, block_sd=args.block_sd, mode_sd=args.mode_sd)
        curves = Curves.of(runs)
        line = []
        for (name, limit), rows in read.items():
            fit, low, high = fitted(curves, methods[name], limit)
            rows.append((low <= LOG_K <= high, math.exp(high - low), fit.sd_block, fit.sd_mode))
            line.append(f"{name} {limit:g}: k {math.exp(fit.log_k):.2f} [{math.exp(low):.2f}, {math.exp(high):.2f}]")
            if (name, limit) == ("laplace", 10.0):
                effects = np.array([fit.intercept, fit.slope, fit.mode_effect])
                exact = population.marginal_loglik(population.shift_design(curves), effects, curves, fit.sd_block, fit.sd_mode)[0]
                line.insert(0, f"at Laplace's fit: Laplace {fit.loglik:.2f}, quadrature {exact:.2f}")
        print(f"pilot {draw}: " + "; ".join(line), flush=True)
    print(f"| likelihood | SDs up to | covers k (of {args.pilots}) | median width (factor) | SDs at the bound |")
    print("|---|---|---|---|---|")
    for (name, limit), rows in read.items():
        covers, widths, sd_block, sd_mode = map(np.array, zip(*rows, strict=True))
        at_bound = int(np.sum((sd_block > limit - 1e-3) | (sd_mode > limit - 1e-3)))
        print(f"| {name} | {limit:g} | {int(covers.sum())} | {np.median(widths):.2f} | {at_bound} |")


if __name__ == "__main__":
    main()
