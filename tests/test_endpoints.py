"""A term's declared primary endpoint (planning/endpoints.py): parsed from the config, refused where it cannot hold."""

import pytest

from experiments.synthetic_sequences.planning.endpoints import (
    check_design_endpoints,
    declared_primary,
    format_primary,
    parse_primary,
)
from experiments.synthetic_sequences.planning.grid import GridError

FAMILIES = {
    "main": {
        "controls": "none",
        "runs": [{"term": "raw", "modes": ["mean", "sum"]}, {"term": "tokcc", "alpha": 1, "modes": ["mean", "sum"], "primary": "onset"}],
    },
    "main-scale": {"controls": "scale", "control_of": "main", "runs": [{"term": "raw", "modes": ["mean"]}]},
    "gone": None,  # a family removed by `null` in an overlay
}


def test_only_the_terms_declaring_another_endpoint_are_listed_and_the_flag_round_trips():
    declared = declared_primary(FAMILIES)
    assert declared == {("main", "tokcc", 1.0): "onset"}
    assert format_primary(declared) == '[["main", "tokcc", 1.0, "onset"]]'
    assert parse_primary(format_primary(declared)) == declared
    assert parse_primary("") == {} and parse_primary(None) == {}


@pytest.mark.parametrize(
    ("families", "message"),
    [
        (
            {"main": {"runs": [{"term": "raw", "modes": ["mean"], "primary": "magnitude"}]}},
            "families.main.runs[0].primary: 'magnitude' is not allowed",
        ),
        (
            {"main-scale": {"controls": "scale", "runs": [{"term": "raw", "modes": ["mean"], "primary": "take-up"}]}},
            "families.main-scale.runs[0].primary: a control family follows its main family's primary endpoint; remove it",
        ),
    ],
)
def test_an_unknown_endpoint_or_one_declared_by_a_control_is_refused_naming_the_field(families, message):
    with pytest.raises(GridError, match=message.replace("[", r"\[").replace("]", r"\]")):
        declared_primary(families)


def test_a_sequential_design_refuses_a_declared_onset_and_takes_none():
    check_design_endpoints({})
    with pytest.raises(
        GridError, match="families.main: tokcc alpha=1 declares primary: onset, but a sequential design steers on take-up only"
    ):
        check_design_endpoints(declared_primary(FAMILIES))


@pytest.mark.parametrize(("text", "message"), [("{", "is not a JSON list"), ('[["a", "raw", 0, "speed"]]', "'speed' is not allowed")])
def test_a_bad_flag_is_refused(text, message):
    with pytest.raises(GridError, match=message):
        parse_primary(text)
