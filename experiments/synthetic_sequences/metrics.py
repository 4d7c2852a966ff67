"""The metric registry: every metric a table, curve, plot or verdict line reads, by name, once.

Each metric has a label (as the plots and tables print it), a unit, a direction (which way is more of what the
question asks about: latent use, separation, sample quality, or lower for an NLL and an onset) and, where a contrast
compares it, its margin (the smallest effect of interest), and where extraction can check it, the range its values
lie in. A training diagnostic of the batches says how its per-batch values reduce over a run (mean, min or max).

Which metrics a table, curve or verdict line reads, and in which order it shows them, is VIEWS; `uses(name)` is the
other direction. No torch or pandas here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DIRECTIONS = ("higher", "lower", "neither")
BATCH_REDUCTIONS = ("mean", "min", "max")


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    direction: str
    margin: float | None = None  # the smallest effect of interest of a contrast, in the metric's unit
    bounds: tuple[float, float] | None = None  # the values extraction accepts (a float's residue aside)
    over_batches: str | None = None  # a training diagnostic: how a run reduces its per-batch values
    standard_error: str | None = None  # a Monte Carlo estimate: the metric holding its standard error, beside it

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise ValueError(f"metric {self.name}: direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if self.over_batches not in (None, *BATCH_REDUCTIONS):
            raise ValueError(f"metric {self.name}: over_batches {self.over_batches!r} is not one of {', '.join(BATCH_REDUCTIONS)}")


SHARE, NATS, NATS_PER_TOKEN, NATS_PER_EXAMPLE = "share", "nats", "nats per token", "nats per example"
UNIT_INTERVAL, AGREEMENT = (0.0, 1.0), (-1.0, 1.0)
NON_NEGATIVE = (0.0, math.inf)

REGISTRY = (
    # the take-up event, per run (analysis/records/curves.py)
    Metric("took_up", "took up the latent", "share of seeds", "higher", margin=0.3),
    Metric("onset_step", "onset of take-up", "step", "lower"),
    Metric("converged", "converged", "flag", "neither"),
    Metric("floor_mutual_information", "smallest validation I(x;z) before the onset (nats)", NATS, "neither"),
    Metric("rounding_takeup", "took up from a posterior uniform to float precision", "flag", "neither"),
    # only where the run's stop_at_take_up was on and ended it: the step of its confirmed take-up
    Metric("ended_at_take_up", "ended at its confirmed take-up (step)", "step", "neither"),
    # latent usage
    # I(x;z) >= 0; the continuous family's is a Monte Carlo estimate, which may fall below 0 by its standard error
    Metric("mutual_information", "I(x;z) (nats)", NATS, "higher", margin=0.05, bounds=NON_NEGATIVE, standard_error="mutual_information_se"),
    Metric("mutual_information_se", "I(x;z), Monte Carlo standard error (nats)", NATS, "neither", bounds=NON_NEGATIVE),
    Metric("kl", "KL(q(z|x,y) || p(z))", NATS, "neither", margin=0.05, bounds=NON_NEGATIVE),
    Metric("shuffled_z_nll_rise_per_token", "shuffled-z NLL rise / token", NATS_PER_TOKEN, "higher", margin=0.05),
    Metric("shuffled_z_nll_rise_per_example", "shuffled-z NLL rise / example", NATS_PER_EXAMPLE, "higher"),
    Metric("codes_used", "codes used", "codes", "higher"),
    Metric("code_perplexity", "code perplexity", "codes", "higher"),
    Metric("active_units", "active units", "units", "higher"),
    # strategy separation: the posterior's own, then the argmax / E_q[z] readings and the probe
    Metric("strategy_information", "strategy information I(z;s)/H(s)", "share of H(s)", "higher", margin=0.05, bounds=UNIT_INTERVAL),
    Metric("nmi", "NMI (argmax codes vs strategy)", SHARE, "higher", margin=0.05, bounds=UNIT_INTERVAL),
    Metric("ami", "AMI (argmax codes vs strategy)", SHARE, "higher", margin=0.05, bounds=AGREEMENT),
    Metric("ari", "ARI (argmax codes vs strategy)", SHARE, "higher", margin=0.05, bounds=AGREEMENT),
    Metric("probe_accuracy", "linear probe accuracy", SHARE, "higher", margin=0.05, bounds=UNIT_INTERVAL),
    # samples per code
    Metric("parse_rate", "parse rate", SHARE, "higher", margin=0.05, bounds=UNIT_INTERVAL),
    Metric("answer_accuracy", "answer accuracy", SHARE, "higher", margin=0.05, bounds=UNIT_INTERVAL),
    Metric("strategy_consistency", "strategy consistency", SHARE, "higher"),
    # reconstruction and the objective
    Metric("recon_nll_per_token", "reconstruction NLL / token", NATS_PER_TOKEN, "lower", margin=0.05, bounds=NON_NEGATIVE),
    Metric("recon_nll_per_example", "reconstruction NLL / example", NATS_PER_EXAMPLE, "lower"),
    Metric("loss", "training objective", "objective units", "lower"),
    Metric("reconstruction_objective", "reconstruction term", "objective units", "lower"),
    Metric("reconstruction_to_kl", "reconstruction term / beta KL", "ratio", "neither"),
    # training diagnostics of the batches: token counts n_i and the extremes of A_a(b_i), kappa_i^a, eta_i^a
    Metric("tokens_mean", "supervised tokens per example, mean", "tokens", "neither", over_batches="mean"),
    Metric("tokens_min", "supervised tokens per example, fewest", "tokens", "neither", over_batches="min"),
    Metric("tokens_max", "supervised tokens per example, most", "tokens", "neither", over_batches="max"),
    Metric("base_aggregate_min", "smallest A_a(b_i)", NATS, "neither", over_batches="min"),
    Metric("kappa_min", "smallest kappa_i^a", "ratio", "neither", over_batches="min"),
    Metric("kappa_max", "largest kappa_i^a", "ratio", "neither", over_batches="max"),
    Metric("eta_min", "smallest eta_i^a", "ratio", "neither", over_batches="min"),
    Metric("eta_max", "largest eta_i^a", "ratio", "neither", over_batches="max"),
)
METRICS = {metric.name: metric for metric in REGISTRY}

# what reads which metrics, in the order it shows them
VIEWS = {
    # the runs and aggregate tables' headline columns: aggregated over seeds, compared across modes
    "headline": (
        "took_up",
        "onset_step",
        "strategy_information",
        "nmi",
        "ami",
        "ari",
        "probe_accuracy",
        "mutual_information",
        "kl",
        "shuffled_z_nll_rise_per_token",
        "parse_rate",
        "answer_accuracy",
        "strategy_consistency",
        "recon_nll_per_token",
        "converged",
    ),
    # mean_vs_sum: paired by seed among all pairs and among the pairs that took up (the verdict's magnitude line)
    "paired_contrasts": ("mutual_information", "strategy_information", "recon_nll_per_token"),
    # mean_vs_sum: the argmax, probe, KL and sample readings, among all pairs only, adjusted together per contrast.
    # reconstruction_to_kl is left out: with KL near 0 its differences are of order 1e5 and mean nothing
    "secondary_contrasts": (
        "nmi",
        "ami",
        "ari",
        "probe_accuracy",
        "kl",
        "shuffled_z_nll_rise_per_token",
        "parse_rate",
        "answer_accuracy",
    ),
    # the curves table: what it keeps of each validation row (the reconstruction family's other terms stay in
    # metrics.jsonl)
    "curves": (
        "loss",
        "reconstruction_objective",
        "reconstruction_to_kl",
        "kl",
        "mutual_information",
        "mutual_information_se",
        "codes_used",
        "code_perplexity",
        "active_units",
        "shuffled_z_nll_rise_per_token",
        "shuffled_z_nll_rise_per_example",
        "strategy_information",
        "nmi",
        "ami",
        "recon_nll_per_token",
        "recon_nll_per_example",
    ),
    # the plots: curves.png, one panel per metric; takeup.png, a strip of seeds per metric beside the take-up curves;
    # separation.png and latent_usage.png, a panel per metric; mean_vs_sum.png, one panel of contrasts per metric
    "curve_panels": ("mutual_information", "strategy_information", "nmi", "shuffled_z_nll_rise_per_token", "recon_nll_per_token"),
    "takeup_strips": ("mutual_information", "strategy_information"),
    "separation_panels": ("strategy_information", "nmi", "probe_accuracy"),
    "latent_usage_panels": ("mutual_information", "kl", "shuffled_z_nll_rise_per_token"),
    "contrast_panels": ("took_up", "mutual_information", "strategy_information"),
    # metadata.json's train_diagnostics and the runs table's train_/val_ columns
    "train_diagnostics": (
        "tokens_mean",
        "tokens_min",
        "tokens_max",
        "base_aggregate_min",
        "kappa_min",
        "kappa_max",
        "eta_min",
        "eta_max",
    ),
    # the objective's per-batch extremes of the reconstruction family's inputs, logged beside the token counts
    "batch_extremes": ("base_aggregate_min", "kappa_min", "kappa_max", "eta_min", "eta_max"),
    # the collapse before take-up (analysis/records/curves.py): the takeup table's smallest floor and count of rounding events
    "collapse": ("floor_mutual_information", "rounding_takeup"),
    # where runs ended at their confirmed take-up (stop_at_take_up): the verdict's magnitude and separation go unread
    "ended_early": ("ended_at_take_up",),
    # the verdict's endpoints, in its order: take-up, onset, magnitude, separation (analysis/report/verdict.py)
    "verdict": ("took_up", "onset_step", "mutual_information", "strategy_information"),
}


def view(name: str) -> tuple[str, ...]:
    return VIEWS[name]


def uses(name: str) -> tuple[str, ...]:
    """The views that read a metric."""
    return tuple(view_name for view_name, names in VIEWS.items() if name in names)


def margins() -> dict[str, float]:
    return {metric.name: metric.margin for metric in REGISTRY if metric.margin is not None}


def bounds() -> dict[str, tuple[float, float]]:
    return {metric.name: metric.bounds for metric in REGISTRY if metric.bounds is not None}


def standard_errors() -> dict[str, str]:
    """{Monte Carlo estimate: the metric holding its standard error}."""
    return {metric.name: metric.standard_error for metric in REGISTRY if metric.standard_error is not None}
