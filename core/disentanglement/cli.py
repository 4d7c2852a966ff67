"""Command-line flags from a settings dataclass: one --flag per field, typed and defaulted from it."""

from __future__ import annotations

import argparse
from dataclasses import fields


def add_dataclass_flags(parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = ()) -> None:
    """--field-name for every field of `cls` not in `skip`, typed by and defaulting to the field's default."""
    defaults = cls()
    for f in fields(cls):
        if f.name in skip:
            continue
        value = getattr(defaults, f.name)
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(value), default=value, help="default: %(default)s")
