"""verdict.md, the page a researcher reads first: the cross-term table (cross_term.py), the rule, per (family, term,
alpha) a sentence per endpoint and the per-seed values behind them, and last the command that reaches the seeds the
unresolved take-up lines need."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.beta_axis import has_axis
from experiments.synthetic_sequences.analysis.comparisons.confounds import length_line, length_predicts_strategy, token_line
from experiments.synthetic_sequences.analysis.comparisons.contrasts import arms, term_arms
from experiments.synthetic_sequences.analysis.report import verdict as rule
from experiments.synthetic_sequences.analysis.report.beta_curve_text import beta_curve_section, design_next_line
from experiments.synthetic_sequences.analysis.report.cross_term import glance_frame, multiplicity_line
from experiments.synthetic_sequences.analysis.statistics.inference import MAX_SEEDS
from experiments.synthetic_sequences.arms import BLOCK, CONTROL_ARMS, NO_CONTROL, TOOK_UP
from experiments.synthetic_sequences.planning.data_draws import SHARED_DRAW
from experiments.synthetic_sequences.planning.pilot_command import DEFAULT_PILOT, SEEDS_SETTING, PilotCommand
from experiments.synthetic_sequences.sequential.text import design_section

DECISIVE_ENDPOINTS = ("take-up", "separation")  # the question's two outcomes: the seeds line sizes the pilot for them


# what rereading after more seeds does to the error rate (bench/README.md: Sequential design)
REREAD_WARNING = (
    "Rereading this verdict after adding seeds spends its 5% again: in simulation the habit raised the family-wise "
    "error of the planned take-up contrasts from 0.016-0.019 to 0.028-0.032"
)
SEQUENTIAL_CONFIG = "config/sequential.yaml"  # the default pilot as a sequential design, in a results folder of its own
CURVE_CONFIG = "config/curve_design.yaml"  # the beta axis as a sequential curve design


def reread_warning(pilot: PilotCommand, beta_axis: bool) -> str:
    """The warning, with the way to add seeds that holds the error rate where this pilot has one: the default pilot's
    sequential twin, or a `design:` block for another pilot; on a beta axis, a curve design."""
    if beta_axis:
        return (
            f"{REREAD_WARNING}; on a beta axis a curve design holds it ({CURVE_CONFIG}'s `design:` block, in a results "
            "folder of its own), and until then read the curves' intervals as fixed-design ones."
        )
    if not pilot.configfiles:
        command = f"snakemake --cores 2 --configfile {SEQUENTIAL_CONFIG}"
        return f"{REREAD_WARNING}; to add seeds with the error rate held, run the sequential design instead: `{command}`."
    return (
        f"{REREAD_WARNING}; to add seeds with the error rate held, give this pilot a sequential design ({SEQUENTIAL_CONFIG}'s "
        "`design:` block, in a results folder of its own)."
    )


def markdown(frame: pd.DataFrame, floatfmt: str) -> str:
    """A Markdown table with '-' where a value is missing (an interval from one seed, say) rather than 'nan'."""
    return frame.astype(object).where(frame.notna(), None).to_markdown(index=False, floatfmt=floatfmt, missingval="-")


def seed_cell(run: dict) -> str:
    """'took up @450 · I 0.62 · SI 0.41', 'censored @1500 · ...', or 'rose @450, fell back · ...'."""
    if run[TOOK_UP] >= 1:
        event = f"took up @{run['onset_step']:.0f}"
    elif run["onset_observed"] >= 1:
        event = f"rose @{run['onset_step']:.0f}, fell back"
    else:
        event = f"censored @{run['onset_step']:.0f}"
    information = run.get("strategy_information", math.nan)
    return f"{event} · I {run['mutual_information']:.3f} · SI {information:.3f}"


def seed_table(group_arms: dict[str, pd.DataFrame]) -> str:
    """(Reference, seed) x arm: the take-up event, final test I(x;z) and strategy information of every run behind the lines."""
    cells = {
        name: {(int(run[BLOCK]), int(run["seed"])): seed_cell(run) for run in arm.to_dict("records")} for name, arm in group_arms.items()
    }
    keys = sorted({key for column in cells.values() for key in column})
    frame = pd.DataFrame(
        {
            "reference": [f"ref{block}" for block, _ in keys],
            "seed": [seed for _, seed in keys],
            **{name: [column.get(key, "not run") for key in keys] for name, column in cells.items()},
        }
    )
    return markdown(frame, floatfmt=".3g")


def seeds_command(seeds: int, pilot: PilotCommand) -> str:
    """The command that trains a pilot's runs up to `seeds` per arm and block: its own command line, seeds set."""
    return pilot.command(f"{SEEDS_SETTING}{seeds}")


def seeds_line(verdict: pd.DataFrame, runs: pd.DataFrame, pilot: PilotCommand = DEFAULT_PILOT) -> str:
    """The last line: how many runs the unresolved take-up and separation lines need (an unresolved sum - mean
    contrast, or a control whose share is unclear), as reference blocks x seeds per block, and the command that
    trains them (the pilot's own command line with seeds raised)."""
    decisive = verdict[verdict.endpoint.isin(DECISIVE_ENDPOINTS)]
    needed = decisive.seeds_needed.dropna()
    now = int(runs.groupby(["family", "term", "mode", "alpha"]).size().max())
    blocks = int(runs[BLOCK].nunique())
    if needed.empty:
        return f"Every take-up and separation line is resolved at the runs trained ({now} per arm at most)."
    finite = needed[needed < math.inf]
    if finite.empty:
        return (
            f"No seed count up to {MAX_SEEDS} per arm resolves the unresolved take-up and separation lines at the "
            "observed values: the arms are too close for this pilot's question."
        )
    target = int(finite.max())
    if blocks == 1:
        text = f"Seeds needed for the unresolved take-up and separation lines: about {target} per arm (now {now})."
        seeds = target
    else:
        per_block = math.ceil(target / blocks)
        text = (
            f"Runs needed for the unresolved take-up and separation lines: about {target} per arm, {blocks} references x "
            f"{per_block} seeds (now {now}: {blocks} x {now // blocks}); more references in place of seeds generalise further."
        )
        seeds = per_block
    if target > now:
        text += f" To train them (only the new seeds run): `{seeds_command(seeds, pilot)}`. {reread_warning(pilot, has_axis(runs))}"
    else:
        text += " The estimate is not above the seeds run: the observed values sit at the edge of resolving; add seeds."
    if len(finite) < len(needed):
        text += f" Some lines would need more than {MAX_SEEDS}."
    return text + " (Families that set their own `seeds:` keep them.)"


def absent_controls_line(family: str, absent: list[str]) -> str:
    """What the lines below cannot say, for a family run without one or both controls."""
    if len(absent) == 1:
        added = f"a family with `controls: {absent[0]}` and `control_of: {family}` adds it"
    else:
        added = f"families with `controls: {absent[0]}` and `controls: {absent[1]}`, each with `control_of: {family}`, add them"
    return (
        f"Controls not run: {' and '.join(absent)}. A difference between sum and mean is read below without "
        f"{'its' if len(absent) == 1 else 'their'} share of it ({added})."
    )


def scope_line(runs: pd.DataFrame, draws: Mapping[str, Mapping] | None = None) -> str:
    """What the verdict generalises over: the reference blocks (z-free seeds), the seeds in each, and one data draw or
    each block's own (draws: {draw: data summary}, a block's own draw named as the block)."""
    blocks = sorted(int(block) for block in runs[BLOCK].unique())
    seeds = int(runs.groupby(["family", BLOCK, "term", "mode", "alpha"]).size().max())
    named = ", ".join(map(str, blocks))
    plural = "s" if len(blocks) != 1 else ""
    own_draws = draws is not None and SHARED_DRAW not in draws
    if own_draws:
        data_seeds = ", ".join(str(summary["config"]["seed"]) for summary in draws.values())
        over = (
            f"Over {len(blocks)} reference block{plural}, each its own data draw and z-free reference (z-free seed{plural} "
            f"{named}; data seed{plural} {data_seeds}), and up to {seeds} seed{'s' if seeds != 1 else ''} each. "
        )
    else:
        over = (
            f"Over {len(blocks)} z-free reference{plural} (z-free seed{plural} {named}) and up to {seeds} "
            f"seed{'s' if seeds != 1 else ''} each, on this data draw (one `data.seed`). "
        )
    if len(blocks) > 1:
        return over + "Arms are compared within a reference and pooled across them."
    what = "that data draw and z-free model" if own_draws else "that z-free model"
    return over + f"With one reference, what it says holds for {what}, not for the procedure: set `references:` to replicate it."


def numerics_line(group_arms: dict[str, pd.DataFrame]) -> str:
    """The numerics the runs behind a section trained under; when the arms' differ, which arm ran under which."""
    labels = {name: sorted(arm.numerics.unique()) for name, arm in group_arms.items()}
    every = sorted({label for values in labels.values() for label in values})
    paths = sorted({label for arm in group_arms.values() for label in arm.execution.unique()})
    execution = f" Jobs: {' / '.join(paths)}."
    if len(every) == 1:
        return f"Numerics: {every[0]} (every run).{execution}"
    parts = "; ".join(f"{name}: {' / '.join(values)}" for name, values in labels.items())
    return f"Numerics differ between the runs, so a difference between arms may be one of floats: {parts}.{execution}"


def group_section(group: pd.DataFrame, group_arms: dict[str, pd.DataFrame], length: pd.DataFrame | None) -> list[str]:
    """The section of one (family, term, alpha): its runs, numerics, declared endpoint, lines and seed table."""
    family, term, alpha = (group[key].iloc[0] for key in ("family", "term", "alpha"))
    lines = [f"## {family} {term} alpha={alpha:g}", "", f"Runs: {group.runs.iloc[0]}.", "", numerics_line(group_arms), ""]
    if (first := group.endpoint.iloc[0]) != rule.ENDPOINTS[0].name:
        lines += [
            f"Primary endpoint: {first}, declared in the config; Holm spans its planned contrasts, and take-up is secondary here.",
            "",
        ]
    if absent := [kind for kind in CONTROL_ARMS if kind not in group_arms]:
        lines += [absent_controls_line(family, absent), ""]
    lines += [f"- {text}" for text in group.verdict]
    if length is not None and (said := length_line(length, family, term, alpha)):
        lines.append(f"- {said}")
    if unconverged := int(group.unconverged_runs.iloc[0]):
        lines.append(
            f"- {unconverged} of {sum(len(a) for a in group_arms.values())} runs are not flagged converged "
            "(reconstruction still moving, or I(x;z) still moving after its onset; see `runs`)."
        )
    return [
        *lines,
        "",
        f"Per reference and seed: take-up event (I(x;z) >= {rule.TAKEUP_THRESHOLD:g} nats on validation), "
        "final test I(x;z) (nats) and strategy information SI.",
        "",
        seed_table(group_arms),
        "",
    ]


def verdict_markdown(
    verdict: pd.DataFrame,
    runs: pd.DataFrame,
    control_of: dict[str, str],
    looks: Sequence[Mapping] = (),
    cross_term: pd.DataFrame | None = None,
    planned: int = 0,
    length: pd.DataFrame | None = None,
    draws: Mapping[str, Mapping] | None = None,
    beta_curves: pd.DataFrame | None = None,
    beta_cells: pd.DataFrame | None = None,
    pilot: PilotCommand = DEFAULT_PILOT,
    curve_looks: Sequence[Mapping] = (),
) -> str:
    """The verdict; given the cross-term table (cross_term.py) and the count of planned take-up contrasts, that table
    first; given a sequential design's look files, its account of the design before the sections and no seeds-needed
    line; given confounds.length_separation and the data summaries ({draw: summary}), what length says, once and per
    term, and over which draws the verdict holds; given a beta
    axis's shift and cells tables (beta_curves.py), the curves first, with a curve design's looks; `pilot`: the command
    line the seeds line repeats."""
    lines = ["# Verdict: does token-sum change latent take-up and strategy separation?", "", scope_line(runs, draws), ""]
    if beta_curves is not None:
        lines += beta_curve_section(beta_curves, beta_cells, curve_looks)
    if draws is not None and not runs[runs.controls == NO_CONTROL].empty:
        lines += [f"{length_predicts_strategy(draws)} {token_line(runs)}".rstrip(), ""]
    if cross_term is not None and not cross_term.empty:
        glance = glance_frame(cross_term, design=bool(looks))
        lines += [
            "## At a glance: sum - mean, term by term",
            "",
            markdown(glance, floatfmt="g"),
            "",
            multiplicity_line(cross_term, planned, bool(looks)),
            "",
        ]
    lines += ["```", rule.RULE, "```", ""]
    if looks:
        lines += design_section(looks)
    if verdict.empty:
        return "\n".join([*lines, "No family has both a mean and a sum run: nothing to compare.", ""])
    family_arms = arms(runs, control_of)
    for (family, term, alpha), group in verdict.groupby(["family", "term", "alpha"], sort=False):
        lines += group_section(group, term_arms(family_arms[family], term, alpha), length)
    if curve_looks:
        last = design_next_line(curve_looks)
    elif looks:
        last = "The sequential design above set the runs; its decisions stand."
    else:
        last = seeds_line(verdict, runs, pilot)
    lines += ["## Summary", "", markdown(verdict.drop(columns=["verdict", "runs"]), floatfmt=".3g"), "", last]
    return "\n".join(lines) + "\n"
