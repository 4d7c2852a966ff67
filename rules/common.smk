"""Helpers for every stage: paths under config['results'], the run grid, CLI flags, config checks."""

import json
import os
import shlex
from pathlib import Path
from types import SimpleNamespace

from core.disentanglement.checks import check_heads_divide_width
from core.disentanglement.config import AGGREGATION_MODES, OPTIMISABLE_TERMS
from core.disentanglement.cli import format_pairs
from core.disentanglement.registry import alternation
from experiments.synthetic_sequences.planning.grid import (
    FAMILY_PATTERN,
    cli_arguments,
    control_families,
    expand_grid,
    modes_used,
    references_used,
    resolve_references,
    resolve_seeds,
    training_seed,
)
from experiments.synthetic_sequences.planning.bindings import (
    GRID_FOLDER,
    block_input,
    grid_document,
    grid_file,
    tables_grid_file,
    write_grid,
)
from experiments.synthetic_sequences.planning.chunks import CHUNK_PATTERN, check_chunks_trained, chunk_grid, chunk_path, chunk_record
from experiments.synthetic_sequences.planning.data_draws import (
    SHARED_DRAW,
    block_draw,
    check_draws,
    check_draw_layout,
    draw_settings,
    data_artifact,
    format_data_summaries,
)
from experiments.synthetic_sequences.planning.design import parse_design
from experiments.synthetic_sequences.planning.endpoints import check_design_endpoints, declared_primary, format_primary
from experiments.synthetic_sequences.planning.design_record import check_design_fixed
from experiments.synthetic_sequences.planning.looks import arm_of, check_design_grid, look_specs, open_arms_of, trained_specs
from experiments.synthetic_sequences.planning.pairing import check_pairings
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand
from experiments.synthetic_sequences.planning.slurm_jobs import check_design_packing
from experiments.synthetic_sequences.run_layout import (
    CHUNK_TEMPLATE,
    LOOK_TEMPLATE,
    METRICS_TEMPLATE,
    REFERENCE_ARTIFACTS,
    REFERENCE_TEMPLATE,
    RUN_TEMPLATE,
    metrics_path,
    reference_artifact,
    run_directory,
)
from experiments.synthetic_sequences.splits import SCORED_SPLITS, SPLITS

TABLES = ("runs", "aggregate", "takeup", "mean_vs_sum", "confounds", "length_separation", "verdict", "cross_term")
BETA_CURVE_TABLES = ("beta_curves", "beta_curve_cells")  # with a beta axis (analysis/beta_curves.py)
TABLE_FORMATS = ("parquet", "csv", "md")
CURVE_FORMATS = ("parquet", "csv")  # one row per (run, step, metric): too long for Markdown
PLOTS = ("takeup", "separation", "latent_usage", "mean_vs_sum", "curves", "forest")
RUN = RUN_TEMPLATE  # a run directory under runs/, and its metrics file under metrics/ (run_layout)
CHUNK = CHUNK_TEMPLATE  # the seeds of one arm trained together (chunks.py), the record of a training job
BLOCK = REFERENCE_ARTIFACTS  # a reference block's z-free model, scores and c_base, by the {reference} wildcard
LOOK = LOOK_TEMPLATE  # a sequential design's look file, by the {look} wildcard (analysis/look_files.py)
# wildcard constraints from the registries: a new term or mode is one entry in core/disentanglement
TERM_PATTERN = alternation(OPTIMISABLE_TERMS)
MODE_PATTERN = alternation(AGGREGATION_MODES)


# every rule's run wildcards: a path that is not a run of the grid's shape matches no rule
wildcard_constraints:
    family=FAMILY_PATTERN,
    reference=r"[0-9]+",
    term=TERM_PATTERN,
    mode=MODE_PATTERN,
    alpha=r"[0-9]+(\.[0-9]+)?",
    at_beta=r"(_b[0-9]+(\.[0-9]+)?)?",  # empty off a beta axis (run_layout.KEY_TEMPLATE)
    seed=r"[0-9]+",
    chunk=CHUNK_PATTERN,
    look=r"[1-9][0-9]*",
    digest=r"[0-9a-f]{16}",



def check_config():
    """Cross-field rules a JSON schema cannot state; called once at parse time, before any job runs."""
    data = config["data"]
    if data["min_size"] > data["max_size"]:
        raise ValueError(
            f"data.min_size ({data['min_size']}) must be <= data.max_size ({data['max_size']})"
        )
    try:
        check_heads_divide_width(SimpleNamespace(**config["zfree"]))
    except ValueError as err:
        raise ValueError(f"zfree.{err}") from None
    reference = config["reference"]
    if reference["source"] != "entangled" and "checkpoint" in reference:
        raise ValueError(
            f"reference.checkpoint is read only with source: entangled (source is {reference['source']!r}); "
            "remove it or set source: entangled"
        )
    if reference["source"] == "entangled" and per_block_data():
        raise ValueError(
            "data.per_block: true draws each block its own records, but source: entangled has one checkpoint, trained on "
            "one draw; set data.per_block: false or source: zfree"
        )
    if reference["source"] == "entangled" and len(references()) != 1:
        raise ValueError(
            f"references: {config['references']!r} asks for {len(references())} reference blocks, but source: entangled "
            "has one checkpoint, so one block; set references: 1"
        )
    check_results_folder(config["results"])


def check_results_on_disk():
    """What the folder already holds, checked before any job: its data draws are the config's (not switched between one
    shared draw and one per block, not edited or swapped: data_draws.check_draws), and every chunk record's runs are
    there (chunks.check_chunks_trained). Each refusal's advice ends with this pilot's own command line."""
    pilot = pilot_command()
    check_draw_layout(config["results"], per_block_data(), pilot)
    check_draws(config["results"], config["data"], per_block_data(), references(), pilot)
    check_chunks_trained(config["results"], CHUNKS, pilot)


def check_results_folder(folder):
    """A results folder the workflow can own: not the filesystem root, no '~' (no shell expands it here), no wildcard braces."""
    if os.path.abspath(folder) == "/":
        raise ValueError(f"results: {folder!r} is the filesystem root; give a folder of its own")
    if folder.startswith("~"):
        raise ValueError(f"results: {folder!r} starts with '~', which is not expanded here; write the path out")
    if "{" in folder or "}" in folder:
        raise ValueError(f"results: {folder!r} holds '{{' or '}}', which snakemake reads as wildcards; rename the folder")


def run_grid():
    """Every run of the config by its run path; expand_grid refuses an ill-formed family, and check_pairings a control
    family that is not its main family with one factor changed, naming them, before any job runs."""
    specs = expand_grid(config["families"], config.get("seeds"), config.get("references"))
    check_pairings(config["families"], config.get("seeds"))
    declared_primary(config["families"])  # refuses an endpoint it does not know, or one declared in a control family
    check_batch_sizes(specs)
    return {spec.path: spec for spec in specs}


def check_batch_sizes(specs):
    """A batch cannot hold more records than the train split has: refused rather than silently cut to n_train, which
    run_config.json would not record."""
    n_train = config["data"]["n_train"]
    if config["zfree"]["batch_size"] > n_train:
        raise ValueError(f"zfree.batch_size: {config['zfree']['batch_size']} is more than data.n_train ({n_train}) records")
    for family in sorted({spec.family for spec in specs}):
        batch_size = next(spec for spec in specs if spec.family == family).train_config().optim.batch_size
        if batch_size > n_train:
            raise ValueError(
                f"families.{family}.settings.batch_size: {batch_size} is more than data.n_train ({n_train}) records; "
                "a batch draws each record once"
            )


def results(path):
    return f"{config['results']}/{path}"


def cli_flags(section):
    """--key value for every entry of a config section, in the module CLIs' spelling."""
    return cli_arguments(config[section])


def output_folder(wildcards, output):
    """The folder of a rule's first output (a run directory, results/data, results/tables, ...)."""
    return os.path.dirname(output[0])


def per_block_data():
    """Whether each reference block draws its own records (data.per_block; planning/data_draws.py)."""
    return config["data"].get("per_block", False)


def data_file(name, reference="{reference}", **fields):
    """Block `reference`'s records or summary: the shared draw's, or, with a draw per block, the block's own (a rule's
    path keeps {reference} a wildcard)."""
    return results(data_artifact(name, per_block_data(), reference, **fields))


def data_flags(wildcards):
    """The generator's settings; with a draw per block, the block's own data seed (data_draws.draw_settings)."""
    return cli_arguments(draw_settings(config["data"], per_block_data(), int(wildcards.reference) if per_block_data() else 0))


def draw_log(folder, extension):
    """A data job's log or benchmark file: one per block where each block draws its own records."""
    if per_block_data():
        return results(f"{folder}/synthetic_sequences/{REFERENCE_TEMPLATE}.{extension}")
    return results(f"{folder}/synthetic_sequences.{extension}")


def references():
    """The reference blocks by their z-free seeds (grid.resolve_references)."""
    return resolve_references(config.get("references"))


def zfree_checkpoint(reference):
    """A block's frozen model, which scores its records and warm-starts its decoders: trained here with z-free seed
    `reference`, or an existing entangled run's checkpoint (one block)."""
    if config["reference"]["source"] == "entangled":
        return config["reference"]["checkpoint"]
    return results(reference_artifact("checkpoint", reference))


def block_file(name, **fields):
    """A reference block's artifact as a rule's path: {reference} left a wildcard, the other fields as given."""
    return results(reference_artifact(name, "{reference}", **fields))


def block_checkpoint(wildcards):
    return zfree_checkpoint(int(wildcards.reference))


def zfree_flags(wildcards):
    """The z-free trainer's settings, its seed the block's."""
    return f"{cli_flags('zfree')} --seed {int(wildcards.reference)}"


def reference_artifacts(wildcards):
    """The c_base artifacts of the blocks the tables read."""
    blocks = references_used(tables_grid())
    return [results(reference_artifact("scale", reference, mode=mode)) for reference in blocks for mode in modes_used(GRID.values())]


def seeds_per_job():
    return config.get("seeds_per_job", 1)


def chunk_training():
    """How a training job trains its chunk's seeds: lockstep or sequential (cvae_run.train)."""
    return config.get("chunk_training", "lockstep")


def chunk_runs(wildcards):
    """The runs of a training job's chunk, in seed order."""
    path = CHUNK.format(**wildcards)
    if path not in CHUNKS:
        raise ValueError(f"chunk {path} is not in the config's grid at seeds_per_job {seeds_per_job()}")
    return CHUNKS[path]


def chunk_flags(wildcards):
    """--seed and --run-dir of a chunk's runs, pairwise: each run's trainer seed (grid.training_seed)."""
    runs = chunk_runs(wildcards)
    folders = [shlex.quote(run_directory(config["results"], spec.path)) for spec in runs]
    return f"--seed {' '.join(str(training_seed(spec.reference, spec.seed)) for spec in runs)} --run-dir {' '.join(folders)}"


def run_chunk(wildcards):
    """The record of the chunk a run trained in: what extract_metrics waits for."""
    spec = GRID.get(RUN.format(**wildcards))
    if spec is None:
        raise ValueError(f"run {RUN.format(**wildcards)} is not in the config's grid")
    return chunk_record(config["results"], chunk_path(spec, seeds_per_job()))


def run_folder(wildcards):
    return run_directory(config["results"], RUN.format(**wildcards))


def family_settings(wildcards):
    """The settings a chunk's family fixes, as the one shell-quoted JSON object of the trainer's --settings; the run
    key's parts come from the wildcards."""
    spec = chunk_runs(wildcards)[0]
    settings = {**spec.family_arguments(), "zfree_seed": spec.reference}
    if train_gpus(wildcards) > 0:
        settings.setdefault("device", "auto")
    if spec.warm_start:
        settings["init_decoder"] = zfree_checkpoint(spec.reference)
    return shlex.quote(json.dumps(settings))


def warm_start_checkpoint(wildcards):
    """The z-free checkpoint of the chunk's own block that a warm-started family's decoder starts from (families with
    warm_start: true), else nothing."""
    spec = chunk_runs(wildcards)[0]
    return [zfree_checkpoint(spec.reference)] if spec.warm_start else []


def train_resource(name, default):
    return config.get("resources", {}).get("train_run", {}).get(name, default)


def train_gpus(wildcards):
    """GPUs of a training job: the family's `gpus`, else resources.train_run.gpus (0: CPU)."""
    return config["families"][wildcards.family].get("gpus", train_resource("gpus", 0))


def run_metrics(wildcards):
    return [metrics_path(config["results"], spec.path) for spec in tables_grid()]


def current_inputs():
    """{name: path} of the inputs every run the tables read must have been trained on, each block's its own
    (bindings.block_input): aggregate_tables holds each run's recorded sha256 to those of its block (bindings.check_inputs)."""
    blocks = references_used(tables_grid())
    if per_block_data():
        inputs = {block_input(block, f"{split}_records"): data_file("records", block, split=split) for block in blocks for split in SPLITS}
    else:
        inputs = {f"{split}_records": data_file("records", split=split) for split in SPLITS}
    for reference in blocks:
        inputs |= {
            block_input(reference, f"{split}_scores"): results(reference_artifact("scores", reference, split=split))
            for split in SCORED_SPLITS
        }
        inputs |= {
            block_input(reference, f"reference_{mode}"): results(reference_artifact("scale", reference, mode=mode))
            for mode in modes_used(GRID.values())
        }
        if any(spec.warm_start for spec in GRID.values()):
            inputs[block_input(reference, "init_decoder")] = zfree_checkpoint(reference)
    return inputs


def data_summaries():
    """{draw: summary} of the draws the tables read: the one shared draw, or each of the tables' blocks' own."""
    if not per_block_data():
        return {SHARED_DRAW: data_file("summary")}
    return {block_draw(block): data_file("summary", block) for block in references_used(tables_grid())}


def data_summary_files(wildcards):
    return list(data_summaries().values())


def data_summary_flags(wildcards):
    return " ".join(shlex.quote(text) for text in format_data_summaries(data_summaries()))


def current_input_files(wildcards):
    return list(current_inputs().values())


def input_flags(wildcards):
    return " ".join(f"--input {shlex.quote(f'{name}={path}')}" for name, path in current_inputs().items())


def pilot_command():
    """This pilot's own command line (planning/pilot_command.py): what every command the pipeline prints repeats."""
    return PilotCommand.of_workflow(workflow.config_settings.configfiles, workflow.config_settings.config_args)


def pilot_flags():
    """The tables' --pilot-configfile / --pilot-config: the verdict's suggested commands and the tables' refusals repeat them."""
    return pilot_command().flags()


def control_pairs():
    """--control-of of the tables and plots: control_family=main_family,..."""
    return format_pairs(control_families(config["families"]))


def primary_flag():
    """--primary of the tables: the (family, term, alpha) read on a declared primary endpoint other than take-up."""
    return shlex.quote(format_primary(declared_primary(config["families"])))


def beta_axis():
    """Whether a run of the grid lies on a beta axis (a family's or run entry's `betas:`)."""
    return any(spec.beta_axis for spec in GRID.values())


def table_files():
    names = TABLES + (BETA_CURVE_TABLES if beta_axis() else ())
    tables = expand(results("tables/{table}.{ext}"), table=names, ext=TABLE_FORMATS)
    return tables + expand(results("tables/curves.{ext}"), ext=CURVE_FORMATS)


def reported_table_files():
    """The table files: the verdict and the CSVs flagged for `snakemake --report` (CSVs render there as sortable tables)."""
    return [reported(t) if t.endswith((".csv", "verdict.md")) else t for t in table_files()]


# `snakemake --report`: the files read first, under Verdict, each with its own caption (report/, relative to rules/)
KEY_REPORTS = {
    "verdict.md": ("verdict.rst", "1. verdict"),
    "verdict.csv": ("verdict.rst", "1. verdict"),
    "forest.png": ("forest.rst", "2. cross-term"),
    "cross_term.csv": ("cross_term.rst", "2. cross-term"),
    "takeup.png": ("takeup.rst", "3. take-up"),
    "beta_curves.png": ("beta_curves.rst", "4. take-up over beta"),
    "beta_curves.csv": ("beta_curves.rst", "4. take-up over beta"),
}


def reported(path):
    """`path` flagged for the report with its caption: a key file's own (KEY_REPORTS), else its kind's (Tables, Plots)."""
    name = os.path.basename(path)
    if name in KEY_REPORTS:
        caption, subcategory = KEY_REPORTS[name]
        category = "Verdict"
    else:
        caption, category, subcategory = ("plots.rst", "Plots", None) if name.endswith(".png") else ("tables.rst", "Tables", None)
    # one line: snakemake's parser reads a line that starts with `report(` as the report: keyword
    return report(path, caption=f"../report/{caption}", category=category, subcategory=subcategory)


def plot_files():
    return expand(results("plots/{plot}.png"), plot=PLOTS)


def reported_plot_files():
    return [reported(path) for path in plot_files()]


def beta_curve_plot_files():
    """beta_curves.png, with a beta axis (analysis/beta_curve_plot.py)."""
    return [results("plots/beta_curves.png")] if beta_axis() else []


# --- a sequential design (planning/design.py, planning/looks.py, analysis/look_files.py) -----------------------------


def config_design():
    """The config's design, None for the fixed one. A sequential design is checked at parse time: against the grid,
    for looks that can decide nothing, against the design its results folder was first read under (planning/design_record.py),
    and so is every look file already on disk (analysis/look_files.verified_look), in order, while looks stay open."""
    design = parse_design(config.get("design"))
    if design is not None:
        from experiments.synthetic_sequences.analysis.sequential import check_decidable

        check_design_grid(design, references(), top_seeds(), config["families"], seeds_per_job())
        check_design_endpoints(declared_primary(config["families"]))
        check_decidable(design, arm_groups().values())
        check_design_fixed(config["results"], design, config.get("design_reset", False), pilot_command())
        previous = None
        for look in design.looks:
            if not os.path.exists(look_file(look.number)) or (previous is not None and not open_arms_of(previous)):
                break
            previous = verified_look_file(design, look.number, previous)
    return design


def arm_groups():
    """{(main family, term, alpha): the names of its arms} of the grid (looks.arm_of)."""
    groups = {}
    for spec in GRID.values():
        group, arm = arm_of(spec, control_families(config["families"]))
        groups.setdefault(group, set()).add(arm)
    return groups


VERIFIED_LOOKS = {}  # (look, its file's mtime, the seal of the look before): its document, checked once per state


def verified_look_file(design, look, previous):
    """Look `look`'s file, verified (analysis/look_files.verified_look) against the look before and the runs the config
    assigns to it; a metrics file still to be extracted is passed over, and the job that reads the look checks it whole."""
    from experiments.synthetic_sequences.analysis.look_files import verified_look

    path = look_file(look)
    key = (look, os.stat(path).st_mtime_ns, previous["sha256"] if previous else None)
    if key not in VERIFIED_LOOKS:
        control_of = control_families(config["families"])
        opened = open_arms_of(previous) if previous else None
        expected = [spec.path for spec in look_specs(GRID.values(), control_of, references(), top_seeds(), design.looks[look - 1], opened)]
        VERIFIED_LOOKS[key] = verified_look(path, design, control_of, previous, expected, require_runs=False, pilot=pilot_command())
    return VERIFIED_LOOKS[key]


def top_seeds():
    return resolve_seeds(config.get("seeds"), "seeds")


def design_flag():
    return shlex.quote(json.dumps(config.get("design") or {}))  # the rule runs only under a sequential design


def look_file(look):
    return results(LOOK.format(look=look))


def read_look_checkpoint(look):
    """Look `look`'s file, verified (verified_look_file), once its checkpoint has run: snakemake runs it first."""
    checkpoints.design_look.get(look=look)
    return verified_look_file(DESIGN, look, read_look_checkpoint(look - 1) if look > 1 else None)


def look_metrics(wildcards):
    """The metrics files look {look} reads: every arm's at look 1, the arms the look before left open after it."""
    look = int(wildcards.look)
    if DESIGN is None or look > len(DESIGN.looks):
        raise ValueError(f"look {look}: the config's design has {len(DESIGN.looks) if DESIGN else 0} looks")
    opened = open_arms_of(read_look_checkpoint(look - 1)) if look > 1 else None
    specs = look_specs(GRID.values(), control_families(config["families"]), references(), top_seeds(), DESIGN.looks[look - 1], opened)
    return [metrics_path(config["results"], spec.path) for spec in specs]


def previous_look(wildcards):
    """Every look file before look {look}, in order: the look verifies them as a chain."""
    return [look_file(look) for look in range(1, int(wildcards.look))]


def reset_flag():
    return "--design-reset" if config.get("design_reset", False) else ""


def looks_reached():
    """The look files of every look the design has reached, in order: it stops at the last look or at one that
    leaves no contrast open."""
    documents = []
    for look in DESIGN.looks:
        documents.append(read_look_checkpoint(look.number))
        if not open_arms_of(documents[-1]):
            break
    return documents


def design_look_files(wildcards):
    return [] if DESIGN is None else [look_file(document["look"]) for document in looks_reached()]


def trained_by(documents):
    return trained_specs(GRID.values(), control_families(config["families"]), references(), top_seeds(), DESIGN, documents)


def tables_grid():
    """The runs the tables read: every run of the grid, or under a sequential design those its looks trained."""
    return list(GRID.values()) if DESIGN is None else trained_by(looks_reached())


def write_grid_record(path, log):
    """The record of the runs the tables read: the fixed grid's document (built and checked at parse time), or that of
    the runs the looks trained, read from the verified look files. write_grid refuses a document that is not the one
    the record's name asks for."""
    document = GRID_DOCUMENT if DESIGN is None else grid_document(tables_grid())
    write_grid(document, path)
    Path(log).write_text(f"{path}: the record of {len(document['runs'])} runs\n")


def grid_record_pattern():
    """What the record_grid job writes: the fixed grid's one record (`snakemake record_grid` writes it alone), or under a
    sequential design any record, named by the runs its looks trained."""
    return GRID_RECORD if DESIGN is None else results(f"{GRID_FOLDER}/{{digest}}.json")


def grid_record(wildcards):
    """The record of the runs the tables read, named by its content (bindings.grid_file)."""
    return GRID_RECORD if DESIGN is None else results(grid_file(grid_document(tables_grid())))


def tables_grid_copy():
    """The tables' copy of their grid record: named as the record under the fixed design (a new grid, a new name);
    under a sequential design the look files, inputs of the tables, stand for the changes."""
    return results(f"tables/{tables_grid_file(GRID_RECORD if DESIGN is None else 'design.json')}")
