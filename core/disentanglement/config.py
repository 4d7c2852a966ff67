"""Reconstruction-loss settings and their validation.

`reconstruction_loss_token_aggregation_mode` selects A_mean or A_sum (spec,
"Aggregation contract"). Only the reconstruction family reads it; every
auxiliary term ignores it. `mean` is the default, `sum` is the ablation.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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
# Terms divided by a reference scale (c_base^a, or A_a(b_i) + epsilon for ex) are O(1) in both modes; raw and tok
# are in the mode's own units, about mean n_i times larger under sum. A hybrid that mixes the two kinds weights its
# parts differently in mean and in sum: the caveat of --hybrid-coefficients and the README.
NORMALISED_TERMS: frozenset[str] = frozenset({"dist", "ex", "tokcc", "tokinv"})


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


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# what each annotated type of a settings dataclass accepts, and how a refusal describes it
FIELD_TYPES = {
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (_is_number, "a finite number"),
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    dict[str, float]: (
        lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and _is_number(w) for k, w in v.items()),
        "a mapping of names to finite numbers",
    ),
}


def check_field_types(settings: object) -> None:
    """Raise ValueError naming the first field of the dataclass `settings` whose value is not of its annotated type.

    YAML and JSON hand over whatever they parsed (`steps: 10.7`, `steps: ten`); an int field takes only integers,
    a float field any finite number.
    """
    hints = typing.get_type_hints(type(settings))
    for f in fields(settings):
        accepts, described = FIELD_TYPES[hints[f.name]]
        value = getattr(settings, f.name)
        if not accepts(value):
            raise ValueError(f"{f.name}: {value!r} is not allowed; it must be {described}")


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
        if not _is_number(weight) or weight < 0:
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
