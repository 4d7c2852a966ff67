"""What every stage shares: the wildcards' shapes, the rules run where snakemake runs, the report's captions. The
logic the rules ask for is the plan's (planning/plan.py, PLAN in the Snakefile)."""

import os

from core.disentanglement.config import AGGREGATION_MODES, OPTIMISABLE_TERMS
from core.disentanglement.registry import alternation
from experiments.synthetic_sequences.planning.chunks import CHUNK_PATTERN
from experiments.synthetic_sequences.planning.grid import FAMILY_PATTERN
from experiments.synthetic_sequences.planning.plan_tables import EXTRACT_METRICS, TERM_PLOTS
from experiments.synthetic_sequences.run_layout import CHUNK_TEMPLATE, LOOK_TEMPLATE, METRICS_TEMPLATE, REFERENCE_ARTIFACTS, RUN_TEMPLATE

RUN = RUN_TEMPLATE  # a run directory under runs/, and its metrics file under metrics/ (run_layout)
CHUNK = CHUNK_TEMPLATE  # the seeds of one arm trained together (chunks.py), the record of a training job
BLOCK = REFERENCE_ARTIFACTS  # a reference block's z-free model, scores and c_base, by the {reference} wildcard
LOOK = LOOK_TEMPLATE  # a sequential design's look file, by the {look} wildcard (sequential/look_files.py)
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


# Seconds-long jobs run where snakemake runs, not as Slurm jobs: a queue wait would exceed their work. Only the
# trainings (z-free and CVAE) are submitted.
localrules:
    record_grid,
    design_look,
    synthetic_sequences,
    score_records,
    reference_scale,
    extract_metrics,
    aggregate_tables,
    plots,
    beta_curve_plot,


results = PLAN.results

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
    # a figure drawn one file per (main family, term) on a beta axis takes its whole figure's caption
    name = next((f"{plot}.png" for plot in TERM_PLOTS if name.startswith(f"{plot}_")), name)
    if name in KEY_REPORTS:
        caption, subcategory = KEY_REPORTS[name]
        category = "Verdict"
    else:
        caption, category, subcategory = ("plots.rst", "Plots", None) if name.endswith(".png") else ("tables.rst", "Tables", None)
    # one line: snakemake's parser reads a line that starts with `report(` as the report: keyword
    return report(path, caption=f"../report/{caption}", category=category, subcategory=subcategory)
