"""A sequential curve design: which betas each stage trains per (family, term) and mode, and when a curve stops.

Config shape (config/curve_design.yaml; validated by the schema first, then by parse_curve_design):

    design: {kind: curve, first_blocks: 4, stage_blocks: 8, budget: 160}   # precision 1.3, c-optimal, obrien-fleming

Stage 1 trains a coarse grid over each curve's span (its config betas: every third beta of the fixed set between
their ends, four per decade) on the first `first_blocks` blocks of `references`. Each later stage adds the next
`stage_blocks` blocks, each drawing its own data where data.per_block is set, and trains every open curve's two modes
at two betas each, placed by the population fit of every run so far (statistics/population_curves.py):
  c-optimal  the fixed betas either side of the mode's fitted ED50. log k is the distance between the modes' ED50s
             on log beta, so a run at a mode's ED50 tells the most about it: a two-point design at ED18 and ED82 (the
             D-optimal one of a logistic curve) gives an ED50 1.7 times the variance of one at the ED50 itself. Stage
             1's coarse grid keeps reading the slope the distance is divided by. Simulated, it reaches a given width
             of k's interval in fewer runs than d-optimal (bench/curve_design.py).
  d-optimal  the fixed betas nearest the mode's ED18 and ED82: the slope too, for the parallelism test.
A cliff steeper than a step of the set gets the betas either side of its ED50 under either rule.

Betas come from a fixed set, the E12 series (12 per decade: 1.0, 1.2, ..., 8.2 times a power of ten), so a run's key
is stable whatever the fit said, a rerun plans the same runs, and every run is bound to its look.

A curve stops at the first look where, in this order, its parallelism p falls under the look's alpha (beyond scale);
k's interval at the look's level lies within a factor of `precision` either way of k (precise); its reading is no
shift or a shift (statistics/beta_curves.reading, at the look's level; unless stop_at_reading is false); or the next
stage would take it over its run budget (budget). Look j tests and sets its intervals at alpha_j = alpha(t_j) -
alpha(t_j-1), t_j its runs over the budget, alpha(.) a Lan-DeMets spending function (sequential/design.py), the last
look spending what is left. By the union bound the chance that any look's interval misses k, or any look's test
rejects a true shift, is at most the sum of the increments, alpha: whatever look a curve stops at, its interval
covers k with at least 1 - alpha, and each reading keeps its 5%. Torch- and pandas-free, as the plan reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from experiments.synthetic_sequences.sequential.design import SPENT, DesignError, describe_design, design_digest, design_record

E12 = (1.0, 1.2, 1.5, 1.8, 2.2, 2.7, 3.3, 3.9, 4.7, 5.6, 6.8, 8.2)
COARSE_STEP = 3  # stage 1 trains every third beta of the fixed set: 4 per decade, a factor of about 1.8 apart
ED_LOW = 1 / (1 + math.exp(1.5434))  # 0.176: the D-optimal pair of a logistic curve sits at logit -+1.5434
STOPS = ("beyond scale", "precise", "no shift", "a shift", "budget")
PLACEMENTS = ("c-optimal", "d-optimal")
CURVE = "curve"  # design.kind
LOG_DOSE_LIMIT = 50.0  # a fitted dose's log beta is held inside this: a beta of 1e-22 or 5e21 is off any span already


def fixed_betas(low: float, high: float) -> list[float]:
    """The fixed set's betas from the one nearest `low` to the one nearest `high` (log scale), ascending."""
    first, last = fixed_index(low), fixed_index(high)
    return [fixed_beta(index) for index in range(first, last + 1)]


def fixed_index(beta: float) -> int:
    """The index of the fixed set's beta nearest `beta` on the log scale (index 12 d + i is E12[i] x 10^d)."""
    decade = math.floor(math.log10(beta))
    candidates = [12 * (decade + shift) + i for shift in (-1, 0, 1) for i in range(12)]
    return min(candidates, key=lambda index: abs(math.log(fixed_beta(index) / beta)))


def fixed_beta(index: int) -> float:
    """The fixed set's beta at `index`, as a key spells it (float('3.3e-2') is 0.033 exactly as written)."""
    decade, position = divmod(index, 12)
    return float(f"{E12[position]}e{decade}")


def coarse_betas(span: Sequence[float]) -> list[float]:
    """Stage 1's betas of a curve whose config spans `span`: every COARSE_STEP-th fixed beta from its lowest, the
    highest included."""
    first, last = fixed_index(min(span)), fixed_index(max(span))
    indices = list(range(first, last + 1, COARSE_STEP))
    if indices[-1] != last:
        indices.append(last)
    return [fixed_beta(index) for index in indices]


def effective_dose(intercept: float, slope: float, mode_effect: float, is_sum: int, share: float) -> float:
    """The beta at which the typical block of a mode takes up `share` of the time: logit(share) = a + b log beta + c s;
    with a slope near 0 it lies beyond any float, and is held at exp(+-LOG_DOSE_LIMIT) (placement holds it nearer)."""
    log_dose = (math.log(share / (1 - share)) - intercept - mode_effect * is_sum) / slope
    return math.exp(min(max(log_dose, -LOG_DOSE_LIMIT), LOG_DOSE_LIMIT))


def informative_betas(
    intercept: float, slope: float, mode_effect: float, is_sum: int, span: Sequence[float], placement: str = "c-optimal"
) -> list[float]:
    """Two fixed betas where a mode's fitted curve informs most (module docstring): under "d-optimal" the ones nearest
    its ED18 and ED82, under "c-optimal" the ones either side of its ED50; each held inside the fixed betas of `span`
    widened by a factor of 10 either way (a curve the fit puts far off is sought there, not beyond). Where ED18 and ED82
    round to one beta, the cliff is steeper than a step of the set: the betas either side of its ED50. A fit with no
    slope (take-up alike at every beta) looks beyond the span, one and two coarse steps: under it where the mode takes
    up less than half the time (a smaller beta takes up more), over it where more."""
    lowest, highest = fixed_index(min(span) / 10), fixed_index(max(span) * 10)

    def held(index: int) -> int:
        return min(max(index, lowest), highest)

    if abs(slope) < 1e-8:  # take-up alike at every beta: a smaller beta raises it, a larger one lowers it
        below = intercept + mode_effect * is_sum < 0
        edge = fixed_index(min(span)) if below else fixed_index(max(span))
        steps = (-2, -1) if below else (1, 2)
        return [fixed_beta(held(edge + step * COARSE_STEP)) for step in steps]

    def dose(share: float) -> float:
        return effective_dose(intercept, slope, mode_effect, is_sum, share)

    indices = sorted({held(fixed_index(dose(ED_LOW))), held(fixed_index(dose(1 - ED_LOW)))})
    if placement == "c-optimal" or len(indices) == 1:
        middle = dose(0.5)
        nearest = fixed_index(middle)
        below = min(max(nearest - (fixed_beta(nearest) > middle), lowest), highest - 1)
        indices = [below, below + 1]
    return [fixed_beta(index) for index in indices]


@dataclass(frozen=True)
class CurveDesign:
    """A sequential curve design's settings: the new blocks of stage 1 and of each later stage, seeds per block at each
    beta and mode, the run budget of a (family, term), the interval's precision that stops it, and the spending function
    of its alpha."""

    first_blocks: int
    stage_blocks: int
    seeds: int
    budget: int
    precision: float = 1.3
    alpha_spending: str = "obrien-fleming"
    stop_at_reading: bool = True
    placement: str = "c-optimal"

    def first_runs(self, span: Sequence[float]) -> int:
        """Stage 1's runs of a curve: both modes at its coarse betas on each first block's seeds."""
        return 2 * len(coarse_betas(span)) * self.first_blocks * self.seeds

    def stage_runs(self) -> int:
        """A later stage's runs of a curve: both modes at their two informative betas on each new block's seeds."""
        return 2 * 2 * self.stage_blocks * self.seeds

    def increment(self, runs: int, before: int, alpha: float, last: bool) -> float:
        """The alpha a look at `runs` runs of a curve tests at (`before`: its runs at the look before; `last`: no stage
        follows, so the look spends what is left)."""
        spend = SPENT[self.alpha_spending]
        spent = alpha if last else spend(min(runs / self.budget, 1.0), alpha)
        return spent - (spend(before / self.budget, alpha) if before else 0.0)


def stop_reason(
    design: CurveDesign, log_k: float, log_low: float, log_high: float, parallel_p: float, alpha: float, room: bool
) -> str | None:
    """Why a curve stops at a look (module docstring; the interval at the look's level, `alpha` its increment), or
    None while it goes on; `room`: whether its budget holds another stage. A design that does not stop at a reading
    (stop_at_reading false) goes on to its precision or its budget."""
    from experiments.synthetic_sequences.analysis.statistics.beta_curves import reading

    said = reading(log_low, log_high, parallel_p, alpha)
    if said == "beyond scale":
        return said
    if math.isfinite(log_k) and max(log_high - log_k, log_k - log_low) <= math.log(design.precision):
        return "precise"
    if design.stop_at_reading and said in ("no shift", "a shift"):
        return said
    return None if room else "budget"


def parse_curve_design(block: Mapping, seeds: int) -> CurveDesign:
    """The curve design of a config's `design` block (kind curve), its runs `seeds` seeds per block at each beta and
    mode (the config's `seeds`). Raises DesignError naming the field; the schema has checked the types."""
    from experiments.synthetic_sequences.sequential.design import SPENDING_FUNCTIONS

    if missing := [key for key in ("first_blocks", "stage_blocks", "budget") if key not in block]:
        raise DesignError(f"design.{missing[0]}: a curve design needs first_blocks, stage_blocks and budget")
    if unknown := sorted(set(block) - CURVE_KEYS):
        raise DesignError(f"design.{unknown[0]}: not a curve design's key; its keys: {', '.join(sorted(CURVE_KEYS))}")
    spending, placement = block.get("alpha_spending", "obrien-fleming"), block.get("placement", "c-optimal")
    if spending not in SPENT:
        raise DesignError(f"design.alpha_spending: {spending!r} is not one of {', '.join(SPENDING_FUNCTIONS)}")
    if placement not in PLACEMENTS:
        raise DesignError(f"design.placement: {placement!r} is not one of {', '.join(PLACEMENTS)}")
    if not math.isfinite(precision := float(block.get("precision", 1.3))) or precision <= 1:
        raise DesignError(f"design.precision: {precision!r} is not a factor a curve's interval can lie within; a finite number over 1")
    design = CurveDesign(
        int(block["first_blocks"]),
        int(block["stage_blocks"]),
        seeds,
        int(block["budget"]),
        precision,
        spending,
        bool(block.get("stop_at_reading", True)),
        placement,
    )
    return design


CURVE_KEYS = {"kind", "first_blocks", "stage_blocks", "budget", "precision", "alpha_spending", "stop_at_reading", "placement"}


def stages(design: CurveDesign, span: Sequence[float]) -> int:
    """The most stages a curve over `span` can take: stage 1, then as many later stages as its budget holds."""
    return 1 + max(0, (design.budget - design.first_runs(span)) // design.stage_runs())


def stage_blocks(design: CurveDesign, references: Sequence[int], stage: int) -> list[int]:
    """The new blocks of stage `stage` (from 1): the first first_blocks of `references`, then stage_blocks each."""
    start = 0 if stage == 1 else design.first_blocks + (stage - 2) * design.stage_blocks
    return list(references[start : design.first_blocks if stage == 1 else start + design.stage_blocks])


CURVE_RECORD_SCHEMA = {  # curve_record's fields
    "type": "object",
    "required": ["kind", *CurveDesign.__dataclass_fields__],
    "properties": {
        "kind": {"const": CURVE},
        **dict.fromkeys(("first_blocks", "stage_blocks", "seeds", "budget"), {"type": "integer"}),
        "precision": {"type": "number"},
        **dict.fromkeys(("alpha_spending", "placement"), {"type": "string"}),
        "stop_at_reading": {"type": "boolean"},
    },
}


def curve_record(design: CurveDesign) -> dict:
    """A curve design as a look file records it."""
    return {"kind": CURVE, **asdict(design)}


def record_of(design) -> dict:
    """A design as its look files record it: a curve design's, or a contrast design's (sequential/design.py)."""
    return curve_record(design) if isinstance(design, CurveDesign) else design_record(design)


def describe_record(record: Mapping) -> str:
    """A recorded design in words, either kind (the design record's refusal, the verdict's earlier designs)."""
    if record.get("kind") != CURVE:
        return describe_design(record)
    return (
        f"a curve design of at most {record['budget']} runs per curve, {record['first_blocks']} block(s) in stage 1 and "
        f"{record['stage_blocks']} in each stage after at {record['seeds']} seed(s), precision {record['precision']:g}, "
        f"{record['placement']} placement, {record['alpha_spending']} spending"
        f"{'' if record['stop_at_reading'] else ', not stopping at a reading'} ({design_digest(record)})"
    )


def curve_design_from_record(record: Mapping) -> CurveDesign:
    """The curve design a look file records (curve_record's inverse). Raises DesignError for a record of another shape."""
    try:
        return CurveDesign(**{name: value for name, value in record.items() if name != "kind"})
    except TypeError as err:
        raise DesignError(f"not a curve design's record: {err}") from err


def curve_design_of(config: Mapping) -> CurveDesign | None:
    """The config's curve design, its seeds per block the config's `seeds`; None under any other design."""
    from experiments.synthetic_sequences.planning.grid import resolve_seeds

    block = config.get("design") or {}
    if block.get("kind") != CURVE:
        return None
    return parse_curve_design(block, len(resolve_seeds(config.get("seeds"), "seeds")))
