"""Token-sum versus token-mean reconstruction NLL: the ablation pipeline.

snakemake --cores 2                                   run the embedded default pilot (config/config.yaml)
snakemake --cores 2 --configfile config/pilot.yaml    the spec's full narrow pilot
snakemake -n                                          show what would run
snakemake --cores 2 tables --forcerun aggregate_tables    rebuild tables and plots from runs on disk
"""

from snakemake.utils import min_version, validate

from experiments.synthetic_sequences.planning.config_files import check_config_files

min_version("9.0")


configfile: "config/config.yaml"


check_config_files(workflow.configfiles)  # a key written twice is refused, not silently the last one

validate(config, "config/schema/config.schema.yaml")


report: "report/workflow.rst"


include: "rules/common.smk"


check_config()
GRID = run_grid()
CHUNKS = chunk_grid(GRID.values(), seeds_per_job())  # the training jobs
# the record of what the tables may read, rewritten at parse time (a dry run too) only when its content changes
write_grid(results(GRID_FILE), GRID.values())


# Seconds-long jobs run where snakemake runs, not as Slurm jobs: a queue wait would exceed their work. Only the
# trainings (z-free and CVAE) are submitted.
localrules:
    synthetic_sequences,
    score_records,
    reference_scale,
    extract_metrics,
    aggregate_tables,
    plots,


include: "rules/data.smk"
include: "rules/reference.smk"
include: "rules/train.smk"
include: "rules/tables.smk"


rule tables:
    input:
        table_files(),
        plot_files(),


rule all:
    default_target: True
    input:
        rules.tables.input,
