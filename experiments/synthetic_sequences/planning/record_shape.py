"""A record the pipeline writes and reads back (a look file, the design record, the grid record) checked for shape
against its JSON schema before any field is used: a field missing or of the wrong type is refused in one line that
names the file, the field and what to do, as unreadable JSON is; no KeyError or TypeError reaches the user. Each
record's schema lives with the module that writes and reads it. Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}


def shape_error(record: object, schema: Mapping) -> str | None:
    """The first way `record` departs from `schema`, in words naming the field ('field runs_read is missing'); None
    where it fits."""
    error = best_match(Draft202012Validator(schema).iter_errors(record))
    if error is None:
        return None
    if error.validator == "required":
        missing = next(name for name in error.validator_value if name not in error.instance)
        return f"field {'.'.join(map(str, [*error.absolute_path, missing]))} is missing"
    where = ".".join(map(str, error.absolute_path)) or "the record"
    expected = {"type": f"not of type {error.validator_value}", "pattern": "not a sha256", "enum": f"not one of {error.validator_value}"}
    detail = expected.get(str(error.validator), error.message)
    return f"field {where} is {error.instance!r:.60}, {detail}" if error.absolute_path else f"{where} is {detail}"


def read_record(path: str | Path, schema: Mapping, advice: str, error: type[Exception] = ValueError) -> object:
    """A JSON record read and checked for shape (check_shape); unreadable JSON is refused the same way."""
    try:
        record = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise error(f"{path} is not valid JSON ({err}); {advice}") from None
    check_shape(record, schema, path, advice, error)
    return record


def check_shape(record: object, schema: Mapping, path: str | Path, advice: str, error: type[Exception] = ValueError) -> None:
    """Refuse a record that departs from its schema: one line naming the file, the field and `advice`."""
    if (problem := shape_error(record, schema)) is not None:
        raise error(f"{path}: {problem}; {advice}")
