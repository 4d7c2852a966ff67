"""The verdict's account of a sequential design: the looks done, the alpha each spent, and for each planned take-up
contrast its decision and the look that made it (sequential/decisions.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from experiments.synthetic_sequences.analysis.comparisons.contrasts import MARGINS
from experiments.synthetic_sequences.analysis.records.run_files import plural
from experiments.synthetic_sequences.analysis.statistics.inference import ALPHA
from experiments.synthetic_sequences.arms import COMPARISON_NAMES, TOOK_UP
from experiments.synthetic_sequences.sequential.curve_design import describe_record
from experiments.synthetic_sequences.sequential.design import OPEN, UNDECIDED, design_from_record


def decision_text(decision: Mapping, looks: int) -> str:
    if decision["decision"] == UNDECIDED:
        return f"undecided at {decision['runs_per_arm']} runs per arm"
    if decision["decision"] == OPEN:
        return f"open after look {decision['look']} of {looks}"
    return decision["decision"]


def earlier_design_lines(documents: Sequence[Mapping]) -> list[str]:
    """Markdown lines naming each design the folder's looks were read under before a reset (look 1's
    earlier_designs), of either kind: the error bound stated above no longer holds for them."""
    lines = []
    for earlier in documents[0].get("earlier_designs", []) if documents else ():
        lines += [
            f"**An earlier design was read first**: {describe_record(earlier['design'])}, from {earlier['first_look_at']}, "
            "then reset (design_reset). Its looks saw these runs too: a design changed after its data were read no "
            "longer holds the error bound above.",
            "",
        ]
    return lines


def design_section(documents: Sequence[Mapping]) -> list[str]:
    """Markdown lines: the design, its looks, and a table of every group's decisions."""
    design = design_from_record(documents[0]["design"])
    done = ", ".join(
        f"look {look.number} at {plural(look.references, 'reference')} x {plural(look.seeds, 'seed')} "
        f"({look.runs_per_arm} runs per open arm, alpha {design.increment(look.number, ALPHA):.4f})"
        for look in design.looks[: len(documents)]
    )
    lines = [
        "## Sequential design",
        "",
        f"{len(documents)} of {len(design.looks)} looks done, {design.alpha_spending} alpha spending over at most "
        f"{design.max_runs_per_arm} runs per arm: {done}. Each look's alpha is shared evenly among a group's m planned "
        "contrasts, and a contrast is decided at its share, alpha / m, whichever way: raises or lowers where its "
        "take-up p is at most alpha / m, equivalent where Newcombe's interval at level 1 - 2 alpha / m lies inside "
        f"+-{MARGINS[TOOK_UP]:g}. So within each (family, term), the family of planned contrasts the design controls "
        "(each is one of the note's questions), the chance of any false decision of either kind, over its contrasts "
        f"and every look, is at most {ALPHA:g} (union bound); nothing is claimed across terms. Take-up steered the "
        "design; an arm trained on while a contrast it belongs to was open. The interval beside a decision is that "
        "1 - 2 alpha / m interval: it covers per contrast and per "
        "look, not simultaneously. Every other interval and p value below is that of a fixed design of the runs "
        "trained (naive under the design), and the secondary endpoints did not steer it.",
        "",
    ]
    lines += earlier_design_lines(documents)
    rows = []
    for group in documents[-1]["groups"]:
        for name in (name for name in COMPARISON_NAMES if name in group["decisions"]):  # the file's keys are sorted
            decision = group["decisions"][name]
            rows.append(
                {
                    "group": f"{group['family']} {group['term']} alpha={group['alpha']:g}",
                    "contrast": name,
                    "decision": decision_text(decision, len(design.looks)),
                    "look": decision["look"],
                    "runs per arm": decision["runs_per_arm"],
                    "estimate": decision["estimate"],
                    "interval": f"[{decision['ci_low']:+.3f}, {decision['ci_high']:+.3f}]",
                    "p": decision["p"],
                    "p (Bonferroni, m planned)": decision["p_adjusted"],
                    "alpha of the look": decision["alpha"],
                    "alpha / m": decision["level"],
                }
            )
    lines += [pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3g"), ""]
    return lines
