"""The plan called directly, as the rules call it: no snakemake process, no Snakefile parse."""

import json
import shlex
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from experiments.synthetic_sequences.planning.plan import Plan, WorkflowFiles
from experiments.synthetic_sequences.planning.plan_tables import PLOTS
from experiments.synthetic_sequences.run_layout import GridError, parse_run_path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = str(ROOT / "config" / "schema" / "config.schema.yaml")


class Wildcards(dict):
    """What snakemake hands an input function: a job's wildcards, by attribute and as a mapping."""

    __getattr__ = dict.__getitem__


def load(tmp_path, *overlays: dict, settings=None) -> Plan:
    """The plan of config/config.yaml with `overlays` merged over it as snakemake merges config files."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    files = [str(ROOT / "config" / "config.yaml")]
    for index, overlay in enumerate(overlays):
        path = tmp_path / f"overlay{index}.yaml"
        path.write_text(yaml.safe_dump(overlay))
        files.append(str(path))
        update_config(config, overlay)
    config["results"] = str(tmp_path / "results")
    return Plan.load(config, WorkflowFiles(files, files[1:], settings, SCHEMA, executes=False))


def test_the_default_pilot_plans_its_grid_chunks_and_inputs(tmp_path):
    plan = load(tmp_path)
    assert len(plan.grid) == 40 and len(plan.chunks) == 20  # 4 arms x 5 blocks x 2 seeds, chunks of up to 4 seeds
    results = plan.config["results"]
    chunk = Wildcards(family="discrete", reference="3", term="raw", mode="sum", alpha="0", at_beta="", chunk="0-3")
    flags = shlex.split(plan.chunk_flags(chunk))
    assert flags[:3] == ["--seed", str(3 * 2**20), str(3 * 2**20 + 1)]  # grid.training_seed: block 3's seeds 0 and 1
    assert flags[3:] == ["--run-dir", f"{results}/runs/discrete/ref3/raw_sum_0/seed0", f"{results}/runs/discrete/ref3/raw_sum_0/seed1"]
    settings = json.loads(shlex.split(plan.family_settings(chunk))[0])
    assert settings["zfree_seed"] == 3 and settings["init_decoder"] == f"{results}/zfree/ref3/model.pt"
    run = Wildcards(family="discrete", reference="3", term="raw", mode="sum", alpha="0", at_beta="", seed="1")
    assert plan.run_chunk(run) == f"{results}/runs/discrete/ref3/raw_sum_0/seeds0-3.json"
    inputs = plan.current_inputs()
    assert inputs["train_records"] == f"{results}/data/train.parquet"  # one shared draw
    assert inputs["ref3/reference_sum"] == f"{results}/reference/ref3/sum.json" and "ref3/init_decoder" in inputs
    assert len(plan.run_metrics()) == 40 and plan.look_files() == [] and plan.looks is None


def test_a_draw_per_block_wires_each_block_to_its_own_records_and_seed(tmp_path):
    plan = load(tmp_path, {"data": {"per_block": True}})
    results = plan.config["results"]
    assert plan.data_file("records", 2, split="val") == f"{results}/data/ref2/val.parquet"
    assert "--seed 3 " in plan.data_flags(Wildcards(reference="2")) + " "  # data.seed + 1 + block
    assert plan.current_inputs()["ref2/train_records"] == f"{results}/data/ref2/train.parquet"
    assert plan.data_summaries() == {f"ref{block}": f"{results}/data/ref{block}/summary.json" for block in range(5)}


def test_a_chunk_or_run_outside_the_grid_is_refused_naming_it(tmp_path):
    plan = load(tmp_path)
    with pytest.raises(ValueError, match=r"chunk discrete/ref9/raw_sum_0/seeds0-3 is not in the config's grid at seeds_per_job 4"):
        plan.chunk_flags(Wildcards(family="discrete", reference="9", term="raw", mode="sum", alpha="0", at_beta="", chunk="0-3"))
    with pytest.raises(ValueError, match=r"run discrete/ref0/raw_sum_0/seed7 is not in the config's grid"):
        plan.run_chunk(Wildcards(family="discrete", reference="0", term="raw", mode="sum", alpha="0", at_beta="", seed="7"))


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ({"data": {"min_size": 4, "max_size": 2}}, r"data.min_size \(4\) must be <= data.max_size \(2\)"),
        ({"zfree": {"batch_size": 10_000}}, r"zfree.batch_size: 10000 is more than data.n_train \(4000\) records"),
        ({"reference": {"source": "zfree", "checkpoint": "x.pt"}}, r"reference.checkpoint is read only with source: entangled"),
    ],
)
def test_a_config_that_breaks_a_cross_field_rule_is_refused_before_the_grid(tmp_path, overlay, message):
    with pytest.raises(ValueError, match=message):
        load(tmp_path, overlay)


def test_the_pilots_command_line_reaches_the_jobs_flags(tmp_path):
    plan = load(tmp_path, {"seeds": 3}, settings=["seeds=3"])
    assert plan.pilot_flags() == f"--pilot-configfile {tmp_path}/overlay0.yaml --pilot-config seeds=3"
    assert len(plan.grid) == 60


def test_a_chunk_record_whose_run_is_gone_is_refused_on_disk(tmp_path):
    plan = load(tmp_path)
    record = Path(plan.config["results"]) / "runs" / "discrete" / "ref0" / "raw_sum_0" / "seeds0-3.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"seeds": [0], "runs": {"0": {"run_dir": "x", "metadata_sha256": "0" * 64}}, "written": "t"}))
    gone = r"1 run\(s\) are gone or unfinished, but .*\(discrete/ref0/raw_sum_0/seed0\)\. Train them again: rm "
    with pytest.raises(GridError, match=gone):
        plan.check_on_disk()


def test_a_beta_axis_draws_take_up_and_learning_curves_one_file_per_main_family_and_term(tmp_path):
    """Off an axis the six figures as ever; on config/curve.yaml's axis takeup and curves are one file per (main
    family, term), a control family's runs in its main family's file, and no whole-grid takeup.png or curves.png."""
    assert [Path(path).name for path in load(tmp_path).plot_files()] == [f"{plot}.png" for plot in PLOTS]
    names = {Path(path).name for path in load(tmp_path, yaml.safe_load((ROOT / "config" / "curve.yaml").read_text())).plot_files()}
    pairs = [(family, term) for family in ("discrete", "continuous") for term in ("dist", "tokcc", "hybrid", "raw")]
    split = {f"{plot}_{family}_{term}.png" for plot in ("takeup", "curves") for family, term in pairs}
    assert names == split | {"separation.png", "latent_usage.png", "mean_vs_sum.png", "forest.png"}


@pytest.mark.parametrize("name", sorted(path.name for path in (ROOT / "config").glob("*.yaml")))
def test_a_runs_parameters_are_what_its_path_names_in_every_shipped_config(tmp_path, name):
    """The grid's record takes a run's parameters from its spec, not by parsing the path back: both agree, to the byte
    of their JSON (the record is named by its content's hash)."""
    overlay = yaml.safe_load((ROOT / "config" / name).read_text())
    plan = load(tmp_path, *([] if name == "config.yaml" else [overlay]))
    assert plan.grid
    for path, spec in plan.grid.items():
        assert json.dumps(spec.parameters()) == json.dumps(parse_run_path(path)), path
