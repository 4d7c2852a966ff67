"""Token-sum versus token-mean reconstruction NLL: the ablation pipeline.

snakemake --cores 2            run the embedded default (config/config.yaml)
snakemake -n                   show what would run
"""

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "config/schema/config.schema.yaml")


include: "rules/common.smk"


check_config()


include: "rules/data.smk"
include: "rules/reference.smk"


rule all:
    default_target: True
    input:
        zfree_scores(),
        reference_artifacts(),
