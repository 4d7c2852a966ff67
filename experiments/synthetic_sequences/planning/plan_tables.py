"""The plan's part for the tables stage (rules/tables.smk, the targets, a sequential design's look files): which runs
the tables read, the inputs those runs must have been trained on, the files the tables and plots write, and the
grid's record. A mixin of plan.Plan, whose grid, looks and paths it reads.
"""

from __future__ import annotations

import shlex

from core.disentanglement.cli import format_pairs
from experiments.synthetic_sequences.arms import main_family
from experiments.synthetic_sequences.planning.bindings import (
    GRID_FOLDER,
    block_input,
    grid_document,
    grid_file,
    tables_grid_file,
    write_grid,
)
from experiments.synthetic_sequences.planning.data_draws import SHARED_DRAW, block_draw, format_data_summaries
from experiments.synthetic_sequences.planning.endpoints import declared_primary, format_primary
from experiments.synthetic_sequences.planning.grid import blocks_used, control_families, modes_used
from experiments.synthetic_sequences.run_layout import LOOK_TEMPLATE, metrics_path, reference_artifact
from experiments.synthetic_sequences.splits import SCORED_SPLITS, SPLITS

TABLES = ("runs", "aggregate", "takeup", "mean_vs_sum", "confounds", "length_separation", "verdict", "cross_term")
BETA_CURVE_TABLES = ("beta_curves", "beta_curve_cells")  # with a beta axis (analysis/statistics/beta_curves.py)
TABLE_FORMATS = ("parquet", "csv", "md")
CURVE_FORMATS = ("parquet", "csv")  # one row per (run, step, metric): too long for Markdown
PLOTS = ("takeup", "separation", "latent_usage", "mean_vs_sum", "curves", "forest")
# On a beta axis these grow a row of panels per beta: each is drawn one file per (main family, term) instead
# (analysis/report/plots.py), so that every file opens at 100% and stays small.
TERM_PLOTS = ("takeup", "curves")
# one run's metrics file, as rule extract_metrics writes it and a refusal advises re-extracting it (records/metrics_files.py)
EXTRACT_METRICS = "python -m experiments.synthetic_sequences.analysis.records.metrics_files --run-dir {run_dir} --out {out}"


def plot_names(terms: list[tuple[str, str]] | None = None) -> list[str]:
    """The figures' file names (no extension): PLOTS, or on a beta axis, `terms` being its (main family, term) pairs,
    the TERM_PLOTS one per pair as `<plot>_<family>_<term>` (a family name holds no '_': grid.FAMILY_PATTERN)."""
    if terms is None:
        return list(PLOTS)
    split = [f"{plot}_{family}_{term}" for plot in TERM_PLOTS for family, term in terms]
    return [plot for plot in PLOTS if plot not in TERM_PLOTS] + split


class TablesStage:
    """What the tables, the plots and the targets ask of the plan."""

    # --- the tables ----------------------------------------------------------------------------------------------------

    def tables_grid(self) -> list:
        """The runs the tables read: every run of the grid, or under a sequential design those its looks trained."""
        return list(self.grid.values()) if self.looks is None else self.looks.trained()

    def run_metrics(self, wildcards=None) -> list[str]:
        return [metrics_path(self.config["results"], spec.path) for spec in self.tables_grid()]

    def current_inputs(self) -> dict[str, str]:
        """{name: path} of the inputs every run the tables read must have been trained on, each block's its own
        (bindings.block_input): aggregate_tables holds each run's recorded sha256 to those of its block (bindings.check_inputs)."""
        blocks = blocks_used(self.tables_grid())
        if self.per_block_data():
            records = {(block, split): block_input(block, f"{split}_records") for block in blocks for split in SPLITS}
            inputs = {name: self.data_file("records", block, split=split) for (block, split), name in records.items()}
        else:
            inputs = {f"{split}_records": self.data_file("records", split=split) for split in SPLITS}
        for block in blocks:
            inputs |= {
                block_input(block, f"{split}_scores"): self.results(reference_artifact("scores", block, split=split))
                for split in SCORED_SPLITS
            }
            inputs |= {
                block_input(block, f"reference_{mode}"): self.results(reference_artifact("scale", block, mode=mode))
                for mode in modes_used(self.grid.values())
            }
            if any(spec.warm_start for spec in self.grid.values()):
                inputs[block_input(block, "init_decoder")] = self.zfree_checkpoint(block)
        return inputs

    def current_input_files(self, wildcards) -> list[str]:
        return list(self.current_inputs().values())

    def input_flags(self, wildcards) -> str:
        return " ".join(f"--input {shlex.quote(f'{name}={path}')}" for name, path in self.current_inputs().items())

    def data_summaries(self) -> dict[str, str]:
        """{draw: summary} of the draws the tables read: the one shared draw, or each of the tables' blocks' own."""
        if not self.per_block_data():
            return {SHARED_DRAW: self.data_file("summary")}
        return {block_draw(block): self.data_file("summary", block) for block in blocks_used(self.tables_grid())}

    def data_summary_files(self, wildcards) -> list[str]:
        return list(self.data_summaries().values())

    def data_summary_flags(self, wildcards) -> str:
        return " ".join(shlex.quote(text) for text in format_data_summaries(self.data_summaries()))

    def pilot_flags(self) -> str:
        """The jobs' --pilot-configfile / --pilot-config: the verdict's suggested commands and the refusals repeat them."""
        return self.pilot.flags()

    def control_pairs(self) -> str:
        """--control-of of the tables and plots: control_family=main_family,..."""
        return format_pairs(control_families(self.config["families"]))

    def primary_flag(self) -> str:
        """--primary of the tables: the (family, term, alpha) read on a declared primary endpoint other than take-up."""
        return shlex.quote(format_primary(declared_primary(self.config["families"])))

    def beta_axis(self) -> bool:
        """Whether a run of the grid lies on a beta axis (a family's or run entry's `betas:`)."""
        return any(spec.beta_axis for spec in self.grid.values())

    def table_files(self) -> list[str]:
        names = TABLES + (BETA_CURVE_TABLES if self.beta_axis() else ())
        tables = [self.results(f"tables/{table}.{ext}") for table in names for ext in TABLE_FORMATS]
        return tables + [self.results(f"tables/curves.{ext}") for ext in CURVE_FORMATS]

    def plot_terms(self) -> list[tuple[str, str]] | None:
        """On a beta axis, the (main family, term) pairs of the grid, each drawn in files of its own; else None."""
        if not self.beta_axis():
            return None
        control_of = control_families(self.config["families"])
        return sorted({(main_family(spec.family, control_of), spec.term) for spec in self.grid.values()})

    def plot_files(self) -> list[str]:
        return [self.results(f"plots/{plot}.png") for plot in plot_names(self.plot_terms())]

    def plot_split_flag(self) -> str:
        return "--per-term " if self.beta_axis() else ""  # its space with it: off an axis the command is as before

    def beta_curve_plot_files(self) -> list[str]:
        """beta_curves.png, with a beta axis (analysis/report/beta_curve_plot.py)."""
        return [self.results("plots/beta_curves.png")] if self.beta_axis() else []

    # --- the grid's record ---------------------------------------------------------------------------------------------

    def write_grid_record(self, path: str, log: str) -> None:
        """The record of the runs the tables read: the fixed grid's document (built and checked at parse time), or that
        of the runs the looks trained, read from the verified look files. write_grid refuses a document that is not
        the one the record's name asks for."""
        document = self.grid_document if self.looks is None else grid_document(self.tables_grid())
        write_grid(document, path)
        with open(log, "w") as handle:
            handle.write(f"{path}: the record of {len(document['runs'])} runs\n")

    def grid_record_pattern(self) -> str:
        """What the record_grid job writes: the fixed grid's one record (`snakemake record_grid` writes it alone), or
        under a sequential design any record, named by the runs its looks trained."""
        return self.grid_record if self.looks is None else self.results(f"{GRID_FOLDER}/{{digest}}.json")

    def grid_record_log(self) -> str:
        return self.results("logs/record_grid.log" if self.looks is None else "logs/record_grid/{digest}.log")

    def grid_record_file(self, wildcards) -> str:
        """The record of the runs the tables read, named by its content (bindings.grid_file)."""
        return self.grid_record if self.looks is None else self.results(grid_file(grid_document(self.tables_grid())))

    def tables_grid_copy(self) -> str:
        """The tables' copy of their grid record: named as the record under the fixed design (a new grid, a new name);
        under a sequential design the look files, inputs of the tables, stand for the changes."""
        return self.results(f"tables/{tables_grid_file(self.grid_record if self.looks is None else 'design.json')}")

    # --- a sequential design's looks (sequential/stage.Looks) -----------------------------------------------------------------

    def look_files(self, wildcards=None) -> list[str]:
        """A sequential design's look files of every look it has reached, in order; none under the fixed design."""
        return [] if self.looks is None else self.looks.reached_files()

    def look_file(self, look: int) -> str:
        return self.results(LOOK_TEMPLATE.format(look=look))

    def look_metrics(self, wildcards) -> list[str]:
        """The metrics files look {look} reads (Looks.look_metrics)."""
        if self.looks is None:
            raise ValueError(f"look {wildcards.look}: the config's design has 0 looks")
        return self.looks.look_metrics(wildcards)

    def recomputed_metrics(self, wildcards) -> list[str]:
        """The metrics files look {look} reads to recompute the looks before it (Looks / CurveStages.recomputed_metrics)."""
        return self.looks.recomputed_metrics(wildcards)

    def previous_looks(self, wildcards) -> list[str]:
        """Every look file before look {look}, in order: the look verifies them as a chain."""
        return [self.look_file(look) for look in range(1, int(wildcards.look))]
