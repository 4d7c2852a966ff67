"""A curve design's stages and look files (sequential/curve_stages.py, curve_looks.py) called as the plan calls them:
stage 1 from the config, a later stage from the look before it (so a dry run shows it once that look exists), the
refusals of a look edited, made for other curves or following another look, each curve's decision from its runs and
the look's alpha, and a look recomputed on another CPU read as its own."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_plan import ROOT, Wildcards, chunk_fields, load, load_files

from bench.curve_shift import pilot
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT
from experiments.synthetic_sequences.sequential.curve_design import (
    coarse_betas,
    informative_betas,
    parse_curve_design,
)
from experiments.synthetic_sequences.sequential.curve_looks import check_same, curve_groups
from experiments.synthetic_sequences.sequential.design import OPEN, DesignError
from experiments.synthetic_sequences.sequential.look_files import look_document

CONFIG = str(ROOT / "config" / "curve_design.yaml")
PLACED = {"mean": [0.1, 0.12], "sum": [0.18, 0.22]}


def write_look(plan, look: int, groups: list[dict], previous: dict | None = None, **edits) -> dict:
    """A look file in the plan's results folder, sealed as the look job seals it (then `edits` over it)."""
    document = look_document(look, plan.looks.design, groups, {}, previous, [], spans=plan.looks.spans) | edits
    path = Path(plan.look_file(look))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return document


def groups_of(spans: dict, open_name: str) -> list[dict]:
    """Every curve stopped at look 1 but `open_name`, which stage 2 trains at PLACED."""
    groups = []
    for name in sorted(spans):
        family, term, alpha = name.split("/")
        decision = {"decision": OPEN if name == open_name else "a shift", "look": 1, "runs": 40}
        betas = PLACED if name == open_name else {}
        groups.append(
            {
                "family": family,
                "term": term,
                "alpha": float(alpha),
                "decisions": {"curve": decision},
                "train_next": sorted(betas),
                "next_betas": betas,
            }
        )
    return groups


def test_stage_one_trains_each_curves_coarse_betas_on_the_first_blocks(tmp_path):
    plan = load_files(tmp_path, [CONFIG])
    assert plan.looks.kind == "curve" and plan.looks.most_stages() == 4
    specs = list(plan.grid.values())
    assert {spec.block for spec in specs} == {101, 102, 103, 104}
    dist = {spec.beta for spec in specs if (spec.family, spec.term) == ("discrete", "dist")}
    raw = {spec.beta for spec in specs if (spec.family, spec.term) == ("continuous", "raw")}
    assert sorted(dist) == coarse_betas([0.035, 0.35]) and sorted(raw) == coarse_betas([0.0072, 0.36])
    assert len(specs) == 2 * 4 * 2 * (3 * 5 + 8)  # families x blocks x modes x (three normalised terms' 5 betas + raw's 8)
    assert "curve_looks" in plan.look_module() and "--spans" in plan.design_flags()


def test_a_look_on_disk_puts_the_next_stages_runs_on_its_blocks_so_a_dry_run_shows_them(tmp_path):
    plan = load_files(tmp_path, [CONFIG])
    write_look(plan, 1, groups_of(plan.looks.spans, "discrete/dist/0"))
    again = load_files(tmp_path, [CONFIG])  # a new parse, as a dry run's or a Slurm job's
    stage2 = [spec for spec in again.grid.values() if spec.block >= 105]
    assert {spec.block for spec in stage2} == set(range(105, 113)) and {(spec.family, spec.term) for spec in stage2} == {
        ("discrete", "dist")
    }
    for mode, betas in PLACED.items():
        assert sorted({spec.beta for spec in stage2 if spec.mode == mode}) == betas
    assert len(stage2) == 2 * 2 * 8  # two modes x two betas x eight new blocks x one seed
    chunk = stage2[0].chunk_path(1)
    assert again.chunk_runs(
        Wildcards(dict(zip(("family", "reference", "term", "mode", "alpha", "at_beta", "chunk"), chunk_fields(chunk), strict=True)))
    )
    again.looks.await_look = lambda look, again=False: None  # snakemake's checkpoint: look 1 is on disk
    look2 = again.looks.look_metrics(Wildcards(look="2"))
    assert len(look2) == 2 * 4 * 5 + len(stage2) and all("discrete/ref" in path and "/dist_" in path for path in look2)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"groups": []}, "does not match its sha256"),
        ({"spans": {"discrete/dist/0": [0.01, 1.0]}}, "other curves than the config's"),
        ({"previous_sha256": "0" * 64}, "it follows another look"),
    ],
)
def test_a_look_edited_made_for_other_curves_or_following_another_look_is_refused(tmp_path, edit, message):
    plan = load_files(tmp_path, [CONFIG])
    document = write_look(plan, 1, groups_of(plan.looks.spans, "discrete/dist/0"))
    if "groups" not in edit:  # resealed: the seal is right, the content is not the config's
        from core.disentanglement.artifacts import sha256_json

        body = {name: value for name, value in (document | edit).items() if name != "sha256"}
        edit = {**edit, "sha256": sha256_json(body)}
    Path(plan.look_file(1)).write_text(json.dumps(document | edit))
    with pytest.raises(DesignError, match=message):
        load_files(tmp_path, [CONFIG])


def placed(plan, betas: dict | None = None, **fields) -> list[dict]:
    """groups_of with discrete dist open, its next stage at `betas` (PLACED) and `fields` over its group."""
    groups = groups_of(plan.looks.spans, "discrete/dist/0")
    group = next(group for group in groups if (group["family"], group["term"]) == ("discrete", "dist"))
    group |= {"next_betas": betas or PLACED, "train_next": sorted(betas or PLACED), **fields}
    return groups


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"betas": {"mean": [0.1, 0.11], "sum": [0.18, 0.22]}}, r"next_betas.mean \[0.1, 0.11\]: not two ascending betas"),
        ({"betas": {"mean": [0.1, 0.12000000001], "sum": [0.18, 0.22]}}, "next_betas.mean .*: not two ascending betas of the"),
        ({"betas": {"mean": [10.0, 12.0], "sum": [0.18, 0.22]}}, "within its span's hold"),
        ({"betas": {"mean": [0.12, 0.1], "sum": [0.18, 0.22]}}, "not two ascending betas"),
        ({"betas": {"mean": [0.1, 0.12, 0.15], "sum": [0.18, 0.22]}}, "not two ascending betas"),
        ({"train_next": ["mean"]}, "train_next"),
        ({"decisions": {"curve": {"decision": OPEN, "look": 1, "runs": 40.0}}}, r"decisions.curve.runs is 40.0, not a whole number"),
        ({"decisions": {"curve": {"decision": "a shift", "look": 1, "runs": 40}}}, "decision 'a shift' with next stage"),
        ({"look": 1.0}, "holds look 1.0, not the look its name says"),
    ],
)
def test_a_looks_placement_off_the_fixed_set_or_its_counts_not_whole_are_refused(tmp_path, change, message):
    """A resealed look file (its seal right) that no look job writes: its next stage off the design's fixed betas, in the
    wrong number or order, past its span's hold, or its counts floats; checked exactly, before its stage is planned."""
    from core.disentanglement.artifacts import sha256_json

    plan = load_files(tmp_path, [CONFIG])
    look = change.pop("look", 1)
    groups = placed(plan, change.pop("betas", None), **change)
    document = look_document(1, plan.looks.design, groups, {}, None, [], spans=plan.looks.spans)
    body = {name: value for name, value in document.items() if name != "sha256"} | {"look": look}
    Path(plan.look_file(1)).parent.mkdir(parents=True)
    Path(plan.look_file(1)).write_text(json.dumps({**body, "sha256": sha256_json(body)}))
    with pytest.raises(DesignError, match=message):
        load_files(tmp_path, [CONFIG])


def test_a_curve_is_read_at_its_looks_alpha_and_placed_by_its_own_fit_and_a_stopped_curve_is_carried():
    design = parse_curve_design({"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 160}, 1)
    runs = pilot(np.random.default_rng(3), math.log(0.5), blocks=4, seeds=1, betas=np.array(coarse_betas([0.035, 0.35])))
    runs = runs.assign(family="f", term="dist", alpha=0.0, reference=runs.reference + 101)
    spans = {"f/dist/0": [0.035, 0.35], "f/raw/0": [0.013, 0.63]}
    stopped = {
        "family": "f",
        "term": "raw",
        "alpha": 0.0,
        "decisions": {"curve": {"decision": "a shift", "runs": 64}},
        "train_next": [],
        "next_betas": {},
    }
    previous = {
        "groups": [
            stopped,
            {"family": "f", "term": "dist", "alpha": 0.0, "decisions": {"curve": {"runs": 0}}, "train_next": ["mean", "sum"]},
        ]
    }
    dist, raw = curve_groups(runs, design, 2, previous, spans)
    assert raw == stopped
    decision = dist["decisions"]["curve"]
    assert decision["runs"] == 40 and decision["alpha"] == pytest.approx(design.increment(40, 0, 0.05, last=False))
    assert decision["log_low"] < decision["log_k"] < decision["log_high"]
    if decision["decision"] == OPEN:
        for is_sum, mode in enumerate(("mean", "sum")):
            assert dist["next_betas"][mode] == informative_betas(*decision["fit"][:3], is_sum, spans["f/dist/0"], "c-optimal")


def test_a_look_recomputed_on_another_cpu_reads_as_its_own_and_one_from_other_runs_does_not():
    recorded = [{"decisions": {"curve": {"log_k": 0.1234567, "log_high": math.inf, "log_low": math.nan, "decision": OPEN}}}]
    drifted = 0.1234567 * (1 + 2e-6)  # more than bench/look_float_drift measured over threads and CPU kernels
    nearly = [{"decisions": {"curve": {"log_k": drifted, "log_high": math.inf, "log_low": math.nan, "decision": OPEN}}}]
    check_same(recorded, nearly, Path("look1.json"), pilot=DEFAULT_PILOT)
    other = [{"decisions": {"curve": {"log_k": 0.13, "log_high": math.inf, "log_low": math.nan, "decision": OPEN}}}]
    with pytest.raises(DesignError, match=r"groups\[0\]\.decisions\.curve\.log_k: 0\.1234567 in the file, 0\.13 from its runs"):
        check_same(recorded, other, Path("look1.json"), pilot=DEFAULT_PILOT)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"design": {"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 40}}, "design.budget: 40 runs hold stage 1"),
        ({"references": [101, 102]}, "references: 2 blocks, but the design's 4 stages take 28"),
        (  # 28 blocks hold 4 stages; a budget of 10^6 asks for 31249: the budget is named, with what the blocks hold
            {"design": {"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 1_000_000}},
            r"design.budget: 1000000 runs per curve take 31249 stages on 249988 blocks .* lower the budget to 167 at most",
        ),
        ({"design": {"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 168}}, "lower the budget to 167 at most"),
    ],
)
def test_a_curve_design_that_cannot_run_is_refused_naming_the_field(tmp_path, change, message):
    shipped = yaml.safe_load(Path(CONFIG).read_text())
    with pytest.raises(DesignError, match=message):
        load(tmp_path, shipped | change)


def test_the_largest_budget_the_refusal_names_is_one_the_blocks_hold(tmp_path):
    """167, what test_a_curve_design_that_cannot_run_is_refused_naming_the_field's refusal names, plans 4 stages."""
    shipped = yaml.safe_load(Path(CONFIG).read_text())
    assert load(tmp_path, shipped | {"design": {**shipped["design"], "budget": 167}}).looks.most_stages() == 4


def test_a_span_inside_one_fixed_beta_is_refused_naming_its_run(tmp_path):
    shipped = yaml.safe_load(Path(CONFIG).read_text())
    shipped["families"]["discrete"]["betas"] = [0.1, 0.101]
    with pytest.raises(DesignError, match=r"families.discrete.runs\[0\]: its betas \[0.1, 0.101\] span one beta of the design's fixed set"):
        load(tmp_path, shipped)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"first_blocks": 4, "stage_blocks": 8}, "design.budget: a curve design needs"),
        ({"first_blocks": 4, "stage_blocks": 8, "budget": 160, "looks": []}, "design.looks: not a curve design's key"),
        ({"first_blocks": 4, "stage_blocks": 8, "budget": 160, "placement": "a-optimal"}, "design.placement: 'a-optimal' is not one of"),
        ({"first_blocks": 4, "stage_blocks": 8, "budget": 160, "alpha_spending": "even"}, "design.alpha_spending: 'even'"),
        ({"first_blocks": 4, "stage_blocks": 8, "budget": 160, "precision": math.nan}, "design.precision: nan is not a factor"),
        ({"first_blocks": 4, "stage_blocks": 8, "budget": 160, "precision": math.inf}, "design.precision: inf is not a factor"),
    ],
)
def test_a_curve_design_block_is_parsed_with_a_refusal_that_names_its_field(block, message):
    with pytest.raises(DesignError, match=message):
        parse_curve_design({"kind": "curve", **block}, 1)


def test_the_verdict_gives_each_curves_stop_its_look_and_its_interval_at_the_looks_level():
    from experiments.synthetic_sequences.analysis.report.beta_curve_text import design_lines

    design = parse_curve_design({"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 160}, 1)
    stopped = {"decision": "precise", "look": 3, "runs": 104, "alpha": 0.0146, "log_k": math.log(0.5), "reading": "a shift"}
    stopped |= {"log_low": math.log(0.4), "log_high": math.log(0.62)}
    still = {"decision": OPEN, "look": 3, "runs": 104, "alpha": 0.0146, "log_k": math.nan, "log_low": -math.inf, "log_high": math.inf}
    still |= {"reading": "cannot be resolved"}
    groups = [
        {"family": "f", "term": term, "alpha": 0.0, "decisions": {"curve": decision}, "train_next": [], "next_betas": {}}
        for term, decision in (("dist", stopped), ("raw", still))
    ]
    looks = [look_document(k, design, groups, {}, None, [], spans={}) for k in (1, 2, 3)]
    text = "\n".join(design_lines(looks))
    assert text.startswith("### The curve design") and "3 looks, a budget of 160 runs per curve, 4 blocks in stage 1 and 8 new" in text
    rows = {
        line.split("|")[2].strip(): [cell.strip() for cell in line.split("|")[4:-1]]
        for line in text.splitlines()
        if line.startswith("| f ")
    }
    assert rows["dist"] == ["precise", "3", "104", "0.0146", "0.5", "[0.4, 0.62]", "a shift"]
    assert rows["raw"] == ["open after look 3", "3", "104", "0.0146", "none (no slope)", "[open, open]", "cannot be resolved"]
    assert design_lines([]) == []
    assert "Every run the design read, 208 in all, one row each with its block, stage, beta, mode and outcomes" in text


def test_the_verdicts_last_line_under_a_curve_design_is_the_designs_own_next_step():
    """Open: the pilot's command trains the next stage; every curve stopped at a decision: nothing to train; one at its
    budget: only a new design with a larger budget resolves it. Never a seeds line, which the design refuses."""
    from experiments.synthetic_sequences.analysis.report.beta_curve_text import design_next_line

    design = parse_curve_design({"kind": "curve", "first_blocks": 4, "stage_blocks": 8, "budget": 160}, 1)
    curve = {"look": 2, "runs": 72, "alpha": 0.01, "log_k": 0.0, "log_low": -1.0, "log_high": 1.0, "reading": "cannot be resolved"}

    def last_line(*decisions: str) -> str:
        groups = [
            {
                "family": "f",
                "term": term,
                "alpha": 0.0,
                "decisions": {"curve": curve | {"decision": decision}},
                "train_next": [],
                "next_betas": {},
            }
            for term, decision in zip(("dist", "raw"), decisions, strict=False)
        ]
        return design_next_line([look_document(k, design, groups, {}, None, [], spans={}) for k in (1, 2)])

    assert (
        last_line(OPEN, "precise")
        == "The curve design is open after look 2 (f dist): rerunning this pilot's command trains its next stage."
    )
    assert last_line("a shift", "beyond scale").startswith("Every curve stopped at a decision of the design")
    budget = last_line("budget", "no shift")
    assert budget.startswith("f dist stopped at the design's budget of 160 runs per curve") and "larger `design.budget`" in budget
    assert all("seeds=" not in line for line in (last_line(OPEN), last_line("budget"), last_line("precise")))
