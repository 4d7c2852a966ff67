"""A sequential design on the run grid: the runs each look reads, the runs trained, and the sealed look files."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core.disentanglement.artifacts import sha256_file, sha256_json
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.run_layout import metrics_path
from experiments.synthetic_sequences.sequential.design import DesignError, parse_design
from experiments.synthetic_sequences.sequential.look_files import check_look_runs, look_document, read_look
from experiments.synthetic_sequences.sequential.looks import arm_of, check_design_grid, look_specs, trained_specs
from experiments.synthetic_sequences.sequential.record import DESIGN_RECORD, check_design_fixed, record_design

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
    assert {(spec.block, spec.seed) for spec in second} == {(r, s) for r in REFERENCES for s in SEEDS}


def sealed(look, groups, previous=None, of=None, runs_read=None):
    runs_read = runs_read or {"main/ref0/raw_mean_0/seed0": "ab" * 32}
    return look_document(look, of or design(), groups, runs_read, previous, [])


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


def test_a_look_is_checked_against_the_look_before_and_the_runs_it_read(tmp_path):
    """The results folder of a look file is its grandparent; its runs' metrics files lie under metrics/."""
    run = "main/ref0/raw_mean_0/seed0"
    metrics = tmp_path / metrics_path(".", run)
    metrics.parent.mkdir(parents=True)
    metrics.write_bytes(b"the metrics")
    path = tmp_path / "design" / "look2.json"
    first = sealed(1, [group(["sum"])], runs_read={run: sha256_file(metrics)})
    second = sealed(2, [group([])], previous=first, runs_read={run: sha256_file(metrics)})
    check_look_runs(second, path, first, [run])
    other_first = sealed(1, [group(["mean"])], runs_read={run: sha256_file(metrics)})
    with pytest.raises(DesignError, match=r"look2.json: its previous_sha256 \(\w+\) is not the seal of look 1 .* it follows another look"):
        check_look_runs(second, path, other_first, [run])
    with pytest.raises(DesignError, match=r"look2.json: it did not read main/ref1/raw_mean_0/seed0, which the config assigns to it"):
        check_look_runs(second, path, first, [run, "main/ref1/raw_mean_0/seed0"])
    with pytest.raises(DesignError, match=r"look2.json: it read main/ref0/raw_mean_0/seed0, which the config does not assign to it"):
        check_look_runs(second, path, first, [])
    metrics.write_bytes(b"another experiment's metrics")
    with pytest.raises(DesignError, match=r"seed0.parquet hashes \w+, but the look read \w+: the look was made from other runs"):
        check_look_runs(second, path, first, [run])
    metrics.unlink()  # a metrics file extraction will write again is passed over here; its reader checks it whole
    check_look_runs(second, path, first, [run])


def test_a_look_file_under_another_look_s_name_is_refused(tmp_path):
    path = tmp_path / "design" / "look2.json"
    path.parent.mkdir()
    path.write_text(json.dumps(sealed(1, [group([])])))
    with pytest.raises(DesignError, match="look2.json: holds look 1, not the look its name says"):
        read_look(path, design())


def test_the_first_look_fixes_the_design_and_a_reset_is_recorded(tmp_path):
    assert record_design(tmp_path, design(), reset=False) == []
    assert record_design(tmp_path, design(), reset=False) == []  # the same design, read again: nothing changes
    check_design_fixed(tmp_path, design(), reset=False)
    (tmp_path / "design").mkdir()  # the look files, even all of them, can go: the record stays beside them
    with pytest.raises(DesignError, match=r"design.json: this results folder's looks were read under obrien-fleming .* design_reset=True"):
        check_design_fixed(tmp_path, design(maximum=8), reset=False)
    earlier = record_design(tmp_path, design(maximum=8), reset=True)
    assert [entry["design"]["max_runs_per_arm"] for entry in earlier] == [6]
    assert [entry["design"]["max_runs_per_arm"] for entry in json.loads((tmp_path / DESIGN_RECORD).read_text())["designs"]] == [6, 8]
    check_design_fixed(tmp_path, design(maximum=8), reset=False)  # the new design is now the folder's
    (tmp_path / DESIGN_RECORD).unlink()  # deleting the record by name lets any design start over
    check_design_fixed(tmp_path, design(), reset=False)


def test_an_edited_design_record_is_refused_not_believed_over_the_look_files(tmp_path):
    """design.json names the designs its looks were read under: a design changed by hand, sealed or not, is refused
    in one line naming the record, so no verdict names an 'earlier design' that no look file ever had."""
    record_design(tmp_path, design(), reset=False)
    looks = tmp_path / "design"
    looks.mkdir()
    (looks / "look1.json").write_text(json.dumps(sealed(1, [group(["sum"])])))
    check_design_fixed(tmp_path, design(), reset=False)  # the record is its looks'
    path = tmp_path / DESIGN_RECORD
    kept = json.loads(path.read_text())
    entry = kept["designs"][-1]
    other = {**entry["design"], "alpha_spending": "pocock"}
    path.write_text(json.dumps({"designs": [{**entry, "design": other}]}))
    unsealed = r"design.json: the design first read at \S+ does not match its sha256 \(edited by hand\?\); restore it"
    with pytest.raises(DesignError, match=unsealed):
        check_design_fixed(tmp_path, design(), reset=True)
    path.write_text(json.dumps({"designs": [{**entry, "design": other, "sha256": sha256_json(other)}]}))  # resealed too
    with pytest.raises(
        DesignError, match=r"design.json: its last design is pocock spending, .* but \S+look1.json was made under obrien-fleming spending"
    ):
        record_design(tmp_path, design(), reset=True)
    (looks / "look1.json").unlink()  # without a look file, a sealed record is all there is to go by
    check_design_fixed(tmp_path, dataclasses.replace(design(), alpha_spending="pocock"), reset=False)
