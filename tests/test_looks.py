"""A sequential design on the run grid: the runs each look reads, the runs trained, and the sealed look files."""

from __future__ import annotations

import json

import pytest

from experiments.synthetic_sequences.planning.design import DesignError, parse_design
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.planning.looks import (
    arm_of,
    check_design_grid,
    look_document,
    look_specs,
    read_look,
    trained_specs,
)

SETTINGS = {"steps": 10}
FAMILIES = {
    "main": {"model": "shared_discrete", "beta": 0.1, "settings": SETTINGS, "runs": [{"term": "raw", "modes": ["mean", "sum"]}]},
    "main-scale": {
        "model": "shared_discrete",
        "beta": 0.1,
        "controls": "scale",
        "control_of": "main",
        "settings": SETTINGS,
        "runs": [{"term": "raw", "modes": ["mean"]}],
    },
}
CONTROL_OF = {"main-scale": "main"}
REFERENCES, SEEDS = [0, 1], [0, 1, 2]
GROUP = ("main", "raw", 0.0)


def design(looks=((1, 1), (2, 3)), maximum=6):
    block = {"kind": "sequential", "looks": [{"references": r, "seeds": s} for r, s in looks], "max_runs_per_arm": maximum}
    return parse_design(block)


def grid():
    return expand_grid(FAMILIES, SEEDS, REFERENCES)


def test_every_run_has_an_arm_of_its_main_family():
    arms = {arm_of(spec, CONTROL_OF) for spec in grid()}
    assert arms == {(GROUP, "mean"), (GROUP, "sum"), (GROUP, "scale")}


def test_the_first_look_reads_every_arm_at_its_layout_and_a_later_one_the_open_arms_only():
    first = look_specs(grid(), CONTROL_OF, REFERENCES, SEEDS, design().looks[0])
    assert sorted(spec.path for spec in first) == [
        "main-scale/ref0/raw_mean_0/seed0",
        "main/ref0/raw_mean_0/seed0",
        "main/ref0/raw_sum_0/seed0",
    ]
    second = look_specs(grid(), CONTROL_OF, REFERENCES, SEEDS, design().looks[1], {GROUP: ["sum", "scale"]})
    assert {arm_of(spec, CONTROL_OF)[1] for spec in second} == {"sum", "scale"}
    assert {(spec.reference, spec.seed) for spec in second} == {(r, s) for r in REFERENCES for s in SEEDS}


def sealed(look, groups, previous=None, of=None):
    return look_document(look, of or design(), groups, {"main/ref0/raw_mean_0/seed0": "ab" * 32}, previous)


def group(train_next):
    return {"family": "main", "term": "raw", "alpha": 0.0, "decisions": {}, "train_next": train_next}


def test_a_closed_arm_keeps_the_runs_it_had():
    documents = [sealed(1, [group(["sum", "scale"])])]
    trained = trained_specs(grid(), CONTROL_OF, REFERENCES, SEEDS, design(), documents)
    by_arm = {}
    for spec in trained:
        by_arm.setdefault(arm_of(spec, CONTROL_OF)[1], []).append(spec)
    assert {arm: len(specs) for arm, specs in by_arm.items()} == {"mean": 1, "sum": 6, "scale": 6}
    # every contrast decided at look 1: nothing more trains
    assert len(trained_specs(grid(), CONTROL_OF, REFERENCES, SEEDS, design(), [sealed(1, [group([])])])) == 3


def test_a_look_file_edited_by_hand_or_of_another_design_is_refused(tmp_path):
    path = tmp_path / "look1.json"
    document = sealed(1, [group(["sum"])])
    path.write_text(json.dumps(document))
    assert read_look(path, design()) == document
    edited = {**document, "groups": [group([])]}
    path.write_text(json.dumps(edited))
    with pytest.raises(DesignError, match=r"look1.json: its content does not match its sha256 \(edited by hand\?\)"):
        read_look(path, design())
    path.write_text(json.dumps(document))
    with pytest.raises(DesignError, match="made under another design"):
        read_look(path, design(maximum=8))
    path.write_text("{")
    with pytest.raises(DesignError, match="not a readable look file"):
        read_look(path, design())
    # a look names the one it followed
    assert sealed(2, [group([])], previous=document)["previous_sha256"] == document["sha256"]


@pytest.mark.parametrize(
    ("references", "seeds", "families", "per_job", "message"),
    [
        ([0], SEEDS, FAMILIES, 1, r"references: 1 and seeds: 3, but the design's last look trains up to 2 references x 3 seeds"),
        (REFERENCES, [0, 1, 2, 3], FAMILIES, 1, r"set references: 2 and seeds: 3"),
        (REFERENCES, SEEDS, {**FAMILIES, "main": {**FAMILIES["main"], "seeds": 2}}, 1, r"families.main.seeds: in a sequential design"),
        (REFERENCES, SEEDS, FAMILIES, 2, r"design.looks\[0\]: 1 seeds is not a multiple of seeds_per_job 2"),
    ],
)
def test_a_grid_the_design_cannot_train_into_is_refused(references, seeds, families, per_job, message):
    with pytest.raises(DesignError, match=message):
        check_design_grid(design(), references, seeds, families, per_job)
    check_design_grid(design(), REFERENCES, SEEDS, FAMILIES, 1)
