"""What the tables may read: runs bound to the grid, to their own path and to the current inputs."""

import json

import pytest

from experiments.synthetic_sequences.planning.bindings import (
    BindingError,
    check_against_grid,
    check_inputs,
    compared_settings,
    grid_document,
    grid_file,
    keep_grid_record,
    parse_input,
    tables_grid_file,
    write_grid,
)
from experiments.synthetic_sequences.planning.grid import expand_grid

FAMILIES = {
    "main": {
        "model": "shared_discrete",
        "seeds": [0, 1],
        "beta": 0.1,
        "settings": {"steps": 10},
        "runs": [{"term": "raw", "modes": ["mean"]}],
    }
}
CURRENT = {name: f"sha-{name}" for name in ("train_records", "val_records", "test_records")}
CURRENT |= {f"ref0/{name}": f"sha-{name}" for name in ("train_scores", "val_scores")}
CURRENT |= {"ref0/reference_mean": "sha-ref-mean", "ref0/reference_sum": "sha-ref-sum", "ref0/init_decoder": "sha-zfree"}


def grid():
    return grid_document(expand_grid(FAMILIES))


def record(run: str, **settings) -> dict:
    entry = grid()["runs"][run]
    inputs = {name.removeprefix("ref0/"): CURRENT[name] for name in CURRENT if not name.startswith(("ref0/reference", "ref0/init"))}
    return {
        "run": run,
        **{k: entry[k] for k in ("family", "reference", "term", "mode", "alpha", "seed")},
        "settings": {**entry["settings"], **settings},
        "inputs_sha256": {**inputs, "reference": CURRENT["ref0/reference_mean"]},
    }


def files(*records, prefix="results/metrics"):
    return {f"{prefix}/{r['run']}.parquet": [r] for r in records}


RUN0, RUN1 = "main/ref0/raw_mean_0/seed0", "main/ref0/raw_mean_0/seed1"


def test_the_grid_s_runs_with_the_grid_s_settings_pass():
    check_against_grid(files(record(RUN0), record(RUN1)), grid(), "results")
    check_inputs([record(RUN0), record(RUN1)], CURRENT, "results")


def test_a_missing_and_an_extra_run_are_named():
    extra = {**record(RUN1), "run": "main/ref0/raw_mean_0/seed7", "seed": 7}
    with pytest.raises(
        BindingError,
        match=r"the grid's run main/ref0/raw_mean_0/seed1 has no metrics file.*"
        r"holds run main/ref0/raw_mean_0/seed7, which the grid does not ask for",
    ):
        check_against_grid(files(record(RUN0), extra), grid(), "results")


def test_two_files_for_one_run_and_a_file_at_another_run_s_path_are_refused():
    twice = {
        "results/metrics/main/ref0/raw_mean_0/seed0.parquet": [record(RUN0)],
        "results/metrics/main/ref0/raw_mean_0/seed1.parquet": [record(RUN0)],
    }
    with pytest.raises(BindingError, match=r"seed1.parquet holds run main/ref0/raw_mean_0/seed0, not the run its path names \(1 such"):
        check_against_grid(twice, grid(), "results")  # named first, with the command that extracts it again (check_placed)
    with pytest.raises(BindingError, match=r"rm results/metrics/main/ref0/raw_mean_0/seed1.parquet; then snakemake --cores 2$"):
        check_against_grid(twice, grid(), "results")
    copied = {**twice, "results/metrics/main/ref0/raw_mean_0/seed1.parquet": [record(RUN1)]}
    copied["results/other/main/ref0/raw_mean_0/seed0.parquet"] = [record(RUN0)]  # at no run's path, and its run's second
    with pytest.raises(BindingError, match=r"run main/ref0/raw_mean_0/seed0 has two metrics files"):
        check_against_grid(copied, grid(), "results")


def test_a_run_trained_with_other_settings_is_stale_and_the_error_says_how_to_retrain_it():
    stale = record(RUN1, **{"optim.steps": 20})
    # no chunk record on disk: every training job is forced, and each keeps its finished runs
    advice = r"Retrain them: snakemake --cores 2 --forcerun train_run$"
    with pytest.raises(BindingError, match=r"main/ref0/raw_mean_0/seed1 \(optim.steps 20 \(grid: 10\)\). " + advice):
        check_against_grid(files(record(RUN0), stale), grid(), "results")


def test_a_run_of_other_inputs_is_refused_naming_the_input():
    other = record(RUN1)
    other["inputs_sha256"] = {**other["inputs_sha256"], "val_scores": "sha-of-another-data-seed"}
    with pytest.raises(
        BindingError, match=r"1 run\(s\) were trained on other inputs than the current ones: main/ref0/raw_mean_0/seed1 \(val_scores\)"
    ):
        check_inputs([record(RUN0), other], CURRENT, "results")
    warm = record(RUN0, **{"run.warm_start": True})  # a warm-started run is held to the current checkpoint too
    with pytest.raises(BindingError, match=r"seed0 \(init_decoder\)"):
        check_inputs([warm], CURRENT, "results")


def test_a_grids_record_is_named_by_its_content(tmp_path):
    specs = expand_grid(FAMILIES)
    document = grid_document(specs)
    assert grid_file(document) == grid_file(grid_document(expand_grid(FAMILIES)))  # the same grid, the same name
    other = grid_document(expand_grid({"main": {**FAMILIES["main"], "beta": 0.2}}))
    assert grid_file(other) != grid_file(document) and grid_file(document).startswith("grid/")
    path = tmp_path / grid_file(document)
    path.parent.mkdir()
    write_grid(document, path)
    assert json.loads(path.read_text()) == document
    with pytest.raises(ValueError, match=r"is not the record of this grid: it is named grid/[0-9a-f]{16}\.json"):
        write_grid(other, path)


def test_compared_settings_leave_out_paths_and_logging_and_keep_the_warm_start():
    config = expand_grid(FAMILIES)[0].train_config(run_dir="x").to_dict()
    settings = compared_settings(config)
    assert "run.run_dir" not in settings and "run.train_records" not in settings and "run.log_every" not in settings
    assert settings["optim.steps"] == 10 and settings["run.warm_start"] is False and settings["optim.seed"] == 0


def test_inputs_are_name_equals_path_and_a_path_may_hold_equals_signs():
    assert parse_input("reference_sum=res=1/reference/sum.json") == ("reference_sum", "res=1/reference/sum.json")
    with pytest.raises(BindingError, match="is not NAME=PATH"):
        parse_input("reference_sum")


def test_a_run_copied_into_a_control_family_is_refused_by_its_settings():
    """main/ref0/raw_mean_0/seed0 copied to main-scale/ref0/raw_mean_0/seed0: its path parses, its settings are not the control's."""
    families = {**FAMILIES, "main-scale": {**FAMILIES["main"], "controls": "scale", "control_of": "main"}}
    grid = grid_document(expand_grid(families))
    copied = {**record(RUN0), "run": "main-scale/ref0/raw_mean_0/seed0", "family": "main-scale"}
    proper = {**record(RUN1), "run": "main-scale/ref0/raw_mean_0/seed1", "family": "main-scale"}
    proper["settings"] = grid["runs"]["main-scale/ref0/raw_mean_0/seed1"]["settings"]
    with pytest.raises(BindingError, match=r"main-scale/ref0/raw_mean_0/seed0 \(objective.controls 'none' \(grid: 'scale'\)\)"):
        check_against_grid(files(record(RUN0), record(RUN1), copied, proper), grid, "results")


def test_the_tables_keep_a_copy_of_their_grid_named_as_its_record_and_drop_earlier_ones(tmp_path):
    first, second = grid_document(expand_grid(FAMILIES)), grid_document(expand_grid({"main": {**FAMILIES["main"], "beta": 0.2}}))
    keep_grid_record(first, tmp_path / tables_grid_file(grid_file(first)))
    keep_grid_record(second, tmp_path / tables_grid_file(grid_file(second)))
    (kept,) = tmp_path.glob("grid-*.json")
    assert kept.name == tables_grid_file(grid_file(second)) == f"grid-{grid_file(second).removeprefix('grid/')}"
    assert json.loads(kept.read_text()) == second


def test_a_run_read_as_another_reference_block_is_refused():
    """Blocks 1 and 2, each with its own scores and c_base: a run of block 1 recorded as block 2's is held to block 2's
    inputs, and refused naming them; a block the current inputs do not have is refused the same way."""
    blocks = grid_document(expand_grid(FAMILIES, references=[1, 2]))
    assert {entry["reference"] for entry in blocks["runs"].values()} == {1, 2}
    current = {name: CURRENT[name] for name in ("train_records", "val_records", "test_records")}
    for block in (1, 2):
        current |= {f"ref{block}/{name}": f"sha-{name}-{block}" for name in ("train_scores", "val_scores", "reference_mean")}
    own = {"train_scores": "sha-train_scores-1", "val_scores": "sha-val_scores-1", "reference": "sha-reference_mean-1"}
    entry = blocks["runs"]["main/ref1/raw_mean_0/seed0"]
    run_of_block_1 = {**entry, "run": "main/ref1/raw_mean_0/seed0", "inputs_sha256": {**current, **own}}
    check_inputs([run_of_block_1], current, "results")
    read_as_block_2 = {**run_of_block_1, "run": "main/ref2/raw_mean_0/seed0", "reference": 2}
    with pytest.raises(BindingError, match=r"main/ref2/raw_mean_0/seed0 \(reference, train_scores, val_scores\)"):
        check_inputs([read_as_block_2], current, "results")
    with pytest.raises(BindingError, match=r"main/ref3/raw_mean_0/seed0 \(reference, train_scores, val_scores\)"):
        check_inputs([{**run_of_block_1, "run": "main/ref3/raw_mean_0/seed0", "reference": 3}], current, "results")


def test_a_block_artifact_swapped_under_its_runs_is_named_before_any_run():
    """Blocks 1 and 2 with two seeds each; their val_scores swapped on disk: the files changed, not the four runs."""
    grid = grid_document(expand_grid({name: {**spec, "seeds": 2} for name, spec in FAMILIES.items()}, references=[1, 2]))
    current = {name: CURRENT[name] for name in ("train_records", "val_records", "test_records")}
    for block in (1, 2):
        current |= {
            f"ref{block}/{name}": f"sha-{name}-{block}" for name in ("train_scores", "val_scores", "reference_mean", "reference_sum")
        }
    records = []
    for run, entry in grid["runs"].items():
        block, mode = entry["reference"], entry["mode"]
        own = {
            "train_scores": f"sha-train_scores-{block}",
            "val_scores": f"sha-val_scores-{block}",
            "reference": f"sha-reference_{mode}-{block}",
        }
        records.append({**entry, "run": run, "inputs_sha256": {**current, **own}})
    check_inputs(records, current, "results")
    swapped = {**current, "ref1/val_scores": current["ref2/val_scores"], "ref2/val_scores": current["ref1/val_scores"]}
    with pytest.raises(BindingError) as refused:
        check_inputs(records, swapped, "results")
    message = str(refused.value)
    assert message.startswith("ref1/val_scores hashes sha-val_scor, but all ")
    assert "(that is ref2/val_scores's now: swapped?)" in message and "The artifact changed under its runs: rebuild it" in message
    rebuilt = "results/zfree/ref1/model.pt results/zfree/ref2/model.pt"  # each block's z-free model, and all made from it
    assert message.endswith(f"rebuild it and retrain the runs that read it: snakemake --cores 2 --forcerun {rebuilt}")
    assert "seed0" not in message
