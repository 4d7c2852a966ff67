"""The plan: one validated config and everything the rules ask of it.

    PLAN = Plan.load(config, WorkflowFiles(...))    in the Snakefile, once, before any stage is included

Plan.load runs every config check once, in order (config_files.check_loaded), then builds the run grid, its chunks
and the sequential design's looks (sequential/stage.Looks), or a curve design's stages (sequential/curve_stages.py).
Each stage's rules call its methods: paths (a rule's output or input pattern), input functions and params (wildcards
-> paths or flags). Nothing here reads a global: what snakemake knows of the command line comes in as WorkflowFiles,
and a look's checkpoint as a callable (await_look(look): wait for its job; await_look(look, again=True): its file on disk
is stale, wait for its job to make it again). No torch or pandas."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.disentanglement.cli import cli_arguments
from experiments.synthetic_sequences.planning.bindings import (
    grid_document,
    grid_file,
)
from experiments.synthetic_sequences.planning.chunks import check_chunks_trained, chunk_grid, chunk_record
from experiments.synthetic_sequences.planning.config_checks import check_batch_sizes, check_cross_fields, check_loaded
from experiments.synthetic_sequences.planning.data_draws import (
    check_draw_layout,
    check_draws,
    data_artifact,
    draw_settings,
)
from experiments.synthetic_sequences.planning.endpoints import declared_primary
from experiments.synthetic_sequences.planning.grid import (
    blocks_used,
    expand_grid,
    modes_used,
    resolve_blocks,
    training_seed,
)
from experiments.synthetic_sequences.planning.pairing import check_pairings
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand
from experiments.synthetic_sequences.planning.plan_tables import TablesStage
from experiments.synthetic_sequences.planning.results_lock import check_free
from experiments.synthetic_sequences.run_layout import (
    CHUNK_TEMPLATE,
    REFERENCE_TEMPLATE,
    RUN_TEMPLATE,
    reference_artifact,
    run_directory,
)
from experiments.synthetic_sequences.sequential.curve_design import CURVE, curve_design_of
from experiments.synthetic_sequences.sequential.stage import TRAIN_GROUP, Looks


@dataclass(frozen=True)
class WorkflowFiles:
    """What snakemake knows of the command line that the plan needs: the config files in the order it loaded them,
    the command line's own --configfile files and --config settings, and the config schema."""

    loaded: Sequence[str]
    command_line: Sequence[str]
    settings: Sequence[str] | None
    schema: str
    executes: bool  # the main process of a run that executes jobs (not a dry run, not a job's own parse)


class Plan(TablesStage):
    """The grid, its chunks and the design of one validated config, and every path, input and flag the rules ask."""

    def __init__(self, config: dict, pilot: PilotCommand, await_look: Callable[..., object] | None = None):
        """The plan of a config that passed check_loaded and check_cross_fields: its grid (each family checked as it
        expands, each control against its main family), its chunks, its grid record and its design."""
        self.config, self.pilot = config, pilot
        curve = curve_design_of(config)  # a curve design trains stage 1 first: its grid grows with its looks
        if curve is None:
            specs = expand_grid(config["families"], config.get("seeds"), config.get("references"))
        else:
            from experiments.synthetic_sequences.sequential.curve_stages import first_stage_specs

            specs = first_stage_specs(config, curve)
        check_pairings(config["families"], config.get("seeds"))
        declared_primary(config["families"])  # refuses an endpoint it does not know, or one declared in a control family
        check_batch_sizes(config, specs)
        self.grid = {spec.path: spec for spec in specs}
        self.chunks = chunk_grid(self.grid.values(), self.seeds_per_job())  # the training jobs
        # the record of what the tables may read, named by its content: rule record_grid writes it (a dry run writes nothing)
        self.grid_document = grid_document(self.grid.values())
        self.grid_record = self.results(grid_file(self.grid_document))
        if curve is None:
            self.looks = Looks.of_config(self, await_look)  # None: the fixed design
        else:
            from experiments.synthetic_sequences.sequential.curve_stages import CurveStages

            self.looks = CurveStages.of_config(self, curve, await_look)

    def set_runs(self, specs: list) -> None:
        """A curve design's runs of every stage placed so far: the grid and its chunks (sequential/curve_stages.py)."""
        self.grid = {spec.path: spec for spec in specs}
        self.chunks = chunk_grid(self.grid.values(), self.seeds_per_job())

    @classmethod
    def load(cls, config: dict, files: WorkflowFiles, await_look: Callable[..., object] | None = None) -> Plan:
        """Every config check, in order, then the plan; refusals name the field, before any job runs. A run that will
        execute jobs first finds its results folder free (results_lock.check_free), before its looks are read."""
        check_loaded(config, files.loaded, files.command_line, files.schema)
        check_cross_fields(config, resolve_blocks(config.get("references")))
        if files.executes:
            check_free(config["results"])
        return cls(config, PilotCommand.of_workflow(files.command_line, files.settings), await_look)

    # --- the results folder ------------------------------------------------------------------------------------------

    def results(self, path: str) -> str:
        return f"{self.config['results']}/{path}"

    def check_on_disk(self) -> None:
        """What the folder already holds, checked before any job: its data draws are the config's (not switched between
        one shared draw and one per block, not edited or swapped: data_draws.check_draws), and every chunk record's runs
        are there (chunks.check_chunks_trained). Each refusal's advice ends with this pilot's own command line."""
        check_draw_layout(self.config["results"], self.per_block_data(), self.pilot)
        check_draws(self.config["results"], self.config["data"], self.per_block_data(), self.blocks(), self.pilot)
        check_chunks_trained(self.config["results"], self.chunks, self.pilot)

    @staticmethod
    def output_folder(wildcards, output) -> str:
        """The folder of a rule's first output (a run directory, results/data, results/tables, ...)."""
        return os.path.dirname(output[0])

    # --- data ----------------------------------------------------------------------------------------------------------

    def per_block_data(self) -> bool:
        """Whether each reference block draws its own records (data.per_block; planning/data_draws.py)."""
        return self.config["data"].get("per_block", False)

    def data_file(self, name: str, block: int | str = "{reference}", **fields) -> str:
        """A block's records or summary: the shared draw's, or, with a draw per block, the block's own (a rule's path
        keeps {reference} a wildcard)."""
        return self.results(data_artifact(name, self.per_block_data(), block, **fields))

    def data_flags(self, wildcards) -> str:
        """The generator's settings; with a draw per block, the block's own data seed (data_draws.draw_settings)."""
        block = int(wildcards.reference) if self.per_block_data() else 0
        return cli_arguments(draw_settings(self.config["data"], self.per_block_data(), block))

    def draw_log(self, folder: str, extension: str) -> str:
        """A data job's log or benchmark file: one per block where each block draws its own records."""
        if self.per_block_data():
            return self.results(f"{folder}/synthetic_sequences/{REFERENCE_TEMPLATE}.{extension}")
        return self.results(f"{folder}/synthetic_sequences.{extension}")

    # --- reference blocks ----------------------------------------------------------------------------------------------

    def blocks(self) -> list[int]:
        """The reference blocks by their z-free seeds (grid.resolve_blocks)."""
        return resolve_blocks(self.config.get("references"))

    def zfree_checkpoint(self, block: int) -> str:
        """A block's frozen model, which scores its records and warm-starts its decoders: trained here with z-free seed
        `block`, or an existing entangled run's checkpoint (one block): the config's `reference.source`."""
        if self.config["reference"]["source"] == "entangled":
            return self.config["reference"]["checkpoint"]
        return self.results(reference_artifact("checkpoint", block))

    def block_file(self, name: str, **fields) -> str:
        """A reference block's artifact as a rule's path: {reference} left a wildcard, the other fields as given."""
        return self.results(reference_artifact(name, "{reference}", **fields))

    def block_checkpoint(self, wildcards) -> str:
        return self.zfree_checkpoint(int(wildcards.reference))

    def zfree_flags(self, wildcards) -> str:
        """The z-free trainer's settings, its seed the block's."""
        return f"{cli_arguments(self.config['zfree'])} --seed {int(wildcards.reference)}"

    def scale_files(self, wildcards) -> list[str]:
        """The c_base artifacts of the blocks the tables read."""
        blocks, modes = blocks_used(self.tables_grid()), modes_used(self.grid.values())
        return [self.results(reference_artifact("scale", block, mode=mode)) for block in blocks for mode in modes]

    # --- training ------------------------------------------------------------------------------------------------------

    def seeds_per_job(self) -> int:
        return self.config.get("seeds_per_job", 1)

    def chunk_training(self) -> str:
        """How a training job trains its chunk's seeds: lockstep or sequential (cvae_run.train)."""
        return self.config.get("chunk_training", "lockstep")

    def chunk_runs(self, wildcards) -> list:
        """The runs of a training job's chunk, in seed order."""
        path = CHUNK_TEMPLATE.format(**wildcards)
        if path not in self.chunks:
            raise ValueError(f"chunk {path} is not in the config's grid at seeds_per_job {self.seeds_per_job()}")
        return self.chunks[path]

    def chunk_flags(self, wildcards) -> str:
        """The trainer's flags for a chunk, its one input besides its files: the settings its runs share
        (RunSpec.trainer_settings: the key's term, mode and alpha, the block, the family's settings; on a GPU the
        device, with a warm start the decoder's checkpoint), then --seed and --run-dir of its runs, pairwise (each
        run's trainer seed: grid.training_seed)."""
        runs = self.chunk_runs(wildcards)
        settings = runs[0].trainer_settings()
        if self.train_gpus(wildcards) > 0:
            settings.setdefault("device", "auto")
        if warm_start := self.warm_start_checkpoint(wildcards):
            (settings["init_decoder"],) = warm_start
        settings["seed"] = [training_seed(spec.block, spec.seed) for spec in runs]
        settings["run_dir"] = [run_directory(self.config["results"], spec.path) for spec in runs]
        return cli_arguments(settings)

    def run_chunk(self, wildcards) -> str:
        """The record of the chunk a run trained in: what extract_metrics waits for."""
        spec = self.grid.get(RUN_TEMPLATE.format(**wildcards))
        if spec is None:
            raise ValueError(f"run {RUN_TEMPLATE.format(**wildcards)} is not in the config's grid")
        return chunk_record(self.config["results"], spec.chunk_path(self.seeds_per_job()))

    def run_folder(self, wildcards) -> str:
        return run_directory(self.config["results"], RUN_TEMPLATE.format(**wildcards))

    def warm_start_checkpoint(self, wildcards) -> list[str]:
        """The z-free checkpoint of the chunk's own block that a warm-started family's decoder starts from (families with
        warm_start: true), else nothing."""
        spec = self.chunk_runs(wildcards)[0]
        return [self.zfree_checkpoint(spec.block)] if spec.warm_start else []

    def train_group(self) -> str | None:
        """The training jobs' snakemake group, which a profile's group-components packs into Slurm jobs: TRAIN_GROUP
        under the fixed design, none under a design with looks (sequential/stage.TRAIN_GROUP)."""
        return TRAIN_GROUP if self.looks is None else None

    def train_resource(self, name: str, default):
        return self.config.get("resources", {}).get("train_run", {}).get(name, default)

    def train_gpus(self, wildcards) -> int:
        """GPUs of a training job: the family's `gpus`, else resources.train_run.gpus (0: CPU)."""
        return self.config["families"][wildcards.family].get("gpus", self.train_resource("gpus", 0))

    # --- a design's look job (rules/design.smk) -------------------------------------------------------------------------

    def look_module(self) -> str:
        """The look job's module: a curve design's (sequential/curve_looks.py) or a contrast design's (look_files.py)."""
        return f"experiments.synthetic_sequences.sequential.{'curve_looks' if self.curve_design() else 'look_files'}"

    def curve_design(self) -> bool:
        return self.looks is not None and self.looks.kind == CURVE

    def design_flags(self) -> str:
        """The look job's design flags: a curve design as its look files record it and its curves' spans; a contrast
        design's config block, its control pairs and whether it may follow another design. The rule runs only under a
        sequential or curve design."""
        if self.curve_design():
            flags = f"--design {shlex.quote(self.looks.record_flag())} --spans {shlex.quote(self.looks.spans_flag())}"
        else:
            flags = f"--design {shlex.quote(json.dumps(self.config.get('design') or {}))} --control-of={shlex.quote(self.control_pairs())}"
        return flags + (" --design-reset" if self.config.get("design_reset", False) else "")
