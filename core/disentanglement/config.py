"""Reconstruction-loss settings and their validation.

`reconstruction_loss_token_aggregation_mode` selects A_mean or A_sum (spec,
"Aggregation contract"). Only the reconstruction family reads it; every
auxiliary term ignores it. `mean` is the default, `sum` is the ablation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from core.disentanglement.checks import check_field_types, is_number
from core.disentanglement.cli import setting
from core.disentanglement.registry import HYBRID, TERMS


class AggregationMode(StrEnum):
    MEAN = "mean"
    SUM = "sum"


AGGREGATION_MODES: tuple[str, ...] = tuple(m.value for m in AggregationMode)
DEFAULT_AGGREGATION_MODE = AggregationMode.MEAN

RECONSTRUCTION_TERMS: tuple[str, ...] = tuple(TERMS)
OPTIMISABLE_TERMS: tuple[str, ...] = (*RECONSTRUCTION_TERMS, HYBRID)
TOKEN_WEIGHTED_TERMS: frozenset[str] = frozenset(name for name, term in TERMS.items() if term.takes_alpha)
# Terms divided by a reference scale (c_base^a, or A_a(b_i) + epsilon for ex) are O(1) in both modes; raw and tok
# are in the mode's own units, about mean n_i times larger under sum. A hybrid that mixes the two kinds weights its
# parts differently in mean and in sum: the caveat of --hybrid-coefficients and docs/methods.md.
NORMALISED_TERMS: frozenset[str] = frozenset(name for name, term in TERMS.items() if term.normalised)


def parse_aggregation_mode(value: object, field_name: str = "reconstruction_loss_token_aggregation_mode") -> AggregationMode:
    """Return the AggregationMode for `value`, or raise ValueError naming the field and the allowed values.

    Matching is exact: `Sum` or ` sum` are rejected rather than guessed at, since a
    silently coerced mode would put a run on the wrong reference scale.
    """
    if isinstance(value, AggregationMode):
        return value
    if isinstance(value, str) and value in AGGREGATION_MODES:
        return AggregationMode(value)
    raise ValueError(f"{field_name}: {value!r} is not allowed; allowed values: {', '.join(AGGREGATION_MODES)}")


def check_aggregation_mode(value: object, field_name: str = "mode") -> AggregationMode:
    """`value` itself, an AggregationMode: below the edges (the config, a command line, a path read back) the mode is the
    enum, parsed once there by parse_aggregation_mode, so a bare string here is a caller that skipped it."""
    if isinstance(value, AggregationMode):
        return value
    raise TypeError(
        f"{field_name}: {value!r} is a {type(value).__name__}, not an AggregationMode ({', '.join(AGGREGATION_MODES)}); "
        "parse it where it enters (parse_aggregation_mode)"
    )


def check_alpha(alpha: float, field_name: str = "token_weight_alpha") -> float:
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha < 0:
        raise ValueError(f"{field_name}: {alpha!r} is not allowed; it must be a finite number >= 0")
    return alpha


def check_hybrid_coefficients(coefficients: Mapping[str, float], field_name: str = "hybrid_coefficients") -> dict[str, float]:
    if not coefficients:
        raise ValueError(f"{field_name}: a hybrid needs at least one term; allowed terms: {', '.join(RECONSTRUCTION_TERMS)}")
    checked = {}
    for name, weight in coefficients.items():
        if name not in RECONSTRUCTION_TERMS:
            raise ValueError(f"{field_name}: unknown term {name!r}; allowed terms: {', '.join(RECONSTRUCTION_TERMS)}")
        if not is_number(weight) or weight < 0:
            raise ValueError(f"{field_name}.{name}: {weight!r} is not allowed; it must be a finite number >= 0")
        checked[name] = float(weight)
    if not any(weight > 0 for weight in checked.values()):
        raise ValueError(f"{field_name}: every coefficient is 0; at least one must be > 0")
    return checked


@dataclass(frozen=True)
class ReconstructionConfig:
    """Everything that decides the optimised reconstruction term.

    epsilon is in the selected mode's units (nats per token under `mean`, nats per
    example under `sum`); the configured value is reused as-is in both modes, and
    the minimum of A_a(b_i) is logged so tiny denominators are visible.
    """

    term: str = setting("dist", "optimised reconstruction term", choices=OPTIMISABLE_TERMS, flag="reconstruction_term")
    reconstruction_loss_token_aggregation_mode: AggregationMode = setting(
        DEFAULT_AGGREGATION_MODE.value,
        "A_mean (per-example token mean) or A_sum (per-example token sum); the batch reduction is the example mean either way",
        choices=AGGREGATION_MODES,
    )
    token_weight_alpha: float = setting(0.0, "power of the z-free NLL in the token weights (tok, tokcc, tokinv); 0 = uniform")
    epsilon: float = setting(1e-3, "ex-term denominator offset, in the selected mode's units (nats/token for mean, nats/example for sum)")
    hybrid_coefficients: dict[str, float] = setting(
        help="for --reconstruction-term hybrid: weighted terms, e.g. tokcc=0.5,dist=0.5; coefficients >= 0, one > 0. "
        "dist, ex, tokcc and tokinv are divided by a reference scale and O(1) in both modes, raw and tok are not "
        "(about mean n_i times larger under sum): a hybrid mixing the two kinds weights its parts differently in mean and in sum",
        factory=dict,
    )
    reconstruction_scale: float = setting(1.0, "multiplier of the reconstruction term (the scale control: mean mode x mean token count)")

    def __post_init__(self) -> None:
        if self.term not in OPTIMISABLE_TERMS:
            raise ValueError(f"term: {self.term!r} is not allowed; allowed values: {', '.join(OPTIMISABLE_TERMS)}")
        check_field_types(self)
        object.__setattr__(
            self,
            "reconstruction_loss_token_aggregation_mode",
            parse_aggregation_mode(self.reconstruction_loss_token_aggregation_mode),
        )
        object.__setattr__(self, "token_weight_alpha", check_alpha(self.token_weight_alpha))
        if not math.isfinite(self.epsilon) or self.epsilon < 0:
            raise ValueError(f"epsilon: {self.epsilon!r} is not allowed; it must be a finite number >= 0")
        if not math.isfinite(self.reconstruction_scale) or self.reconstruction_scale <= 0:
            raise ValueError(f"reconstruction_scale: {self.reconstruction_scale!r} is not allowed; it must be > 0")
        if self.term == "hybrid":
            object.__setattr__(self, "hybrid_coefficients", check_hybrid_coefficients(self.hybrid_coefficients))
        elif self.hybrid_coefficients:
            raise ValueError(f"hybrid_coefficients: only allowed with term 'hybrid', not {self.term!r}")
        if self.token_weight_alpha > 0 and not self.uses_token_weights:
            raise ValueError(
                f"token_weight_alpha: {self.token_weight_alpha} has no effect on term {self.term!r}; "
                f"alpha > 0 is allowed only for {', '.join(sorted(TOKEN_WEIGHTED_TERMS))} (or a hybrid containing one)"
            )

    @property
    def uses_token_weights(self) -> bool:
        parts = self.hybrid_coefficients if self.term == "hybrid" else {self.term: 1.0}
        return any(name in TOKEN_WEIGHTED_TERMS for name in parts)

    @property
    def mode(self) -> AggregationMode:
        return self.reconstruction_loss_token_aggregation_mode
