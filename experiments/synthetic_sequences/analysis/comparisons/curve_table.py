"""The take-up curves' table: per (family, term, alpha), k and its reading over the population of blocks
(statistics/population_curves.py), the fixed-block fit beside it as a check (statistics/beta_curves.py), and the
observed against the fitted take-up per (beta, mode).

The reading comes from the population fit: k's profile interval with the SDs refitted at each k, and Rao's score test
of a mode x log beta slope. The between-block SD of sum's effect on the logit, with its profile interval and its
boundary likelihood-ratio p, says how far the blocks disagree about the shift. The fixed-block fit's k, interval and
parallelism p, and its goodness of fit against one rate per (beta, mode), read the blocks that ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from core.disentanglement.registry import TERMS
from experiments.synthetic_sequences.analysis.statistics import beta_curves, population_curves
from experiments.synthetic_sequences.analysis.statistics.beta_curves import Curves
from experiments.synthetic_sequences.arms import NO_CONTROL, TOOK_UP

KEYS = ["family", "term", "alpha"]


def shift_fit(runs: pd.DataFrame, predicted: float | None = None) -> dict:
    """Every figure of one (family, term, alpha)'s curves (module docstring): its main family's mean and sum runs."""
    from scipy import stats

    curves = Curves.of(runs)
    population = population_curves.fit_population(curves)
    log_low, log_high = population_curves.log_k_interval(curves, population)
    sd_low, sd_high = population_curves.mode_sd_interval(curves, population)
    parallel_p = population_curves.parallelism_p(curves, population)
    fixed = beta_curves.read_shift(curves)
    cells_llf, cells = beta_curves.cells_loglik(curves)
    said = beta_curves.reading(log_low, log_high, parallel_p)
    log_k = population.log_k
    per_cell = len(runs) / cells
    resolve = beta_curves.runs_to_resolve(log_k, log_low, log_high, per_cell) if said == "cannot be resolved" else math.nan
    read_against = predicted is not None and said != "beyond scale"
    return {
        "runs": len(runs),
        "betas": runs.beta.nunique(),
        "blocks": runs.reference.nunique(),
        "k": math.exp(log_k) if math.isfinite(log_k) else math.nan,
        "ci_low": math.exp(log_low),
        "ci_high": math.exp(log_high),
        "interval": "population profile likelihood",
        "intercept": population.intercept,
        "slope": population.slope,
        "mode_effect": population.mode_effect,
        "sd_block": population.sd_block,
        "sd_mode": population.sd_mode,
        "sd_mode_low": sd_low,
        "sd_mode_high": sd_high,
        "sd_mode_p": population_curves.mode_sd_p(curves, population),
        "parallel_p": parallel_p,
        "fixed_k": math.exp(fixed.log_k) if math.isfinite(fixed.log_k) else math.nan,
        "fixed_low": math.exp(fixed.log_low),
        "fixed_high": math.exp(fixed.log_high),
        "fixed_parallel_p": fixed.parallel_p,
        "fit_p": float(stats.chi2.sf(2 * (cells_llf - fixed.loglik), cells - 2)) if cells > 2 else math.nan,
        "reading": said,
        "runs_to_resolve": resolve,
        "predicted_k": predicted if predicted is not None else math.nan,
        "against_prediction": beta_curves.against_prediction(log_low, log_high, predicted) if read_against else "-",
    }


def scale_predictions(table_keys: list[tuple[str, str, float]], tokens: float) -> dict[tuple[str, str, float], float]:
    """(family, term, alpha) -> the k a pure scale change predicts, 1 / tokens, for each term in the mode's own units
    (core/disentanglement/registry.py: not normalised); a normalised term has no prediction (k near 1 is its null)."""
    return {key: 1.0 / tokens for key in table_keys if key[1] in TERMS and not TERMS[key[1]].normalised}


def curve_groups(runs: pd.DataFrame):
    """(key, runs) of each (family, term, alpha) of the main families with a mean and a sum run at two betas or more."""
    for key, group in runs[runs.controls == NO_CONTROL].groupby(KEYS, sort=True):
        if set(group["mode"]) == {"mean", "sum"} and group.beta.nunique() >= 2:
            yield key, group


def shift_table(runs: pd.DataFrame, tokens: float | None = None, design_stops: Sequence[Mapping] = ()) -> pd.DataFrame:
    """One row per curve_groups entry; given the train split's mean supervised token count, raw's (and tok's) k is read
    against the scale's prediction 1 / tokens; given a curve design's stops (sequential/curve_looks.curve_stops), its
    answer per curve beside, in the design_* columns, so that the figure reads what the verdict reads."""
    groups = dict(curve_groups(runs))
    predicted = scale_predictions(list(groups), tokens) if tokens else {}
    table = pd.DataFrame([{**dict(zip(KEYS, key, strict=True)), **shift_fit(group, predicted.get(key))} for key, group in groups.items()])
    return table.merge(pd.DataFrame(design_stops), on=KEYS, how="left") if design_stops and not table.empty else table


def cells_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (beta, mode) of every curve_groups entry: its runs, how many took up, and the share the fixed-block shift
    model expects there, averaged over the cell's runs: where the two part, the shift model misses."""
    tables = []
    for key, group in curve_groups(runs):
        fitted = np.asarray(beta_curves.additive(Curves.of(group)).fittedvalues)
        cells = group.assign(fitted=fitted).groupby(["beta", "mode"])
        table = pd.DataFrame({"runs": cells.size(), "took_up": cells[TOOK_UP].sum().astype(int), "fitted": cells.fitted.mean()})
        tables.append(table.reset_index().assign(**dict(zip(KEYS, key, strict=True))))
    return pd.concat(tables or [pd.DataFrame()], ignore_index=True).reindex(columns=[*KEYS, "beta", "mode", "runs", "took_up", "fitted"])
