"""Type and range checks shared by every settings dataclass; refusals name the field and what it accepts."""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Mapping
from dataclasses import fields


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# what each annotated type of a settings dataclass accepts, and how a refusal describes it
FIELD_TYPES = {
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (is_number, "a finite number"),
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    dict[str, float]: (
        lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and is_number(w) for k, w in v.items()),
        "a mapping of names to finite numbers",
    ),
}


@functools.cache
def _type_hints(cls: type) -> dict:
    return typing.get_type_hints(cls)  # evaluated once per class: the Snakefile checks every run of the grid


def check_field_types(settings: object) -> None:
    """Raise ValueError naming the first field of the dataclass `settings` whose value is not of its annotated type.

    YAML and JSON hand over whatever they parsed (`steps: 10.7`, `steps: ten`); an int field takes only integers,
    a float field any finite number. Fields of a type not listed here (nested settings, enums) check themselves.
    """
    hints = _type_hints(type(settings))
    for f in fields(settings):
        if hints[f.name] not in FIELD_TYPES:
            continue
        accepts, described = FIELD_TYPES[hints[f.name]]
        value = getattr(settings, f.name)
        if not accepts(value):
            raise ValueError(f"{f.name}: {value!r} is not allowed; it must be {described}")


def check_positive_counts(settings: object, names: tuple[str, ...]) -> None:
    """Raise ValueError naming the first of `names` (integer settings of `settings`) that is below 1."""
    for name in names:
        if getattr(settings, name) < 1:
            raise ValueError(f"{name}: {getattr(settings, name)} is not allowed; it must be >= 1")


def check_choice(name: str, value: object, allowed: typing.Iterable[str]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}: {value!r} is not allowed; allowed values: {', '.join(allowed)}")


def check_minimum(settings: object, names: tuple[str, ...], *, strict: bool) -> None:
    """Raise ValueError naming the first of `names` below 0 (or at 0 too, when `strict`)."""
    for name in names:
        value = getattr(settings, name)
        if value < 0 or (strict and value == 0):
            raise ValueError(f"{name}: {value} is not allowed; it must be {'>' if strict else '>='} 0")


def check_heads_divide_width(settings: object) -> None:
    """Raise ValueError when n_head does not divide d_model (attention splits the width into equal heads)."""
    d_model, n_head = settings.d_model, settings.n_head
    if d_model % n_head:
        raise ValueError(f"n_head: {n_head} does not divide d_model {d_model}; d_model must be a multiple of n_head")
