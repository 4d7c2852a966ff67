"""The sequential design's entry point, what the plan calls (Looks): which runs each look reads and trains, and the
look files it has reached; and, at the workflow's start, the Slurm packing its checkpoints refuse.

A look is a snakemake checkpoint (rules/design.smk): its file says what the next look trains, so every input that
depends on a look waits for it (`await_look`, the checkpoint's get) and reads it verified (sequential/look_files.py)
against the look before and the runs the config assigns to it. The statistics that verify a look are the analysis'
(pandas), imported only under a sequential design.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from experiments.synthetic_sequences.planning.endpoints import check_design_endpoints, declared_primary
from experiments.synthetic_sequences.planning.grid import control_families, resolve_seeds
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, SLURM, PilotCommand
from experiments.synthetic_sequences.run_layout import GridError, metrics_path
from experiments.synthetic_sequences.sequential.design import Design, parse_design
from experiments.synthetic_sequences.sequential.looks import arm_of, check_design_grid, look_specs, open_arms_of, trained_specs
from experiments.synthetic_sequences.sequential.record import check_design_fixed

TRAIN_GROUP = "train"  # the training jobs' group under the fixed design, which slurm/config.yaml's group-components packs


class Looks:
    """The design of a plan (plan.Plan, whose grid, references and paths it reads) whose config declares a sequential
    one, and its looks."""

    kind = "sequential"

    def __init__(self, plan, design: Design, await_look: Callable[..., object] | None):
        self.plan, self.design, self.await_look = plan, design, await_look
        self.control_of = control_families(plan.config["families"])
        self.verified: dict[tuple, dict] = {}  # (look, its file's mtime, the seal of the look before): its document

    @classmethod
    def of_config(cls, plan, await_look: Callable[..., object] | None) -> Looks | None:
        """The config's design, None for the fixed one. A sequential design is checked at parse time: against the grid,
        for looks that can decide nothing, against the design its results folder was first read under
        (sequential/record.py), and so is every look file already on disk, in order, while looks stay open."""
        design = parse_design(plan.config.get("design"))
        if design is None:
            return None
        from experiments.synthetic_sequences.sequential.decisions import check_decidable

        looks = cls(plan, design, await_look)
        config = plan.config
        check_design_grid(design, plan.blocks(), looks.top_seeds(), config["families"], plan.seeds_per_job())
        check_design_endpoints(declared_primary(config["families"]))
        check_decidable(design, looks.arm_groups().values())
        check_design_fixed(config["results"], design, config.get("design_reset", False), plan.pilot)
        previous = None
        for look in design.looks:
            if not os.path.exists(plan.look_file(look.number)) or (previous is not None and not open_arms_of(previous)):
                break
            previous = looks.verified_look_file(look.number, previous)
        return looks

    def arm_groups(self) -> dict:
        """{(main family, term, alpha): the names of its arms} of the grid (looks.arm_of)."""
        groups: dict = {}
        for spec in self.plan.grid.values():
            group, arm = arm_of(spec, self.control_of)
            groups.setdefault(group, set()).add(arm)
        return groups

    def top_seeds(self) -> list[int]:
        return resolve_seeds(self.plan.config.get("seeds"), "seeds")

    def specs_of_look(self, look: int, opened) -> list:
        plan = self.plan
        return look_specs(plan.grid.values(), self.control_of, plan.blocks(), self.top_seeds(), self.design.looks[look - 1], opened)

    def verified_look_file(self, look: int, previous: dict | None) -> dict:
        """Look `look`'s file, verified (sequential/look_files.verified_look) against the look before and the runs the
        config assigns to it; a metrics file still to be extracted is passed over, and the job that reads the look
        checks it whole."""
        from experiments.synthetic_sequences.sequential.look_files import verified_look

        path = self.plan.look_file(look)
        key = (look, os.stat(path).st_mtime_ns, previous["sha256"] if previous else None)
        if key not in self.verified:
            expected = [spec.path for spec in self.specs_of_look(look, open_arms_of(previous) if previous else None)]
            self.verified[key] = verified_look(
                path, self.design, self.control_of, previous, expected, require_runs=False, pilot=self.plan.pilot
            )
        return self.verified[key]

    def read_look_checkpoint(self, look: int) -> dict:
        """Look `look`'s file, verified (verified_look_file), once its checkpoint has run: snakemake runs it first, and
        once more where the look before was made again in this run (stage.follows_a_remade_look)."""
        previous = self.read_look_checkpoint(look - 1) if look > 1 else None
        wait_for_look(self.await_look, self.plan, look, previous)
        return self.verified_look_file(look, previous)

    def look_metrics(self, wildcards) -> list[str]:
        return self.metrics_of_look(int(wildcards.look))

    def metrics_of_look(self, look: int) -> list[str]:
        """The metrics files look `look` reads: every arm's at look 1, the arms the look before left open after it."""
        if look > len(self.design.looks):
            raise ValueError(f"look {look}: the config's design has {len(self.design.looks)} looks")
        opened = open_arms_of(self.read_look_checkpoint(look - 1)) if look > 1 else None
        return [metrics_path(self.plan.config["results"], spec.path) for spec in self.specs_of_look(look, opened)]

    def recomputed_metrics(self, wildcards) -> list[str]:
        """The metrics files look {look}'s job reads to recompute the looks before it: each one's runs, those of arms it
        closed included, so that snakemake extracts one that is missing first."""
        paths: dict[str, None] = {}
        for earlier in range(1, int(wildcards.look)):
            paths |= dict.fromkeys(self.metrics_of_look(earlier))
        return list(paths)

    def reached(self) -> list[dict]:
        """The look files of every look the design has reached, in order: it stops at the last look or at one that
        leaves no contrast open."""
        documents = []
        for look in self.design.looks:
            documents.append(self.read_look_checkpoint(look.number))
            if not open_arms_of(documents[-1]):
                break
        return documents

    def reached_files(self) -> list[str]:
        return [self.plan.look_file(document["look"]) for document in self.reached()]

    def trained(self) -> list:
        """The runs the looks reached have trained: the tables read them."""
        plan = self.plan
        return trained_specs(plan.grid.values(), self.control_of, plan.blocks(), self.top_seeds(), self.design, self.reached())


def follows_a_remade_look(path: str | Path, previous_path: str | Path, previous: Mapping) -> bool:
    """Whether a look file follows another seal than the look before it has now (`previous`, its file at
    `previous_path`), written after it: the look before was made again in this run, and snakemake makes this one again
    after it (its input is newer), so the file on disk is not yet the one to read."""
    try:
        followed = json.loads(Path(path).read_text()).get("previous_sha256")
    except (OSError, ValueError, AttributeError):
        return False
    return followed != previous["sha256"] and os.stat(previous_path).st_mtime_ns > os.stat(path).st_mtime_ns


def wait_for_look(await_look: Callable[..., object], plan, look: int, previous: Mapping | None) -> None:
    """Wait (await_look) for look `look`'s job, both designs' way: once it has run, and once more where its file follows
    a look before (`previous`, as read now) that was made again in this run (follows_a_remade_look)."""
    await_look(look)
    if previous is not None and follows_a_remade_look(plan.look_file(look), plan.look_file(look - 1), previous):
        await_look(look, again=True)


def awaited_look(checkpoint, look: int, again: bool = False):
    """The plan's await_look over snakemake's checkpoint `checkpoint` (the Snakefile's checkpoints.design_look): look
    `look`'s job once it has run; `again`: its file on disk follows a look made again in this run, and snakemake takes
    every checkpoint file on disk as made, so ask it to wait for the look's own job, which makes it again first."""
    made = checkpoint.get(look=look)  # raises while the look's job is still to run
    if again:
        from snakemake.exceptions import IncompleteCheckpointException
        from snakemake.io import checkpoint_target

        raise IncompleteCheckpointException(made.rule, checkpoint_target(made.output[0]))
    return made


def check_design_packing(
    kind: str, overwrite_groups: Mapping[str, str], group_components: Mapping[str, int], pilot: PilotCommand = DEFAULT_PILOT
) -> None:
    """Refuse a profile that packs training jobs into Slurm group jobs under a design with looks.

    A design's looks are snakemake checkpoints, and snakemake 9 merges group components again each time a checkpoint
    updates the DAG (DAG._update_group_components is not idempotent; snakemake issues #1217 and #1628): the packs
    overlap, and one chunk is submitted in two Slurm jobs at once. Measured on the test cluster: a curve design's 10
    stage-1 chunks in packs of 2 became Slurm jobs of 2 and 4 chunks, 18 trainings of 14 runs. So under a design the
    training rule has no group (Plan.train_group) and the shipped profile's group-components packs nothing; only a
    profile that puts train_run in a group of its own (`groups:`) packs it, and is refused here, before any job.
    """
    group = overwrite_groups.get("train_run")
    if group is not None and group_components.get(group, 1) > 1:
        raise GridError(
            f"group-components {group}={group_components[group]}: your profile packs train_run (groups: train_run={group}), and "
            f"a {kind} design (design.kind: {kind}) cannot pack training jobs into Slurm group jobs: its looks are "
            "checkpoints, after which snakemake packs the jobs again and submits a chunk in two Slurm jobs at once "
            "(snakemake issue #1628). Leave train_run out of your profile's groups: (a chunk, seeds_per_job, already trains "
            f"several seeds in one job), or run the shipped profile, which trains it unpacked: {pilot.command(runner=SLURM)}"
        )
