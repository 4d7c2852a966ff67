"""Learning curves of a run (its validation rows in metrics.jsonl): the take-up event and the convergence flag.

Take-up. Per seed, the latent's use is a phase transition: validation I(x;z) sits at 0, then jumps within a few
hundred steps, or never does within the budget. So a run's primary outcome is an event:
  - took_up         final I(x;z) >= TAKEUP_THRESHOLD;
  - onset_step      the first validation step with I(x;z) >= TAKEUP_THRESHOLD, or the last step when there is none;
  - onset_observed  1 when that step was reached, 0 when the run is right-censored at its budget.
A run that never took up the latent has not converged to "no use": it is censored, it waited until its budget.
The collapse is measured too:
  - floor_mutual_information  the smallest validation I(x;z) before the onset (over the whole run when there is none;
                              nan when the onset is the first evaluation);
  - rounding_takeup           1 for a run that took up from a floor below ROUNDING_FLOOR: a posterior uniform to float
                              precision, where nothing in the objective tells the codes apart, so only rounding broke
                              their symmetry (exact I(x;z) only: a Monte Carlo estimate has no such floor).
Why 0.1 nats: an unused latent sits at 1e-4 to 5e-3 nats, and the default pilot's runs that jump land between
0.38 and 1.07 nats (ln 3 = 1.10 is the most 3 codes can carry), passing 0.1 within one or two evaluations; 0.1 is
9% of ln 3 and twice the smallest I(x;z) difference of interest (0.05 nats).

Convergence keeps its meaning where it has one. A run is `converged` when, over the last quarter of training,
  - the validation reconstruction NLL per token moved by less than RECON_TOLERANCE of its final value, and,
    for a run whose onset was observed,
  - I(x;z) after its onset moved by less than MI_TOLERANCE of max(|final I(x;z)|, MI_FLOOR).
The change is taken between the last evaluation at or before 3/4 of the steps (and not before the onset, for
I(x;z)) and the final one. For a censored run only the reconstruction part applies (mi_change is nan): whether
its I(x;z) would have stayed at 0 is what censoring leaves open.

Why these values: 5% is half the seed-to-seed spread of one arm's final reconstruction (coefficient of
variation 0.5-27%, median 11%, over the default pilot's four arms), so a run still drifting by less than
that cannot move a seed-paired contrast by more than its seeds already do; a decoder still learning its
tasks moves 10-75% per quarter (config/cold_start.yaml). 10% of max(I(x;z), 0.05 nats) is a drift too small
to turn a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from experiments.synthetic_sequences.arms import TAKEUP_THRESHOLD

# nats: a discrete posterior uniform to float32 precision reads 1e-7 (float32's epsilon is 1.2e-7); an unused latent
# that still tells codes apart sits at 1e-4 to 5e-3
ROUNDING_FLOOR = 1e-6
RECON_TOLERANCE = 0.05
MI_TOLERANCE = 0.10
MI_FLOOR = 0.05  # nats
LAST_SHARE = 0.25
# the learning-curve metrics of a validation row that the plots and the convergence flag read
RECON_CURVE, MI_CURVE = "recon_nll_per_token", "mutual_information"


def last_quarter_change(steps: Sequence[int], values: Sequence[float], floor: float = 0.0, from_first: bool = False) -> float:
    """|v(T) - v(t0)| / max(|v(T)|, floor), t0 the last evaluation at or before (1 - LAST_SHARE) T; nan if none is.
    from_first: t0 is the first of `steps` when it comes later than that (the onset, for I(x;z) after it)."""
    if not steps:
        return math.nan
    final_step = steps[-1]
    earlier = [i for i, step in enumerate(steps) if step <= (1 - LAST_SHARE) * final_step]
    if not earlier and from_first and len(steps) > 1:
        earlier = [0]
    if not earlier:
        return math.nan
    start, final = values[earlier[-1]], values[-1]
    scale = max(abs(final), floor)
    return abs(final - start) / scale if scale > 0 else 0.0


def takeup(validation_rows: Sequence[dict]) -> dict[str, float]:
    """took_up, onset_step, onset_observed and the collapse's floor of a run (module docstring), and its budget: the last
    validation step. A run without validation rows, or with a non-finite I(x;z) on its curve, has no take-up event to
    read: refused, naming the step, rather than counted as one that never took up."""
    if not validation_rows:
        raise ValueError("the run has no validation rows: no take-up event can be read")
    if bad := [row["step"] for row in validation_rows if not math.isfinite(row[MI_CURVE])]:
        raise ValueError(f"{MI_CURVE} is not finite at validation step {bad[0]}: no take-up event can be read")
    onset = next((row["step"] for row in validation_rows if row[MI_CURVE] >= TAKEUP_THRESHOLD), None)
    took_up = validation_rows[-1][MI_CURVE] >= TAKEUP_THRESHOLD
    before = [row[MI_CURVE] for row in validation_rows if onset is None or row["step"] < onset]
    floor = min(before) if before else math.nan
    # a Monte Carlo I(x;z) (the continuous family's) sits at its estimate's noise, never at float precision
    exact = all(row.get(MI_CURVE + "_se", 0.0) == 0.0 for row in validation_rows)
    return {
        "budget_step": float(validation_rows[-1]["step"]),
        "took_up": float(took_up),
        "onset_step": float(validation_rows[-1]["step"] if onset is None else onset),
        "onset_observed": float(onset is not None),
        "floor_mutual_information": float(floor),
        "rounding_takeup": float(took_up and exact and floor < ROUNDING_FLOOR),  # nan compares False
    }


def convergence(validation_rows: Sequence[dict]) -> dict[str, float]:
    """The take-up event, recon_rel_change, mi_change (after the onset; nan for a censored run) and converged (1.0 / 0.0).

    A run with too few evaluations to span its last quarter (or, for I(x;z), to follow its onset) is not converged.
    """
    event = takeup(validation_rows)
    steps = [row["step"] for row in validation_rows]
    recon = last_quarter_change(steps, [row[RECON_CURVE] for row in validation_rows])
    if event["onset_observed"]:
        after = [row for row in validation_rows if row["step"] >= event["onset_step"]]
        mi = last_quarter_change([row["step"] for row in after], [row[MI_CURVE] for row in after], floor=MI_FLOOR, from_first=True)
        converged = recon < RECON_TOLERANCE and mi < MI_TOLERANCE  # nan compares False
    else:
        mi = math.nan
        converged = recon < RECON_TOLERANCE
    return {**event, "recon_rel_change": recon, "mi_change": mi, "converged": float(converged)}
