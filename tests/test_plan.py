"""The plan called directly, as the rules call it: no snakemake process, no Snakefile parse."""

import json
import shlex
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from core.disentanglement.cli import cli_arguments
from experiments.synthetic_sequences.planning.data_draws import DEFAULT_TASKS
from experiments.synthetic_sequences.planning.plan import Plan, WorkflowFiles
from experiments.synthetic_sequences.planning.plan_tables import PLOTS
from experiments.synthetic_sequences.run_layout import GridError, parse_run_path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = str(ROOT / "config" / "schema" / "config.schema.yaml")


class Wildcards(dict):
    """What snakemake hands an input function: a job's wildcards, by attribute and as a mapping."""

    __getattr__ = dict.__getitem__


def overridden(overrides: dict) -> dict:
    """config/config.yaml with values replaced at (key, key, ..., index) paths."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for path, value in overrides.items():
        target = config
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return config


def design_block(*looks, maximum=20):
    """A sequential design block of looks (references, seeds)."""
    return {
        "kind": "sequential",
        "looks": [{"references": r, "seeds": s} for r, s in looks],
        "alpha_spending": "obrien-fleming",
        "max_runs_per_arm": maximum,
    }


def load(tmp_path, *overlays: dict, settings=None, results="results") -> Plan:
    """The plan of config/config.yaml with `overlays` merged over it as snakemake merges config files, its results
    folder under tmp_path (results=None: the overlays' own)."""
    paths = []
    for index, overlay in enumerate(overlays):
        path = tmp_path / f"overlay{index}.yaml"
        path.write_text(yaml.safe_dump(overlay))
        paths.append(str(path))
    return load_files(tmp_path, paths, settings, results)


def load_files(tmp_path, paths: list[str], settings=None, results="results") -> Plan:
    """The plan of config/config.yaml and the config files `paths` after it, as `snakemake --configfile PATHS` loads
    them (the Snakefile's own config file first)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    files = [str(ROOT / "config" / "config.yaml"), *paths]
    for path in paths:
        update_config(config, yaml.safe_load(Path(path).read_text()))
    if results is not None:
        config["results"] = str(tmp_path / results)
    return Plan.load(config, WorkflowFiles(files, files[1:], settings, SCHEMA, executes=False))


def flag_values(flags: str) -> dict[str, list[str]]:
    """{--flag: its values} of a job's flags, in any order."""
    values: dict[str, list[str]] = {}
    for word in shlex.split(flags):
        if word.startswith("--"):
            current = values.setdefault(word, [])
        else:
            current.append(word)
    return values


def test_the_default_pilot_plans_its_grid_chunks_and_inputs(tmp_path):
    plan = load(tmp_path)
    assert len(plan.grid) == 40 and len(plan.chunks) == 20  # 4 arms x 5 blocks x 2 seeds, chunks of up to 4 seeds
    results = plan.config["results"]
    chunk = Wildcards(family="discrete", reference="3", term="raw", mode="sum", alpha="0", at_beta="", chunk="0-3")
    flags = flag_values(plan.chunk_flags(chunk))
    assert flags["--seed"] == [str(3 * 2**20), str(3 * 2**20 + 1)]  # grid.training_seed: block 3's seeds 0 and 1
    assert flags["--run-dir"] == [f"{results}/runs/discrete/ref3/raw_sum_0/seed0", f"{results}/runs/discrete/ref3/raw_sum_0/seed1"]
    settings = {flag: value for flag, (value, *more) in flags.items() if not more}  # every other setting is one value
    assert settings["--reconstruction-loss-token-aggregation-mode"] == "sum" and settings["--reconstruction-term"] == "raw"
    assert settings["--zfree-seed"] == "3" and settings["--init-decoder"] == f"{results}/zfree/ref3/model.pt"
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


def chunk_fields(chunk: str) -> list[str]:
    """A chunk path's wildcards (run_layout.CHUNK_TEMPLATE: family/ref<N>/<term>_<mode>_<alpha><at_beta>/seeds<chunk>)."""
    family, reference, key, name = chunk.split("/")
    term, mode, alpha, *beta = key.split("_")
    return [family, reference.removeprefix("ref"), term, mode, alpha, f"_{beta[0]}" if beta else "", name.removeprefix("seeds")]


def job_flags(plan: Plan) -> list[str]:
    """The generator's, the z-free trainer's and every training job's flags of a plan: the params its jobs hold."""
    block = Wildcards(reference="0")
    names = ("family", "reference", "term", "mode", "alpha", "at_beta", "chunk")
    chunks = [Wildcards(zip(names, chunk_fields(path), strict=True)) for path in sorted(plan.chunks)]
    return [plan.data_flags(block), plan.zfree_flags(block), *(plan.chunk_flags(chunk) for chunk in chunks)]


def reversed_mappings(value):
    """`value` with every mapping's keys in reverse order, all the way down."""
    if isinstance(value, dict):
        return {key: reversed_mappings(item) for key, item in reversed(value.items())}
    return value


def plan_of(tmp_path, config: dict, name: str) -> Plan:
    """The plan of `config` as snakemake would load it from one file (`name`), its results folder tmp_path/results."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**config, "results": str(tmp_path / "results")}, sort_keys=False))
    loaded = yaml.safe_load(path.read_text())
    return Plan.load(loaded, WorkflowFiles([str(path)], [], None, SCHEMA, executes=False))


def test_settings_written_at_their_default_or_in_another_order_change_no_jobs_flags(tmp_path):
    """A job's flags are its params: snakemake reruns a job whose params changed, and everything after it. So a config
    that spells the same pilot otherwise (every mapping's keys in reverse order, a trainer setting and data.tasks
    written at their defaults) gives every job the flags it had."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    respelled = reversed_mappings(config)
    for spec in respelled["families"].values():
        spec["settings"] = {"stop_at_take_up": False, "batching": "random", **spec["settings"]}
    shipped, other = plan_of(tmp_path, config, "shipped.yaml"), plan_of(tmp_path, respelled, "respelled.yaml")
    assert list(other.config["data"]) != list(shipped.config["data"]) and job_flags(other) == job_flags(shipped)
    assert not any("--stop-at-take-up" in flags or "--batching" in flags for flags in job_flags(other))
    unset = {name: value for name, value in config["data"].items() if name != "tasks"}
    tasks = {order: {**config, "data": {**unset, "tasks": list(order)}} for order in (DEFAULT_TASKS, ("sort", "add", "count"))}
    assert job_flags(plan_of(tmp_path, tasks[DEFAULT_TASKS], "default.yaml"))[0] == cli_arguments(unset)
    assert "--tasks sort add count" in job_flags(plan_of(tmp_path, tasks["sort", "add", "count"], "other.yaml"))[0]  # draws otherwise


def test_the_plans_default_tasks_are_the_generators():
    from experiments.synthetic_sequences.generate import SequenceConfig

    assert SequenceConfig().tasks == DEFAULT_TASKS


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


RUN0 = ("families", "discrete", "runs", 0)


@pytest.mark.parametrize(
    "override, message",
    [
        ({(*RUN0, "modes"): ["Sum"]}, "'Sum' is not one of ['mean', 'sum']"),
        ({(*RUN0, "term"): "kl"}, "'kl' is not one of ['raw', 'dist', 'ex', 'tok', 'tokcc', 'tokinv', 'hybrid']"),
        ({(*RUN0, "alpha"): -1}, "-1 is less than the minimum of 0"),
        ({(*RUN0, "alpha"): 1}, "families.discrete: token_weight_alpha: 1.0 has no effect on term 'raw'"),
        ({("families", "discrete", "seeds"): []}, "families.discrete.seeds: at least one seed is needed"),
        (
            {("families", "discrete", "runs"): [{"term": "raw", "modes": ["mean", "sum"]}, {"term": "raw", "modes": ["sum"]}]},
            "duplicate run key discrete/ref0/raw_sum_0/seed0",
        ),
        ({("reference", "source"): "zfreee"}, "'zfreee' is not one of ['zfree', 'entangled']"),
        ({("data", "length_overlap"): 1.5}, "1.5 is greater than the maximum of 1"),
        ({("families", "discrete", "beta"): 1e308}, "1e+308 is greater than the maximum of 1000"),  # inf once balance multiplies it
        ({("zfree", "steps"): 0}, "0 is less than the minimum of 1"),
        ({("data", "min_size"): 6}, "data.min_size (6) must be <= data.max_size (3)"),
        ({("data", "tasks"): ["add", "multiply"]}, "'multiply' is not one of ['add', 'sort', 'count']"),
        ({("families", "discrete", "warm_start"): "yes"}, "'yes' is not of type 'boolean'"),
        # the trainer's own settings check, at parse time: no value becomes extra flags, no job fails on a type
        ({("families", "discrete", "settings", "device"): "cpu --seed 5 --steps 3"}, "device: 'cpu --seed 5 --steps 3' is not allowed"),
        ({("families", "discrete", "settings", "steps"): 10.7}, "steps: 10.7 is not allowed; it must be an integer"),
        ({("families", "discrete", "settings", "weight_decay"): -1}, "weight_decay: -1 is not allowed; it must be >= 0"),
        ({("families", "discrete", "settings", "device"): "tpu"}, "allowed values: cpu, auto, cuda, cuda:N, mps"),
        # checked before data generation and z-free training, naming the field
        ({("seeds",): [2**20]}, "seeds: 1048576 in [1048576] is outside 0..1048575"),
        ({("families", "discrete", "settings", "n_head"): 3}, "families.discrete: n_head: 3 does not divide d_model 64"),
        ({("zfree", "n_head"): 3}, "zfree.n_head: 3 does not divide d_model 64"),
        ({("families", "discrete-scale", "beta"): 0.5}, "families.discrete-scale: a scale control must equal its main family discrete"),
        ({("reference", "checkpoint"): "old/run.pt"}, "reference.checkpoint is read only with source: entangled"),
        ({("families", "f" * 65): {"model": "shared_discrete", "runs": [{"term": "raw", "modes": ["mean"]}]}}, "family names are 1-64"),
        # counts are true integers: JSON Schema alone takes 2.0
        ({("seeds",): 2.0}, "seeds = 2.0: a count must be a whole number"),
        ({("seeds_per_job",): 2.0}, "seeds_per_job = 2.0: a count must be a whole number"),
        (
            {("families", "discrete", "settings", "batch_size"): 5000},
            "families.discrete.settings.batch_size: 5000 is more than data.n_train (4000)",
        ),
        ({("zfree", "batch_size"): 5000}, "zfree.batch_size: 5000 is more than data.n_train (4000) records"),
        ({("zfree", "seed"): 1}, "zfree.seed: no longer read; the z-free seeds are the top-level `references:`"),
        ({("references",): [2, 2]}, "references: [2, 2] repeats 2; each z-free seed may appear once"),
        (
            {("reference", "source"): "entangled", ("reference", "checkpoint"): "old/run.pt", ("references",): 2},
            "but source: entangled has one checkpoint, so one block; set references: 1",
        ),
        # a sequential design that cannot run, refused before any job
        ({("design",): design_block((5, 2), (5, 2))}, "design.looks[1]: 5 references x 2 seeds does not grow from look 1's 5 x 2"),
        ({("design",): design_block((1, 1), (1, 2), (1, 3), maximum=2)}, "design.looks: 3 looks, but max_runs_per_arm 2 allows at most 2"),
        ({("design",): design_block((5, 2), (5, 6))}, "design.looks[1]: 30 runs per arm is more than max_runs_per_arm 20"),
        ({("design",): design_block((5, 2), (5, 4))}, "set references: 5 and seeds: 4, the most an arm trains"),
        ({("design",): {**design_block((5, 2), (5, 4)), "alpha_spending": "linear"}}, "'linear' is not one of ['obrien-fleming'"),
        # a declared primary endpoint: only onset besides take-up, not in a control family, not under a design
        ({("families", "discrete", "runs", 0, "primary"): "magnitude"}, "'magnitude' is not one of ['take-up', 'onset']"),
        (
            {("families", "discrete-scale", "runs", 0, "primary"): "onset"},
            "families.discrete-scale.runs[0].primary: a control family follows its main family's primary endpoint",
        ),
        (
            {
                ("families", "discrete", "runs", 0, "primary"): "onset",
                ("design",): design_block((5, 2), (5, 4)),
                ("references",): 5,
                ("seeds",): 4,
                ("seeds_per_job",): 2,
            },
            "families.discrete: raw alpha=0 declares primary: onset, but a sequential design steers on take-up only",
        ),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(tmp_path, override, message):
    with pytest.raises(Exception) as refused:  # the message names the field; the class is the checker's
        load(tmp_path, overridden(override))
    assert message in str(refused.value)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(("results", "message"), [("", "'' should be non-empty"), ("  ", "'  ' does not match")])
def test_an_empty_results_folder_is_refused(tmp_path, results, message):
    with pytest.raises(Exception) as refused:
        load(tmp_path, {"results": results}, results=None)
    assert message in str(refused.value) and "instance['results']" in str(refused.value)


@pytest.mark.parametrize(
    ("results", "message"),
    [("/", "is the filesystem root"), ("~/x", "starts with '~'"), ("res{x}", "holds '{' or '}'")],
)
def test_a_results_folder_the_workflow_cannot_own_is_refused(tmp_path, results, message):
    with pytest.raises(Exception) as refused:
        load(tmp_path, {"results": results}, results=None)
    assert f"results: {results!r} {message}" in str(refused.value)
    assert not (ROOT / "~").exists()


def test_a_key_written_twice_in_a_config_file_is_refused_naming_it_and_its_lines(tmp_path):
    text = (ROOT / "config" / "config.yaml").read_text()
    repeated = text + "\nzfree:\n  steps: 10\n"  # a second top-level zfree block: YAML would keep it silently
    (tmp_path / "config.yaml").write_text(repeated)
    line = next(i for i, entry in enumerate(text.splitlines(), 1) if entry.startswith("zfree:"))
    with pytest.raises(Exception) as refused:
        load_files(tmp_path, [str(tmp_path / "config.yaml")])
    assert f"key 'zfree' is written twice in one mapping (lines {line} and {len(text.splitlines()) + 2})" in str(refused.value)
