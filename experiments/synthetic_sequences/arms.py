"""The arm vocabulary, its one home: the arms a (main family, term, alpha) compares, the contrasts between them, its
endpoints and the runs table's columns the contrasts read.

An arm is one side of a contrast. A main family's runs form the `mean` and `sum` arms (their aggregation mode); a
control family's runs form the arm of its control's kind (`scale`: mean mode, reconstruction x the c_base ratio;
`balance`: sum mode with the mean's token weights), paired with its main family (planning/pairing.py). Torch- and
pandas-free: the planner and the Snakefile read it too.
"""

from __future__ import annotations

from collections.abc import Mapping

NO_CONTROL = "none"  # a run's `controls` in a main family
CONTROL_MODE = {"scale": "mean", "balance": "sum"}  # each control is defined in one mode
MODE_ARMS = ("mean", "sum")
CONTROL_ARMS = tuple(CONTROL_MODE)
ARMS = (*MODE_ARMS, *CONTROL_ARMS)

# sum - mean is the effect; the control contrasts say how much of it each confound reproduces
COMPARISONS = (("sum", "mean"), ("scale", "mean"), ("balance", "mean"), ("sum", "scale"), ("sum", "balance"))
COMPARISON_NAMES = tuple(f"{a}-{b}" for a, b in COMPARISONS)  # the tables' `comparison` column
MODE_EFFECT = COMPARISON_NAMES[0]  # "sum-mean": the aggregation mode's own effect

# a term's primary endpoint (planning/endpoints.py: take-up unless its run entry declares onset)
TAKE_UP, ONSET = "take-up", "onset"
PRIMARY_ENDPOINTS = (TAKE_UP, ONSET)

# the runs table's columns behind them
TOOK_UP = "took_up"  # take-up, the primary metric
ONSET_STEP = "onset_step"  # the step of take-up
BLOCK = "reference"  # a run's reference block

# a run's take-up event: validation I(x;z) at or above the threshold (nats; why 0.1: analysis/records/curves.py).
# Confirmed at the second evaluation in a row at or above it: where a run may end (the trainer's stop_at_take_up).
TAKEUP_THRESHOLD = 0.1
CONFIRMING_EVALUATIONS = 2


def next_streak(streak: int, mutual_information: float, threshold: float = TAKEUP_THRESHOLD) -> int:
    """The validation points in a row at or above the threshold, after one more point."""
    return streak + 1 if mutual_information >= threshold else 0


def arm_name(mode: str, controls: str) -> str:
    """A run's arm: its mode in a main family (as the plain name the tables write), its control's kind in a control
    family."""
    return str(mode) if controls == NO_CONTROL else controls


def main_family(family: str, control_of: Mapping[str, str]) -> str:
    """The main family a family's runs are read under: a control family's main family, else the family itself."""
    return control_of.get(family, family)


def arm_group(family: str, term: str, alpha: float, controls: str, control_of: Mapping[str, str]) -> tuple[str, str, float]:
    """The (main family, term, alpha) a run's arm belongs to: a control family's runs pair with its main family's."""
    return (family if controls == NO_CONTROL else control_of[family], term, alpha)
