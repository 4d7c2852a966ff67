"""A beta axis (`betas:`): its run keys, its grid, its pairing with controls, its refusal under a sequential design, how
the config files merge it, and how the fixed tables and the verdict read it."""

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from experiments.synthetic_sequences.analysis.comparisons import beta_axis
from experiments.synthetic_sequences.analysis.report.beta_curve_text import HEADING, beta_curve_section, interval, spread
from experiments.synthetic_sequences.planning.bindings import BindingError, run_record
from experiments.synthetic_sequences.planning.config_files import merge_order, settle_family_betas
from experiments.synthetic_sequences.planning.grid import expand_grid
from experiments.synthetic_sequences.planning.pairing import check_pairings
from experiments.synthetic_sequences.run_layout import GridError, format_beta, parse_run_key, parse_run_path, run_key, run_path
from experiments.synthetic_sequences.sequential.design import DesignError, parse_design
from experiments.synthetic_sequences.sequential.looks import check_design_grid

SETTINGS = {"steps": 10}


def family(**fields):
    return {"model": "shared_discrete", "controls": "none", "settings": SETTINGS, **fields}


@pytest.mark.parametrize(("beta", "text"), [(0.05, "0.05"), (0.0072, "0.0072"), (2, "2"), (0.33, "0.33"), (1e-8, "0.00000001")])
def test_a_beta_is_written_canonically_and_read_back(beta, text):
    assert format_beta(beta) == text
    key = run_key("raw", "sum", 0, beta)
    assert key == f"raw_sum_0_b{text}"
    assert parse_run_key(key) == ("raw", "sum", 0.0, float(text))
    path = run_path("fam", 3, "tokcc", "mean", 1, 7, beta)
    assert path == f"fam/ref3/tokcc_mean_1_b{text}/seed7"
    assert run_path(**parse_run_path(f"results/runs/{path}")) == path


def test_a_run_off_an_axis_keeps_its_key():
    assert run_key("raw", "sum", 0) == "raw_sum_0"
    assert parse_run_path("fam/ref0/raw_sum_0/seed1") == {
        "family": "fam",
        "reference": 0,
        "term": "raw",
        "mode": "sum",
        "alpha": 0.0,
        "seed": 1,
    }


@pytest.mark.parametrize("beta", [0, -0.1, math.inf, math.nan, 1e-9])
def test_a_beta_a_key_cannot_hold_is_refused(beta):
    with pytest.raises(GridError, match="beta"):
        format_beta(beta)


@pytest.mark.parametrize(
    "key", ["raw_sum_0_0.05", "raw_sum_0_b", "raw_sum_0_b0.050", "raw_sum_0_b-1", "raw_sum_0_bx", "raw_sum_0_b0", "raw_sum_0_b1_x"]
)
def test_malformed_beta_keys_are_refused(key):
    with pytest.raises(GridError, match="run key"):
        parse_run_key(key)


def test_a_familys_betas_are_an_axis_and_a_run_entry_may_set_its_own():
    families = {
        "f": family(
            betas=[0.02, 0.2],
            runs=[
                {"term": "dist", "modes": ["mean", "sum"]},
                {"term": "raw", "betas": [0.01], "modes": ["mean"]},
                {"term": "tokcc", "alpha": 1, "beta": 0.5, "modes": ["sum"]},
            ],
        )
    }
    specs = expand_grid(families, seeds=1)
    assert sorted(spec.key for spec in specs) == [
        "dist_mean_0_b0.02",
        "dist_mean_0_b0.2",
        "dist_sum_0_b0.02",
        "dist_sum_0_b0.2",
        "raw_mean_0_b0.01",
        "tokcc_sum_1",
    ]
    assert all(spec.train_config().objective.beta == spec.beta for spec in specs)
    assert {spec.key: spec.beta_axis for spec in specs}["tokcc_sum_1"] is False


def controlled(control_runs, main_betas=(0.02, 0.2)):
    return {
        "f": family(betas=list(main_betas), runs=[{"term": "raw", "modes": ["mean", "sum"]}]),
        "f-scale": family(controls="scale", control_of="f", runs=control_runs),
    }


def test_a_control_pairs_on_the_axis_at_betas_its_main_family_trains():
    families = controlled([{"term": "raw", "betas": [0.2], "modes": ["mean"]}])
    check_pairings(families, seeds=1)
    assert [spec.key for spec in expand_grid(families, seeds=1) if spec.family == "f-scale"] == ["raw_mean_0_b0.2"]


@pytest.mark.parametrize(
    ("control_runs", "message"),
    [
        ([{"term": "raw", "betas": [0.05], "modes": ["mean"]}], r"betas \[0.05\] not among \[0.02, 0.2\]"),
        ([{"term": "raw", "beta": 0.2, "modes": ["mean"]}], r"beta 0.2 vs betas \[0.02, 0.2\]"),
    ],
)
def test_a_control_off_its_main_familys_axis_is_refused(control_runs, message):
    with pytest.raises(GridError, match=message):
        check_pairings(controlled(control_runs), seeds=1)


def test_a_sequential_design_over_a_beta_axis_is_refused():
    design = parse_design(
        {"kind": "sequential", "looks": [{"references": 1, "seeds": 1}, {"references": 1, "seeds": 2}], "max_runs_per_arm": 2}
    )
    families = {"f": family(runs=[{"term": "raw", "betas": [0.1, 0.2], "modes": ["mean", "sum"]}])}
    with pytest.raises(DesignError, match=r"families.f.runs\[0\].betas: a sequential design over a beta axis is refused"):
        check_design_grid(design, [0], [0, 1], families, 1)
    on_family = {"f": family(betas=[0.1, 0.2], runs=[{"term": "raw", "modes": ["mean", "sum"]}])}
    with pytest.raises(DesignError, match=r"^families.f.betas: a sequential design over a beta axis is refused"):
        check_design_grid(design, [0], [0, 1], on_family, 1)
    # a run entry's own beta takes it off its family's axis (grid.run_betas): no run trains on one
    check_design_grid(design, [0], [0, 1], {"f": family(betas=[0.1, 0.2], runs=[{"term": "raw", "beta": 0.1, "modes": ["mean"]}])}, 1)


def write(path: Path, document) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_later_config_files_betas_replace_an_earlier_files_beta_and_one_file_may_not_set_both(tmp_path):
    first = write(tmp_path / "first.yaml", {"families": {"f": {"beta": 0.05}}})
    second = write(tmp_path / "second.yaml", {"families": {"f": {"betas": [0.1, 0.2]}}})
    merged = {"families": {"f": {"beta": 0.05, "betas": [0.1, 0.2]}}}
    settle_family_betas(merged, [first, second])
    assert merged["families"]["f"] == {"betas": [0.1, 0.2]}
    merged = {"families": {"f": {"beta": 0.05, "betas": [0.1, 0.2]}}}
    settle_family_betas(merged, [second, first])
    assert merged["families"]["f"] == {"beta": 0.05}
    both = write(tmp_path / "both.yaml", {"families": {"f": {"beta": 0.05, "betas": [0.1, 0.2]}}})
    with pytest.raises(ValueError, match=r"both.yaml: families.f sets both beta and betas"):
        settle_family_betas({"families": {"f": {"beta": 0.05, "betas": [0.1, 0.2]}}}, [first, both])


def test_snakemakes_config_files_are_put_in_the_order_it_merged_them(tmp_path):
    directive, command_line = tmp_path / "config.yaml", [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    # snakemake lists the command line's files first and appends the Snakefile's `configfile:`, merged first
    assert merge_order([*command_line, directive], command_line) == [directive.resolve(), *(path.resolve() for path in command_line)]


def test_a_run_whose_config_disagrees_with_its_keys_beta_is_refused():
    run_config = {
        "reconstruction": {"term": "raw", "reconstruction_loss_token_aggregation_mode": "sum", "token_weight_alpha": 0.0},
        "run": {"zfree_seed": 0, "init_decoder": ""},
        "optim": {"seed": 0},
        "objective": {"beta": 0.1},
    }
    assert run_record(Path("r/runs/f/ref0/raw_sum_0_b0.1/seed0"), run_config, {})["beta"] == 0.1
    with pytest.raises(BindingError, match=r"beta 0.1 \(path: 0.05\)"):
        run_record(Path("r/runs/f/ref0/raw_sum_0_b0.05/seed0"), run_config, {})


def runs_frame():
    return pd.DataFrame(
        {
            "family": ["f", "f", "f-scale", "g"],
            "key_beta": ["0.02", "0.2", "0.2", ""],
            "term": ["raw"] * 4,
        }
    )


def test_the_fixed_tables_read_each_beta_as_an_arm_and_pair_a_control_at_its_beta():
    runs = runs_frame()
    assert list(beta_axis.per_beta(runs).family) == ["f b=0.02", "f b=0.2", "f-scale b=0.2", "g"]
    assert beta_axis.controls_per_beta({"f-scale": "f"}, runs) == {"f-scale": "f", "f-scale b=0.2": "f b=0.2"}
    primary = {("f", "raw", 0.0): "onset", ("g", "raw", 0.0): "onset"}
    assert beta_axis.keyed_per_beta(primary, runs) == {
        **primary,
        ("f b=0.02", "raw", 0.0): "onset",
        ("f b=0.2", "raw", 0.0): "onset",
    }
    assert beta_axis.keyed_per_beta({"f": "tokcc 0.5 + dist 0.5"}, runs)["f b=0.2"] == "tokcc 0.5 + dist 0.5"
    off_axis = runs.assign(key_beta="")
    assert beta_axis.per_beta(off_axis) is off_axis and not beta_axis.has_axis(off_axis)


def shift_row(**fields):
    row = {
        "family": "f",
        "term": "raw",
        "alpha": 0.0,
        "betas": 5,
        "blocks": 4,
        "runs": 80,
        "k": 0.2,
        "ci_low": 0.1,
        "ci_high": 0.4,
        "sd_mode": 0.31,
        "sd_mode_low": 0.0,
        "sd_mode_high": 1.2,
        "sd_mode_p": 0.27,
        "parallel_p": 0.6,
        "fixed_k": 0.21,
        "fixed_low": 0.12,
        "fixed_high": 0.37,
        "fixed_parallel_p": 0.55,
        "fit_p": 0.3,
        "reading": "a shift",
        "runs_to_resolve": math.nan,
        "predicted_k": 1 / 6.57,
        "against_prediction": "as the scale predicts",
    }
    return {**row, **fields}


def test_an_sd_at_its_search_bound_is_said_to_be_the_bound_with_its_spread_in_log_beta():
    from experiments.synthetic_sequences.analysis.statistics.population_curves import SD_LIMIT

    assert spread(shift_row()) == "0.31 [0, 1.2]"
    at_bound = shift_row(sd_mode=SD_LIMIT, sd_mode_low=2.0, sd_mode_high=math.inf, slope=-25.0)
    assert spread(at_bound) == f"{SD_LIMIT:.2g} (the search bound; in log beta {SD_LIMIT / 25:.2g}) [2, open]"


def test_the_verdicts_curve_section_gives_k_its_intervals_and_each_cell():
    table = pd.DataFrame(
        [
            shift_row(),
            shift_row(
                term="dist",
                k=math.nan,
                ci_low=0.0,
                ci_high=math.inf,
                fixed_k=math.nan,
                fixed_low=0.0,
                fixed_high=math.inf,
                reading="cannot be resolved",
                predicted_k=math.nan,
                against_prediction="-",
            ),
        ]
    )
    cells = pd.DataFrame(
        [
            {"family": "f", "term": "raw", "alpha": 0.0, "beta": beta, "mode": mode, "runs": 8, "took_up": took, "fitted": took / 8}
            for beta, mode, took in [(0.01, "mean", 8), (0.01, "sum", 8), (0.1, "mean", 0), (0.1, "sum", 6)]
        ]
    )
    text = "\n".join(beta_curve_section(table, cells))
    assert text.startswith(HEADING) and "2 curves, no adjustment across them" in text
    assert "| [0.1, 0.4]" in text and "| [open, open]" in text and "none (no slope)" in text and "| 0.152" in text
    assert "| 0.31 [0, 1.2]" in text and "| 0.21 [0.12, 0.37]" in text and "| none (no slope) [open, open]" in text
    assert "**f raw alpha=0**" in text and "|   0.1  | 0/8 (0.00) | 6/8 (0.75) |" in text
    assert interval(0.0, math.inf) == "[open, open]"
    empty = "\n".join(beta_curve_section(pd.DataFrame(), pd.DataFrame()))
    assert "No (family, term) ran mean and sum at two betas or more" in empty
