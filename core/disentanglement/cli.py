"""Command-line flags generated from settings dataclasses, and the one `name=value,...` format.

A field declares its own help text and choices (`setting(...)`); `add_settings_flags` turns every field of a
dataclass, and of the dataclasses nested in it, into one `--flag`. Nested settings share one flat flag namespace,
so a leaf's name (or its metadata `flag`) must be unique across the tree; `flat_fields` lists them.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, field, fields


def setting(default=MISSING, help: str = "", *, choices=None, flag: str | None = None, factory=MISSING):
    """A dataclass field with its CLI help text, allowed values and (when it differs from the field name) flag name."""
    metadata = {"help": help, "choices": tuple(choices) if choices is not None else None, "flag": flag}
    return field(default=default, default_factory=factory, metadata=metadata)


def nested(cls):
    """A field holding a settings group, built from the same flat mapping as its parent."""
    return field(default_factory=cls, metadata={"nested": cls})


def flag_name(f: Field) -> str:
    return f.metadata.get("flag") or f.name


def nested_class(f: Field) -> type | None:
    """The settings class of a nested-settings field (declared with `nested(...)`), else None."""
    return f.metadata.get("nested")


def flat_fields(cls) -> Iterator[tuple[str, Field]]:
    """(flag name, field) of every leaf setting of `cls`, nested settings expanded in declaration order.

    A name two groups share (both model families' `prior`) is one setting: it is listed once, at its first place,
    and settings_from_flat gives its value to both.
    """
    seen = set()
    for name, f in _leaves(cls):
        if name not in seen:
            seen.add(name)
            yield name, f


def _leaves(cls) -> Iterator[tuple[str, Field]]:
    for f in fields(cls):
        inner = nested_class(f)
        if inner is not None:
            yield from _leaves(inner)
        else:
            yield flag_name(f), f


def parse_pairs(text: str, value: Callable[[str], object] = float, what: str = "name=value") -> dict:
    """'a=0.5,b=1' -> {'a': 0.5, 'b': 1.0}; `value` converts each right-hand side (str keeps it as written)."""
    pairs = {}
    for item in filter(None, text.split(",")):
        name, sep, raw = item.partition("=")
        if not sep or not name.strip() or not raw.strip():
            raise argparse.ArgumentTypeError(f"{item!r} is not {what}")
        try:
            pairs[name.strip()] = value(raw.strip())
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{item!r}: {raw!r} is not a number") from err
    return pairs


def parse_bool(text: str) -> bool:
    """'true' / 'false' (any case), as a flag's value."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed values: true, false")
    return text.lower() == "true"


def format_pairs(pairs: Mapping) -> str:
    """{'a': 0.5, 'b': 1} -> 'a=0.5,b=1', the inverse of parse_pairs."""
    return ",".join(f"{name}={value}" for name, value in pairs.items())


def _default(f: Field):
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def add_settings_flags(parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = ()) -> None:
    """One --flag per leaf setting of `cls` (not in `skip`): required when the field has no default, typed by its
    default, with the field's help text and choices; a mapping field reads `name=value,...`. The flags of each
    top-level settings group are listed under its name in --help."""
    group_of = {}
    for f in fields(cls):
        if (inner := nested_class(f)) is not None:
            group = parser.add_argument_group(f"{f.name} settings")
            group_of.update({name: group for name, _ in flat_fields(inner)})
    for name, f in flat_fields(cls):
        if name not in skip:
            _add_flag(group_of.get(name, parser), name, f)


def _add_flag(parser, name: str, f: Field) -> None:
    default = _default(f)
    required = default is MISSING
    kwargs = {"required": required, "help": f.metadata.get("help", "") + ("" if required else " (default: %(default)s)")}
    if f.metadata.get("choices"):
        kwargs["choices"] = f.metadata["choices"]
    if isinstance(default, Mapping):
        kwargs.update(type=parse_pairs, default={})
    elif isinstance(default, bool):  # bool("false") is True: the flag reads its words
        kwargs.update(type=parse_bool, default=default)
    elif not required:
        kwargs.update(type=type(default), default=default)
    parser.add_argument("--" + name.replace("_", "-"), dest=name, **kwargs)


def settings_from_flat(cls, values: Mapping):
    """Build `cls` (nested settings included) from a flat {flag name: value} mapping; absent keys take defaults."""
    arguments = {}
    for f in fields(cls):
        inner = nested_class(f)
        if inner is not None:
            arguments[f.name] = settings_from_flat(inner, values)
        elif flag_name(f) in values:
            arguments[f.name] = values[flag_name(f)]
    return cls(**arguments)


def flat_values(settings) -> dict:
    """The inverse of settings_from_flat: {flag name: value} of every leaf setting."""
    values = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if nested_class(f) is not None:
            values.update(flat_values(value))
        else:
            values[flag_name(f)] = value
    return values


@contextlib.contextmanager
def refusals_exit(*refusals: type[Exception]) -> Iterator[None]:
    """A command's refusal as one line and exit status 1, no traceback: a file that cannot be read or written (its
    name and the reason), or a ValueError (and any of `refusals`) in its own words."""
    try:
        yield
    except OSError as err:
        sys.exit(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}")
    except (ValueError, *refusals) as err:
        sys.exit(f"error: {err}")


def cli_arguments(arguments: Mapping) -> str:
    """{'num_codes': 4, 'hybrid_coefficients': {'tokcc': 0.5}, 'tasks': ['sort', 'count']}
    -> '--num-codes 4 --hybrid-coefficients tokcc=0.5 --tasks sort count'.

    Every value is shell-quoted: a config value is one argument, never more flags (`device: "cpu --seed 5"`). The flags,
    and a mapping's pairs, come in the order of their names, not of the config's spelling: a job's command is its
    params, and a config whose keys are written in another order reruns nothing.
    """
    parts = []
    for name, value in sorted(arguments.items()):
        if isinstance(value, Mapping):
            values = [format_pairs(dict(sorted(value.items())))]
        elif isinstance(value, list | tuple):
            values = [str(item) for item in value]
        elif isinstance(value, bool):
            values = [str(value).lower()]  # core.disentanglement.cli.parse_bool's words
        else:
            values = [str(value)]
        parts.append(" ".join([f"--{name.replace('_', '-')}", *map(shlex.quote, values)]))
    return " ".join(parts)
