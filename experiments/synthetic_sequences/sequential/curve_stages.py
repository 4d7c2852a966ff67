"""A curve design's stages as the plan asks for them (the counterpart of sequential/stage.Looks): the runs each stage
trains, which look reads which runs, the look files it has reached, and the runs the tables read.

Stage 1's runs are known from the config: each curve's coarse betas (curve_design.coarse_betas of its config betas) on
the first blocks. Stage k's runs are known once look k - 1's file exists: the betas it placed per open curve and mode,
on stage k's blocks. So the plan's grid grows as looks are read (Plan.set_runs): at parse time from the look files on
disk (checked, not refitted: sequential/curve_looks.checked_curve_look), and in the main process when a look's
checkpoint has run. Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from core.disentanglement.artifacts import sha256_file
from experiments.synthetic_sequences.planning.grid import RunSpec, expand_grid, resolve_blocks, resolve_seeds, run_betas
from experiments.synthetic_sequences.run_layout import metrics_path
from experiments.synthetic_sequences.sequential.curve_design import (
    CURVE,
    CurveDesign,
    coarse_betas,
    curve_record,
    fixed_beta,
    fixed_index,
    stage_blocks,
    stages,
)
from experiments.synthetic_sequences.sequential.curve_looks import checked_curve_look, curve_name, open_curves
from experiments.synthetic_sequences.sequential.design import DesignError
from experiments.synthetic_sequences.sequential.record import check_design_fixed
from experiments.synthetic_sequences.sequential.stage import wait_for_look


def curve_spans(families: Mapping[str, Mapping]) -> dict[str, list[float]]:
    """{family/term/alpha: [lowest, highest config beta]} of every curve; a curve design reads beta axes of main
    families only, and refuses anything else by its field."""
    spans = {}
    for family, spec in families.items():
        if spec.get("control_of") or spec.get("controls", "none") != "none":
            raise DesignError(f"families.{family}: a curve design reads k from main families' curves; train controls in a fixed config")
        if "seeds" in spec:
            raise DesignError(f"families.{family}.seeds: under a curve design every block trains the config's seeds; remove it")
        for i, run in enumerate(spec.get("runs") or []):
            betas, axis = run_betas(spec, run)
            if not axis or sorted(run["modes"]) != ["mean", "sum"]:
                raise DesignError(f"families.{family}.runs[{i}]: a curve design's run trains mean and sum over betas: [...], its span")
            if fixed_index(min(betas)) == fixed_index(max(betas)):
                raise DesignError(
                    f"families.{family}.runs[{i}]: its betas {betas} span one beta of the design's fixed set "
                    f"({fixed_beta(fixed_index(min(betas)))}); a curve design's span needs two at least"
                )
            spans[curve_name((family, run["term"], float(run.get("alpha", 0.0))))] = [min(betas), max(betas)]
    return spans


def first_stage_families(families: Mapping[str, Mapping]) -> dict:
    """The families as stage 1 trains them: each run's betas its coarse betas."""
    staged = {}
    for family, spec in families.items():
        runs = [{**run, "betas": coarse_betas(run_betas(spec, run)[0])} for run in spec["runs"]]
        staged[family] = {**{key: value for key, value in spec.items() if key != "betas"}, "runs": runs}
    return staged


def first_stage_specs(config: Mapping, design: CurveDesign) -> list[RunSpec]:
    """Stage 1's runs of a curve design's config; refuses what a curve design cannot read before any grid is built."""
    curve_spans(config["families"])
    blocks = stage_blocks(design, resolve_blocks(config.get("references")), 1)
    return expand_grid(first_stage_families(config["families"]), config.get("seeds"), blocks)


class CurveStages:
    """A curve design over a plan (plan.Plan, whose config, grid and paths it reads and grows) and its looks."""

    kind = CURVE

    def __init__(self, plan, design: CurveDesign, await_look: Callable[..., object] | None):
        self.plan, self.design, self.await_look = plan, design, await_look
        self.spans = curve_spans(plan.config["families"])
        self.seeds = resolve_seeds(plan.config.get("seeds"), "seeds")
        # (look, its file's sha256, the seal of the look before) -> its file, checked: a look recomputed while snakemake
        # runs is read anew by every later check, as are the looks after it
        self.documents: dict[tuple[int, str, str | None], dict] = {}
        self.staged: dict[int, list[RunSpec]] = {1: list(plan.grid.values())}  # stage -> its runs
        self.placed_by: dict[int, str] = {}  # stage -> the seal of the look that placed its runs

    @classmethod
    def of_config(cls, plan, design: CurveDesign, await_look: Callable[..., object] | None) -> CurveStages:
        """The design's stages, checked against the config's references, with every look file on disk read in order
        (and its stage's runs added to the plan's grid) while curves stay open."""
        curve_stages = cls(plan, design, await_look)
        curve_stages.check_references()
        check_design_fixed(plan.config["results"], design, plan.config.get("design_reset", False), plan.pilot)
        look = 1
        while os.path.exists(plan.look_file(look)) and look < curve_stages.most_stages():
            if not open_curves(curve_stages.checked_look(look)):
                break
            look += 1
        return curve_stages

    def most_stages(self) -> int:
        return max(stages(self.design, span) for span in self.spans.values())

    def check_references(self) -> None:
        """`references` lists exactly the blocks of the most stages a curve's budget allows, and every curve has room
        for stage 1 and one more."""
        design, blocks = self.design, self.plan.blocks()
        for name, span in self.spans.items():
            if stages(design, span) < 2:
                raise DesignError(
                    f"design.budget: {design.budget} runs hold stage 1 of {name} ({design.first_runs(span)} runs) and no later "
                    f"stage of {design.stage_runs()}; raise it"
                )
        wanted = design.first_blocks + design.stage_blocks * (self.most_stages() - 1)
        held = 1 + max(0, len(blocks) - design.first_blocks) // design.stage_blocks  # the stages the blocks listed hold
        if len(blocks) < wanted and held >= 2:  # the blocks hold a design: the budget is the slip as likely as they
            # the largest budget under which no curve takes more than `held` stages (curve_design.stages)
            budget = min(design.first_runs(span) for span in self.spans.values()) + held * design.stage_runs() - 1
            raise DesignError(
                f"design.budget: {design.budget} runs per curve take {self.most_stages()} stages on {wanted} blocks "
                f"({design.first_blocks} + {self.most_stages() - 1} x {design.stage_blocks}), but references lists "
                f"{len(blocks)}: lower the budget to {budget} at most (what {len(blocks)} blocks hold), or list {wanted} "
                "z-free seeds no config shares"
            )
        if len(blocks) != wanted:
            raise DesignError(
                f"references: {len(blocks)} blocks, but the design's {self.most_stages()} stages take {wanted} "
                f"({design.first_blocks} + {self.most_stages() - 1} x {design.stage_blocks}); list {wanted} z-free seeds no config shares"
            )

    def record_flag(self) -> str:
        """The look job's --design: the design as its look files record it."""
        return json.dumps(curve_record(self.design))

    def spans_flag(self) -> str:
        return json.dumps(self.spans)

    def checked_look(self, look: int) -> dict:
        """Look `look`'s file as it is now, checked against the look before (not refitted), its stage's runs in the
        grid: the file is read again wherever it or the look before changed since it was last read."""
        previous = self.checked_look(look - 1) if look > 1 else None
        path = self.plan.look_file(look)
        key = (look, sha256_file(path), previous["sha256"] if previous else None)
        if key not in self.documents:
            self.documents[key] = checked_curve_look(path, self.design, self.spans, previous, False, self.plan.pilot)
        self.place_stage(look + 1, self.documents[key])
        return self.documents[key]

    def place_stage(self, stage: int, document: Mapping) -> None:
        """Stage `stage`'s runs, as look stage - 1 (`document`) placed them, in the plan's grid. A look recomputed since
        it placed them (another seal) places them again, and the stages after it wait for their own looks again."""
        if self.placed_by.get(stage) == document["sha256"]:
            return
        for later in [held for held in self.staged if held >= stage]:
            del self.staged[later], self.placed_by[later]
        self.placed_by[stage] = document["sha256"]
        if not open_curves(document):
            self.plan.set_runs([spec for specs in self.staged.values() for spec in specs])
            return
        families = self.plan.config["families"]
        staged: dict[str, dict] = {}
        for group in document["groups"]:
            spec = families[group["family"]]
            where = {"term": group["term"], "alpha": group["alpha"]}
            runs = [{**where, "modes": [mode], "betas": betas} for mode, betas in group["next_betas"].items()]
            entry = staged.setdefault(group["family"], {**{k: v for k, v in spec.items() if k != "betas"}, "runs": []})
            entry["runs"] += runs
        blocks = stage_blocks(self.design, self.plan.blocks(), stage)
        self.staged[stage] = expand_grid(staged, self.seeds, blocks)
        self.plan.set_runs([spec for specs in self.staged.values() for spec in specs])

    def read_look_checkpoint(self, look: int) -> dict:
        """Look `look`'s file once its checkpoint has run (snakemake runs it first), and once more where the look before
        was made again in this run (stage.wait_for_look)."""
        wait_for_look(self.await_look, self.plan, look, self.read_look_checkpoint(look - 1) if look > 1 else None)
        return self.checked_look(look)

    def look_metrics(self, wildcards) -> list[str]:
        """The metrics files look {look} reads: every run so far of the curves open after the look before."""
        look = int(wildcards.look)
        if look > self.most_stages():
            raise ValueError(f"look {look}: the config's curve design has at most {self.most_stages()} stages")
        reading = set(open_curves(self.read_look_checkpoint(look - 1))) if look > 1 else None
        specs = [spec for stage in range(1, look + 1) for spec in self.staged.get(stage, [])]
        chosen = [spec for spec in specs if reading is None or (spec.family, spec.term, spec.alpha) in reading]
        return [metrics_path(self.plan.config["results"], spec.path) for spec in chosen]

    def recomputed_metrics(self, wildcards) -> list[str]:
        """The metrics files look {look}'s job reads to recompute the looks before it: every run of the stages before,
        those of curves that stopped included, so that snakemake extracts one that is missing first."""
        look = int(wildcards.look)
        if look > 1:
            self.read_look_checkpoint(look - 1)  # stage look - 1 is placed
        specs = [spec for stage in range(1, look) for spec in self.staged.get(stage, [])]
        return [metrics_path(self.plan.config["results"], spec.path) for spec in specs]

    def reached(self) -> list[dict]:
        """The look files of every look reached, in order: up to the first that leaves no curve open."""
        documents = []
        for look in range(1, self.most_stages() + 1):
            documents.append(self.read_look_checkpoint(look))
            if not open_curves(documents[-1]):
                break
        return documents

    def reached_files(self) -> list[str]:
        return [self.plan.look_file(document["look"]) for document in self.reached()]

    def trained(self) -> list[RunSpec]:
        """The runs of every stage the looks reached: the tables read them."""
        reached = self.reached()
        return [spec for stage in range(1, len(reached) + 1) for spec in self.staged.get(stage, [])]
