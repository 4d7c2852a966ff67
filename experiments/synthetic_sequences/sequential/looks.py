"""A sequential design on the run grid: which arm a run belongs to, which runs each look reads, and which runs were
trained; for either design with looks, the runs its look files read (each run's stage, whether they are the grid
record's, a look that cannot be recomputed for a metrics file missing). The look files are sequential/look_files.py's,
the design record sequential/record.py's.

An arm is one side of a planned take-up contrast. Its group is (main family, term, alpha); its name is the mode
('mean', 'sum') for the main family's runs and the control's kind ('scale', 'balance') for a control family's.
Look k reads, of every arm open after look k-1 (every arm at look 1), its runs in the first `references` blocks
with the first `seeds` seeds of each (in the order the config lists them). A closed arm keeps the runs it had.
Torch- and pandas-free: the Snakefile imports it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from experiments.synthetic_sequences.arms import arm_group, arm_name
from experiments.synthetic_sequences.planning.bindings import BindingError
from experiments.synthetic_sequences.planning.grid import RunSpec, run_betas
from experiments.synthetic_sequences.planning.pilot_command import PilotCommand
from experiments.synthetic_sequences.sequential.design import Design, DesignError, Look

Group = tuple[str, str, float]  # (main family, term, alpha)


def arm_of(spec: RunSpec, control_of: Mapping[str, str]) -> tuple[Group, str]:
    """A run's arm: its group and name."""
    return arm_group(spec.family, spec.term, spec.alpha, spec.controls, control_of), arm_name(spec.mode, spec.controls)


def check_design_grid(design: Design, references: list[int], seeds: list[int], families: Mapping, seeds_per_job: int) -> None:
    """The grid a design trains into: the top-level blocks and seeds are the last look's (the most an arm trains), no
    family sets its own seeds, and every look ends on a whole training job (seeds_per_job)."""
    on_axis = [
        f"families.{name}" + (f".runs[{i}]" if "betas" in run else "")
        for name, spec in families.items()
        for i, run in enumerate(spec.get("runs") or [])
        if run_betas(spec, run)[1]
    ]
    if on_axis:
        raise DesignError(
            f"{on_axis[0]}.betas: a sequential design over a beta axis is refused (its looks would stop the betas of one "
            "curve at different runs, and no rule here holds a curve's error rate across looks); use the fixed design"
        )
    last = design.looks[-1]
    if (len(references), len(seeds)) != (last.references, last.seeds):
        raise DesignError(
            f"references: {len(references)} and seeds: {len(seeds)}, but the design's last look trains up to {last.references} "
            f"references x {last.seeds} seeds; set references: {last.references} and seeds: {last.seeds}, the most an arm trains"
        )
    if own := sorted(name for name, spec in families.items() if "seeds" in spec):
        raise DesignError(f"families.{own[0]}.seeds: in a sequential design the looks set every arm's seeds; remove it")
    if uneven := [look for look in design.looks if look.seeds % seeds_per_job]:
        raise DesignError(
            f"design.looks[{uneven[0].number - 1}]: {uneven[0].seeds} seeds is not a multiple of seeds_per_job {seeds_per_job}; "
            "a look ends on a whole training job"
        )


def look_specs(
    specs: Iterable[RunSpec],
    control_of: Mapping[str, str],
    references: list[int],
    seeds: list[int],
    look: Look,
    open_arms: Mapping[Group, Collection[str]] | None = None,
) -> list[RunSpec]:
    """The runs look `look` reads: every arm's at look 1 (open_arms None), else the open arms' only."""
    blocks, firsts = set(references[: look.references]), set(seeds[: look.seeds])
    chosen = []
    for spec in specs:
        group, arm = arm_of(spec, control_of)
        if spec.block in blocks and spec.seed in firsts and (open_arms is None or arm in open_arms.get(group, ())):
            chosen.append(spec)
    return chosen


def open_arms_of(document: Mapping) -> dict[Group, list[str]]:
    """{group: the arms the next look trains} of a look file."""
    return {(g["family"], g["term"], float(g["alpha"])): list(g["train_next"]) for g in document["groups"] if g["train_next"]}


def trained_specs(
    specs: Iterable[RunSpec],
    control_of: Mapping[str, str],
    references: list[int],
    seeds: list[int],
    design: Design,
    documents: list[Mapping],
) -> list[RunSpec]:
    """Every run the design trained, given the look files read so far: each arm's runs of the last look it was open at."""
    specs = list(specs)
    trained = {spec.path: spec for spec in look_specs(specs, control_of, references, seeds, design.looks[0])}
    for look, document in zip(design.looks[1:], documents, strict=False):
        opened = open_arms_of(document)
        if not opened:
            break
        trained |= {spec.path: spec for spec in look_specs(specs, control_of, references, seeds, look, opened)}
    return [spec for spec in specs if spec.path in trained]


# END


def refuse_missing_runs(path: str | Path, missing: Sequence[str], read: int, pilot: PilotCommand) -> None:
    """Refuse to recompute a look some of whose runs' metrics files are missing, with the command that extracts them
    (the pipeline's own targets), then the pilot's."""
    extract = pilot.command(targets=missing)
    raise DesignError(
        f"{path}: {missing[0]}, a run it read, is missing ({len(missing)} of {read}); extract them again: {extract}; then {pilot.command()}"
    )


def check_looks_read(looks: Sequence[dict], grid: dict) -> None:
    """The runs the look files read, together, are the runs of the grid record the tables hold the metrics to."""
    read = set().union(*(look["runs_read"] for look in looks))
    if read != set(grid["runs"]):
        odd = sorted(read ^ set(grid["runs"]))
        raise BindingError(
            f"the look files read {len(read)} runs and the grid record names {len(grid['runs'])}; {odd[0]} is in "
            f"{'the looks only' if odd[0] in read else 'the grid record only'}: the record is not of these looks"
        )


def run_stages(looks: Sequence[Mapping]) -> dict[str, int]:
    """{run path: its stage} of every run a curve design's looks read: a stage's runs are first read by its own look."""
    stages: dict[str, int] = {}
    for document in looks:
        for run in document["runs_read"]:
            stages.setdefault(run, document["look"])
    return stages
