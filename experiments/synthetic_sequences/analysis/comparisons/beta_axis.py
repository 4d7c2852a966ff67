"""A beta axis as the fixed tables read it: each beta an arm of its own.

On a beta axis (a family's or run entry's `betas:`) a run's key carries its beta (run_layout), and the runs table its
key's beta as `key_beta` ('' off an axis). The fixed tables (contrasts, take-up, verdict, cross-term, plots) compare
arms within a family; they read a family's runs at one beta of its axis as a family of their own, labelled
`<family> b=<beta>`, and pair a control family's runs at a beta with its main family's at that beta. Family names
hold no space (grid.FAMILY_PATTERN), so a label is never a family's name. Off an axis nothing changes. The curves over
beta (beta_curves.py) read the runs unlabelled.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

KEY_BETA = "key_beta"  # metrics_files.RUN_COLUMNS


def arm_label(family: str, key_beta: str) -> str:
    """'continuous', '0.05' -> 'continuous b=0.05'; a run off an axis ('') keeps its family's name."""
    return f"{family} b={key_beta}" if key_beta else family


def has_axis(frame: pd.DataFrame) -> bool:
    """Whether a run of the table lies on a beta axis (a table without the column, as a hand-made one, has none)."""
    return KEY_BETA in frame and bool(frame[KEY_BETA].ne("").any())


def per_beta(frame: pd.DataFrame) -> pd.DataFrame:
    """A runs or metrics table with each run on an axis under its arm's label."""
    if not has_axis(frame):
        return frame
    return frame.assign(family=[arm_label(family, key_beta) for family, key_beta in zip(frame.family, frame[KEY_BETA], strict=True)])


def labels(frame: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """{arm label: (family, key beta)} of the runs on an axis."""
    if not has_axis(frame):
        return {}
    pairs = frame.loc[frame[KEY_BETA].ne(""), ["family", KEY_BETA]].drop_duplicates()
    return {arm_label(family, key_beta): (family, key_beta) for family, key_beta in pairs.itertuples(index=False)}


def controls_per_beta(control_of: Mapping[str, str], frame: pd.DataFrame) -> dict[str, str]:
    """control_of with each control's arm at a beta paired with its main family's arm at that beta."""
    paired = dict(control_of)
    for label, (family, key_beta) in labels(frame).items():
        if family in control_of:
            paired[label] = arm_label(control_of[family], key_beta)
    return paired


def keyed_per_beta(by_family: Mapping, frame: pd.DataFrame) -> dict:
    """A mapping keyed by family, or by (family, ...) tuples, given the same entry under each of the family's arm labels
    (a term's declared primary endpoint, a family's hybrid coefficients)."""
    extended = dict(by_family)
    for label, (family, _) in labels(frame).items():
        for key, value in by_family.items():
            if key == family:
                extended[label] = value
            elif isinstance(key, tuple) and key[0] == family:
                extended[(label, *key[1:])] = value
    return extended
