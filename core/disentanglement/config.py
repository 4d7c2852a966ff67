"""Reconstruction-loss settings and their validation.

`reconstruction_loss_token_aggregation_mode` selects A_mean or A_sum (spec,
"Aggregation contract"). Only the reconstruction family reads it; every
auxiliary term ignores it. `mean` is the default, `sum` is the ablation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class AggregationMode(StrEnum):
    MEAN = "mean"
    SUM = "sum"


AGGREGATION_MODES: tuple[str, ...] = tuple(m.value for m in AggregationMode)
DEFAULT_AGGREGATION_MODE = AggregationMode.MEAN

# Term names hold no underscore so a run key `{term}_{mode}_{alpha}` parses back.
RECONSTRUCTION_TERMS: tuple[str, ...] = ("raw", "dist", "ex", "tok", "tokcc", "tokinv")
OPTIMISABLE_TERMS: tuple[str, ...] = RECONSTRUCTION_TERMS + ("hybrid",)
# Terms whose value depends on token weights, i.e. on alpha.
TOKEN_WEIGHTED_TERMS: frozenset[str] = frozenset({"tok", "tokcc", "tokinv"})


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


def check_alpha(alpha: float, field_name: str = "token_weight_alpha") -> float:
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha < 0:
        raise ValueError(f"{field_name}: {alpha!r} is not allowed; it must be a finite number >= 0")
    return alpha


def check_positive_counts(settings: object, names: tuple[str, ...]) -> None:
    """Raise ValueError naming the first of `names` (integer settings of `settings`) that is below 1."""
    for name in names:
        if getattr(settings, name) < 1:
            raise ValueError(f"{name}: {getattr(settings, name)} is not allowed; it must be >= 1")


def check_hybrid_coefficients(coefficients: Mapping[str, float], field_name: str = "hybrid_coefficients") -> dict[str, float]:
    if not coefficients:
        raise ValueError(f"{field_name}: a hybrid needs at least one term; allowed terms: {', '.join(RECONSTRUCTION_TERMS)}")
    checked = {}
    for name, weight in coefficients.items():
        if name not in RECONSTRUCTION_TERMS:
            raise ValueError(f"{field_name}: unknown term {name!r}; allowed terms: {', '.join(RECONSTRUCTION_TERMS)}")
        weight = float(weight)
        if not math.isfinite(weight):
            raise ValueError(f"{field_name}.{name}: {weight!r} is not a finite number")
        checked[name] = weight
    return checked


@dataclass(frozen=True)
class ReconstructionConfig:
    """Everything that decides the optimised reconstruction term.

    epsilon is in the selected mode's units (nats per token under `mean`, nats per
    example under `sum`); the configured value is reused as-is in both modes, and
    the minimum of A_a(b_i) is logged so tiny denominators are visible.
    """

    term: str = "dist"
    reconstruction_loss_token_aggregation_mode: AggregationMode = DEFAULT_AGGREGATION_MODE
    token_weight_alpha: float = 0.0
    epsilon: float = 1e-3
    hybrid_coefficients: Mapping[str, float] = field(default_factory=dict)
    reconstruction_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.term not in OPTIMISABLE_TERMS:
            raise ValueError(f"term: {self.term!r} is not allowed; allowed values: {', '.join(OPTIMISABLE_TERMS)}")
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
