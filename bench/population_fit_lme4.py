"""The random-block shift model (analysis/statistics/population_curves.py) against lme4 on the datasets its test
holds: each dataset's runs, fitted by R's lme4 (bench/population_fit_lme4.R) and by the module, printed side by side.

    python -m bench.population_fit_lme4    # needs Rscript with lme4 (Debian: apt-get install r-cran-lme4)

tests/test_population_curves.py holds the module's fits to the lme4 figures this prints.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.curve_shift import pilot
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves

BETAS = np.geomspace(0.01, 0.16, 9)
# name: (rng seed, true log k, blocks, seeds per block, block SD, SD of sum's effect over blocks)
DATASETS = {
    "blocks disagree": (3, float(np.log(0.5)), 8, 2, 1.0, 1.0),
    "blocks agree": (1, float(np.log(0.5)), 4, 2, 0.5, 0.0),
}


def dataset(name: str) -> Curves:
    seed, log_k, blocks, seeds, block_sd, mode_sd = DATASETS[name]
    runs = pilot(np.random.default_rng(seed), log_k, blocks, seeds, BETAS, block_sd=block_sd, mode_sd=mode_sd)
    return Curves.of(runs)


def lme4_fit(curves: Curves) -> dict[str, float]:
    """lme4's figures for these runs (bench/population_fit_lme4.R)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.csv"
        rows = zip(curves.block, curves.log_beta, curves.sums, curves.took_up, strict=True)
        path.write_text("block,log_beta,sum,took_up\n" + "".join(f"{b},{float(lb)!r},{s:g},{y:g}\n" for b, lb, s, y in rows))
        script = Path(__file__).with_suffix(".R")
        line = subprocess.run(["Rscript", str(script), str(path)], capture_output=True, text=True, check=True).stdout
    return {key: math.nan if value == "NA" else float(value) for key, value in (item.split("=") for item in line.split())}


def population_figures(curves: Curves) -> dict[str, float]:
    """population_curves' fit, k's interval, the spread test and sd_mode's interval, named as lme4_fit names them."""
    from experiments.synthetic_sequences.analysis.statistics import population_curves as population

    fit = population.fit_population(curves)
    log_low, log_high = population.log_k_interval(curves, fit)
    sd_low, sd_high = population.mode_sd_interval(curves, fit)
    return {
        "intercept": fit.intercept,
        "slope": fit.slope,
        "mode_effect": fit.mode_effect,
        "sd_block": fit.sd_block,
        "sd_mode": fit.sd_mode,
        "loglik": fit.loglik,
        "log_k": fit.log_k,
        "log_low": log_low,
        "log_high": log_high,
        "mode_sd_p": population.mode_sd_p(curves, fit),
        "sd_low": sd_low,
        "sd_high": sd_high,
    }


def main() -> None:
    for name in DATASETS:
        curves = dataset(name)
        ours = population_figures(curves)
        print(f"{name}:")
        for key, value in lme4_fit(curves).items():
            print(f"  {key:12s} lme4 {value:12.6g}  population_curves {ours[key]:12.6g}")


if __name__ == "__main__":
    main()
