"""A term's declared primary endpoint: take-up, unless the config's run entry says `primary: onset`.

The note's take-up contrast cannot move where the mean arm sits at a ceiling (every run takes up) or a floor (none
does). Where calibration finds no beta between the two for a term, its run entry declares onset (the stratified
log-rank test of the step of take-up) as that term's primary endpoint, before the deciding run:

    runs:
      - {term: tokcc, alpha: 1, modes: [mean, sum], primary: onset}

The verdict then reads onset first for that (family, term, alpha), Holm spans its planned onset contrasts (take-up
becomes a secondary endpoint, Benjamini-Hochberg), and the cross-term table's row gives onset. A control family
follows its main family's declaration. A sequential design steers on take-up only, so it refuses a declared onset.
Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from experiments.synthetic_sequences.arms import NO_CONTROL, PRIMARY_ENDPOINTS, TAKE_UP
from experiments.synthetic_sequences.planning.grid import GridError

Group = tuple[str, str, float]  # (main family, term, alpha)


def declared_primary(families: Mapping[str, Mapping | None]) -> dict[Group, str]:
    """Every (family, term, alpha) whose run entry declares a primary endpoint other than take-up."""
    declared = {}
    for family, spec in families.items():
        for i, run in enumerate((spec or {}).get("runs") or []):
            endpoint = run.get("primary", TAKE_UP)
            where = f"families.{family}.runs[{i}].primary"
            if endpoint not in PRIMARY_ENDPOINTS:
                raise GridError(f"{where}: {endpoint!r} is not allowed; allowed values: {', '.join(PRIMARY_ENDPOINTS)}")
            if "primary" in run and spec.get("controls", NO_CONTROL) != NO_CONTROL:
                raise GridError(f"{where}: a control family follows its main family's primary endpoint; remove it")
            if endpoint != TAKE_UP:
                declared[(family, run["term"], float(run.get("alpha", 0.0)))] = endpoint
    return declared


def check_design_endpoints(declared: Mapping[Group, str]) -> None:
    """A sequential design's looks decide on take-up: a term read on another primary endpoint cannot run under it."""
    if declared:
        family, term, alpha = sorted(declared)[0]
        raise GridError(
            f"families.{family}: {term} alpha={alpha:g} declares primary: {declared[family, term, alpha]}, but a sequential "
            "design steers on take-up only; declare take-up or run the fixed design (design: {kind: fixed})"
        )


def format_primary(declared: Mapping[Group, str]) -> str:
    """--primary of the tables and plots: a JSON list of [family, term, alpha, endpoint]."""
    return json.dumps([[*group, endpoint] for group, endpoint in sorted(declared.items())])


def parse_primary(text: str | None) -> dict[Group, str]:
    """The inverse of format_primary; '' or None declares nothing."""
    try:
        entries = json.loads(text) if text else []
        declared = {(str(family), str(term), float(alpha)): str(endpoint) for family, term, alpha, endpoint in entries}
    except (ValueError, TypeError) as err:
        raise GridError(f"--primary: {text!r} is not a JSON list of [family, term, alpha, endpoint] ({err})") from err
    if unknown := sorted(set(declared.values()) - set(PRIMARY_ENDPOINTS)):
        raise GridError(f"--primary: {unknown[0]!r} is not allowed; allowed values: {', '.join(PRIMARY_ENDPOINTS)}")
    return declared
