"""A sequential design: the looks at which the planned take-up contrasts are read, and the alpha each look spends.

Config shape (config/sequential.yaml; validated by the schema first, then by parse_design):

    design:
      kind: sequential                 # fixed (the default): one reading of every run, at the end
      looks:                           # what every still-open arm has by each look, in order
        - {references: 5, seeds: 2}
        - {references: 5, seeds: 4}
      alpha_spending: obrien-fleming   # or pocock
      max_runs_per_arm: 20

Look k reads n_k = references_k x seeds_k runs per open arm, the information fraction t_k = n_k / max_runs_per_arm.
By then the design has spent alpha(t_k) of its alpha, with alpha(.) a Lan-DeMets spending function; the last look
spends what is left, so the looks' increments alpha(t_k) - alpha(t_k-1) add up to alpha. Each look tests at its own
increment, so by the union bound the chance of any false decision over every look is at most their sum, whatever the
dependence between looks: no joint distribution of exact, discrete tests is needed. Torch- and pandas-free (the
Snakefile parses it).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from statistics import NormalDist

from core.disentanglement.artifacts import sha256_json

SPENDING_FUNCTIONS = ("obrien-fleming", "pocock")
KINDS = ("fixed", "sequential")
# what a look decides of a planned contrast, beside "raises" and "lowers" (sequential/decisions.py)
OPEN, UNDECIDED, EQUIVALENT = "continue", "undecided", "equivalent"


def obrien_fleming_spent(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)): almost nothing early."""
    if t <= 0:
        return 0.0
    normal = NormalDist()
    return min(alpha, 2 * (1 - normal.cdf(normal.inv_cdf(1 - alpha / 2) / math.sqrt(t))))


def pocock_spent(t: float, alpha: float) -> float:
    """Lan-DeMets Pocock-type alpha(t) = alpha ln(1 + (e - 1) t): nearly even increments."""
    return min(alpha, alpha * math.log(1 + (math.e - 1) * max(t, 0.0)))


SPENT = {"obrien-fleming": obrien_fleming_spent, "pocock": pocock_spent}


class DesignError(ValueError):
    """A design that cannot run: one line naming the field."""


@dataclass(frozen=True)
class Look:
    number: int  # 1-based
    references: int
    seeds: int

    @property
    def runs_per_arm(self) -> int:
        return self.references * self.seeds


@dataclass(frozen=True)
class Design:
    looks: tuple[Look, ...]
    alpha_spending: str
    max_runs_per_arm: int

    def spent(self, look: int, alpha: float) -> float:
        """Cumulative alpha spent by look `look` (1-based): alpha itself at the last look."""
        if look >= len(self.looks):
            return alpha
        return SPENT[self.alpha_spending](self.looks[look - 1].runs_per_arm / self.max_runs_per_arm, alpha)

    def increment(self, look: int, alpha: float) -> float:
        """The alpha look `look` tests at: alpha(t_k) - alpha(t_k-1)."""
        return self.spent(look, alpha) - (self.spent(look - 1, alpha) if look > 1 else 0.0)


def parse_design(block: Mapping | None) -> Design | None:
    """The design of a config's `design` block; None for the fixed design. Raises DesignError naming the field."""
    if not block or block.get("kind", "fixed") == "fixed":
        if block and set(block) - {"kind"}:
            raise DesignError(f"design: {', '.join(sorted(set(block) - {'kind'}))} are read only with kind: sequential")
        return None
    if block["kind"] not in KINDS:
        raise DesignError(f"design.kind: {block['kind']!r} is not one of {', '.join(KINDS)}")
    spending = block.get("alpha_spending", "obrien-fleming")
    if spending not in SPENT:
        raise DesignError(f"design.alpha_spending: {spending!r} is not one of {', '.join(SPENDING_FUNCTIONS)}")
    looks = tuple(Look(k, int(look["references"]), int(look["seeds"])) for k, look in enumerate(block.get("looks") or [], start=1))
    if len(looks) < 2:
        raise DesignError(f"design.looks: a sequential design needs at least 2 looks, got {len(looks)}")
    maximum = block.get("max_runs_per_arm")
    if not isinstance(maximum, int) or maximum < 1:
        raise DesignError(f"design.max_runs_per_arm: {maximum!r} must be a whole number >= 1")
    if len(looks) > maximum:
        raise DesignError(
            f"design.looks: {len(looks)} looks, but max_runs_per_arm {maximum} allows at most {maximum} (each look adds a run per arm)"
        )
    for before, look in itertools.pairwise(looks):
        if look.references < before.references or look.seeds < before.seeds or look.runs_per_arm <= before.runs_per_arm:
            raise DesignError(
                f"design.looks[{look.number - 1}]: {look.references} references x {look.seeds} seeds does not grow from look "
                f"{before.number}'s {before.references} x {before.seeds}; each look keeps every earlier run and adds some"
            )
    if looks[-1].runs_per_arm > maximum:
        raise DesignError(f"design.looks[{len(looks) - 1}]: {looks[-1].runs_per_arm} runs per arm is more than max_runs_per_arm {maximum}")
    return Design(looks, spending, maximum)


COUNTS = ("references", "seeds")
LOOK_ENTRY = {"type": "object", "required": list(COUNTS), "properties": dict.fromkeys(COUNTS, {"type": "integer"})}
DESIGN_SCHEMA = {  # design_record's fields
    "type": "object",
    "required": ["looks", "alpha_spending", "max_runs_per_arm"],
    "properties": {
        "looks": {"type": "array", "minItems": 1, "items": LOOK_ENTRY},
        "alpha_spending": {"type": "string"},
        "max_runs_per_arm": {"type": "integer"},
    },
}


def design_record(design: Design) -> dict:
    """A design as a look file records it: JSON's types (lists, not tuples)."""
    return json.loads(json.dumps(asdict(design)))


def design_from_record(record: Mapping) -> Design:
    """The design a look file records (design_record's inverse)."""
    return Design(tuple(Look(**look) for look in record["looks"]), record["alpha_spending"], record["max_runs_per_arm"])


def design_digest(record: Mapping) -> str:
    return sha256_json(record)[:16]


def describe_design(record: Mapping) -> str:
    looks = ", ".join(f"{look['references']}x{look['seeds']}" for look in record["looks"])
    return (
        f"{record['alpha_spending']} spending, looks {looks}, at most {record['max_runs_per_arm']} runs per arm ({design_digest(record)})"
    )
