"""Token-sum versus token-mean reconstruction NLL: the ablation pipeline.

snakemake --cores 2                                   run the embedded default pilot (config/config.yaml)
snakemake --cores 2 --configfile config/pilot.yaml    the spec's full narrow pilot
snakemake -n                                          show what would run
snakemake --cores 2 tables --forcerun aggregate_tables    rebuild tables and plots from runs on disk
"""

from snakemake.utils import min_version, validate

from experiments.synthetic_sequences.planning.config_files import (
    check_config_files,
    check_flags,
    check_integers,
    check_moved_keys,
    check_run_lists,
    drop_removed_families,
    merge_order,
    settle_family_betas,
)
from experiments.synthetic_sequences.planning.results_lock import acquire, check_free, release

min_version("9.0")


configfile: "config/config.yaml"


CONFIG_SCHEMA = f"{workflow.basedir}/config/schema/config.schema.yaml"  # beside the Snakefile, whatever --directory says


check_config_files(workflow.configfiles)  # a key written twice is refused, not silently the last one

drop_removed_families(config)  # `name: null` in a later config file removes a family of an earlier one
# a later file's `betas` replaces an earlier file's `beta`
settle_family_betas(config, merge_order(workflow.configfiles, workflow.config_settings.configfiles))
check_moved_keys(config)
check_run_lists(config, CONFIG_SCHEMA)  # one line per bad seeds/references value, not the schema's dump
check_flags(config)
validate(config, CONFIG_SCHEMA)
check_integers(config, CONFIG_SCHEMA)  # JSON Schema takes 2.0 for an integer; a count is refused as a float here


report: "report/workflow.rst"


include: "rules/common.smk"


check_config()
# jobs that snakemake starts (on Slurm, or in a subprocess) run under the lock of their run; a dry run writes nothing
# (workflow.dryrun reads the executor, which is chosen after parsing; the output settings know -n already)
if workflow.is_main_process and not workflow.output_settings.dryrun:
    check_free(config["results"])  # before the DAG meets another live run's incomplete files


onstart:
    if DESIGN is not None:  # the profile's packing is known from here on, not while the Snakefile is parsed
        check_design_packing(workflow.group_settings.group_components)
    acquire(config["results"])  # planning/results_lock.py: held from the first job to the end


onsuccess:
    release(config["results"])


onerror:
    release(config["results"])


GRID = run_grid()
DESIGN = config_design()  # None: the fixed design; else the looks a sequential design reads (rules/design.smk)
CHUNKS = chunk_grid(GRID.values(), seeds_per_job())  # the training jobs
# the record of what the tables may read, named by its content: rule record_grid writes it (a dry run writes nothing)
GRID_DOCUMENT = grid_document(GRID.values())
GRID_RECORD = results(grid_file(GRID_DOCUMENT))
if workflow.is_main_process:  # a Slurm job's own parse: its main process checked the folder
    check_results_on_disk()


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


include: "rules/data.smk"
include: "rules/reference.smk"
include: "rules/train.smk"
include: "rules/design.smk"
include: "rules/tables.smk"


# Both targets ask for the runs' metrics files and a sequential design's look files themselves: snakemake leaves a
# deleted file whose consumers' outputs exist alone, so a metrics or look file deleted under finished tables is
# recomputed only because a target wants it (and a recomputed file is a new one, so the tables follow).
rule tables:
    input:
        table_files(),
        rules.aggregate_tables.output.grid,
        plot_files(),
        beta_curve_plot_files(),
        design_look_files,
        run_metrics,


rule all:
    default_target: True
    input:
        table_files(),
        rules.aggregate_tables.output.grid,
        plot_files(),
        beta_curve_plot_files(),
        design_look_files,
        run_metrics,
