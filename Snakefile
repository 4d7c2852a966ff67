"""Token-sum versus token-mean reconstruction NLL: the ablation pipeline (docs/pipeline.md). `snakemake --cores 2`
runs the default pilot (config/config.yaml); `--configfile config/<name>.yaml` another; `-n` shows what would run;
`snakemake --cores 2 tables --forcerun aggregate_tables` rebuilds the tables and plots from the runs on disk."""

import os

from snakemake.utils import min_version

from experiments.synthetic_sequences.planning.plan import Plan, WorkflowFiles
from experiments.synthetic_sequences.planning.results_lock import acquire, release
from experiments.synthetic_sequences.sequential.stage import awaited_look, check_design_packing

min_version("9.0")


configfile: "config/config.yaml"


# every config check, the grid, its chunks and its design, once (planning/plan.py); each stage's rules ask it
PLAN = Plan.load(
    config,
    WorkflowFiles(
        loaded=workflow.configfiles,
        command_line=workflow.config_settings.configfiles,
        settings=workflow.config_settings.config_args,
        schema=f"{workflow.basedir}/config/schema/config.schema.yaml",  # beside the Snakefile, whatever --directory says
        executes=workflow.is_main_process and not workflow.output_settings.dryrun,  # a dry run writes nothing
    ),
    await_look=lambda look, again=False: awaited_look(checkpoints.design_look, look, again),
)
if workflow.is_main_process:  # not a Slurm job's own parse: its main process checked the folder
    PLAN.check_on_disk()  # the draws on disk are the config's, and every chunk record's runs are there
    os.environ.update(PLAN.pilot.environment())  # the look jobs' advice (local jobs): not their params (pilot_command.py)


report: "report/workflow.rst"


onstart:
    if PLAN.looks is not None:  # the profile's packing is known from here on, not while the Snakefile is parsed
        check_design_packing(PLAN.looks.kind, workflow.group_settings.overwrite_groups, workflow.group_settings.group_components, PLAN.pilot)
    acquire(config["results"])  # planning/results_lock.py: held from the first job to the end


onsuccess:
    release(config["results"])
onerror:
    release(config["results"])


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/reference.smk"
include: "rules/train.smk"
include: "rules/design.smk"
include: "rules/tables.smk"


rule all:  # `tables`, the same files, is rules/tables.smk's target
    default_target: True
    input:
        *TARGETS,
