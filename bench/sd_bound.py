"""Does a curve design's look hang on the bound the population fit searches the block SDs up to? (issue 59, item 5)

    python -m bench.sd_bound results/curve_design --look 2 [--limits 10 30] [--all] [--laplace]

Refits each curve a look stopped (--all: every curve it read) from the runs the look read, with the block SDs searched
up to each of --limits on the logit scale (population_curves.SD_LIMIT, 10 as shipped), at the look's own level, and
prints per bound the fit (intercept, slope, both SDs), k with the look's interval, the parallelism p and the reading,
then the fixed-block fit beside them; with --laplace, each bound once more with the Laplace likelihood lme4 takes
(bench/laplace_error.py), as the fit did until 2026-12-07. Where each block's runs are a step, the likelihood is
nearly flat along the ridge where the slope and SDs grow together: what the runs identify is then the ratios (log k =
c / b, an SD / |b| in log beta), not b or the SDs themselves, and under Laplace the likelihood kept rising along it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

from bench.laplace_error import fitting_with, laplace_loglik
from experiments.synthetic_sequences.analysis.records.metrics_files import read_metrics, runs_table
from experiments.synthetic_sequences.analysis.statistics import population_curves
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves, read_shift, reading
from experiments.synthetic_sequences.run_layout import metrics_path
from experiments.synthetic_sequences.sequential.curve_looks import curve_runs
from experiments.synthetic_sequences.sequential.design import OPEN


def factor(log_value: float) -> str:
    """exp(log_value) as the tables print a factor: an open end as 0 or inf, no estimate as -."""
    if math.isnan(log_value):
        return "-"
    return f"{math.exp(log_value):.2f}" if math.isfinite(log_value) else ("inf" if log_value > 0 else "0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--look", type=int, required=True)
    parser.add_argument("--limits", type=float, nargs="+", default=[population_curves.SD_LIMIT, 30.0])
    parser.add_argument("--all", action="store_true", help="every curve the look read, not only those it stopped")
    parser.add_argument("--laplace", action="store_true", help="each bound with the Laplace likelihood too")
    args = parser.parse_args()
    look = json.loads((args.results / "design" / f"look{args.look}.json").read_text())
    runs = runs_table(read_metrics([metrics_path(str(args.results), run) for run in sorted(look["runs_read"])])[0])
    likelihoods = {"quadrature": population_curves.marginal_loglik, **({"laplace": laplace_loglik} if args.laplace else {})}
    for group in look["groups"]:
        decision = group["decisions"]["curve"]
        if decision["look"] != args.look or (decision["decision"] == OPEN and not args.all):
            continue
        curves = Curves.of(curve_runs(runs, (group["family"], group["term"], group["alpha"])))
        print(f"{group['family']} {group['term']}: {decision['decision']} at look {args.look}, {len(curves.took_up)} runs")
        for (name, likelihood), limit in itertools.product(likelihoods.items(), args.limits):
            with fitting_with(likelihood, limit):
                fit = population_curves.fit_population(curves)
                low, high = population_curves.log_k_interval(curves, fit, level=1 - decision["alpha"])
                parallel_p = population_curves.parallelism_p(curves, fit)
            said = f"a {fit.intercept:.1f}, b {fit.slope:.2f}, SDs {fit.sd_block:.2f} / {fit.sd_mode:.2f}"
            said += f"; k {factor(fit.log_k)} [{factor(low)}, {factor(high)}], parallelism p {parallel_p:.3g}"
            print(f"  {name}, SDs up to {limit:g}: {said}: {reading(low, high, parallel_p, decision['alpha'])}", flush=True)
        fixed = read_shift(curves)
        said = f"k {factor(fixed.log_k)} [{factor(fixed.log_low)}, {factor(fixed.log_high)}] at 95%, parallelism p {fixed.parallel_p:.3g}"
        print(f"  fixed blocks: {said}")


if __name__ == "__main__":
    main()
