"""Learning curves of a run (its validation rows in metrics.jsonl) and the convergence flag read from them.

A run is `converged` when, over the last quarter of training, both
  - the validation reconstruction NLL per token moved by less than RECON_TOLERANCE of its final value, and
  - I(x;z) moved by less than MI_TOLERANCE of max(|final I(x;z)|, MI_FLOOR).
The change is taken between the last evaluation at or before 3/4 of the steps and the final one.

Why these values: 5% is half the seed-to-seed spread of one arm's final reconstruction (coefficient of
variation 0.5-27%, median 11%, over the default pilot's four arms), so a run still drifting by less than
that cannot move a seed-paired contrast by more than its seeds already do; a decoder still learning its
tasks moves 10-75% per quarter (config/cold_start.yaml).
The I(x;z) floor keeps a latent that stays unused (I(x;z) ~ 1e-4 nats, wobbling by 1e-4) from reading as
unconverged; 0.05 nats is 7% of the information in a fair coin, below any separation worth reporting, and
10% of it is a drift too small to turn a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

RECON_TOLERANCE = 0.05
MI_TOLERANCE = 0.10
MI_FLOOR = 0.05  # nats
LAST_SHARE = 0.25
# the learning-curve metrics of a validation row that the plots and the convergence flag read
RECON_CURVE, MI_CURVE = "recon_nll_per_token", "mutual_information"
# what the curves table keeps of each validation row: the objective, latent usage, separation, reconstruction
# on one scale for both modes. The reconstruction family's other terms stay in metrics.jsonl.
CURVE_METRICS = (
    "loss",
    "reconstruction_objective",
    "reconstruction_to_kl",
    "kl",
    MI_CURVE,
    "codes_used",
    "code_perplexity",
    "active_units",
    "shuffled_z_nll_rise_per_token",
    "shuffled_z_nll_rise_per_example",
    "nmi",
    "ami",
    RECON_CURVE,
    "recon_nll_per_example",
)


# per-run diagnostics of the training batches: counts and extremes over every step's batch
TRAIN_DIAGNOSTICS = {"tokens_mean": "mean", "tokens_min": "min", "tokens_max": "max", "base_aggregate_min": "min"} | {
    f"{factor}_{end}": end for factor in ("kappa", "eta") for end in ("min", "max")
}
REDUCERS = {"mean": lambda values: sum(values) / len(values), "min": min, "max": max}


def train_diagnostics(train_rows: Sequence[dict]) -> dict[str, float]:
    """TRAIN_DIAGNOSTICS over a run's train rows: the mean batch token count, the extremes over all batches."""
    return {
        name: float(REDUCERS[reduce]([row[name] for row in train_rows]))
        for name, reduce in TRAIN_DIAGNOSTICS.items()
        if train_rows and name in train_rows[0]
    }


def last_quarter_change(steps: Sequence[int], values: Sequence[float], floor: float = 0.0) -> float:
    """|v(T) - v(t0)| / max(|v(T)|, floor), t0 the last evaluation at or before (1 - LAST_SHARE) T; nan if none is."""
    if not steps:
        return math.nan
    final_step = steps[-1]
    earlier = [i for i, step in enumerate(steps) if step <= (1 - LAST_SHARE) * final_step]
    if not earlier:
        return math.nan
    start, final = values[earlier[-1]], values[-1]
    scale = max(abs(final), floor)
    return abs(final - start) / scale if scale > 0 else 0.0


def convergence(validation_rows: Sequence[dict]) -> dict[str, float]:
    """recon_rel_change, mi_change (as defined in the module docstring) and converged (1.0 / 0.0).

    A run with too few evaluations to span its last quarter has nan changes and is not converged.
    """
    steps = [row["step"] for row in validation_rows]
    recon = last_quarter_change(steps, [row[RECON_CURVE] for row in validation_rows])
    mi = last_quarter_change(steps, [row[MI_CURVE] for row in validation_rows], floor=MI_FLOOR)
    converged = recon < RECON_TOLERANCE and mi < MI_TOLERANCE  # nan compares False
    return {"recon_rel_change": recon, "mi_change": mi, "converged": float(converged)}
