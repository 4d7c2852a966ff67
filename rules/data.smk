from experiments.synthetic_sequences.splits import SPLITS


rule synthetic_sequences:
    output:
        # one draw for every block, or, with data.per_block, one per block (planning/data_draws.py)
        splits=expand(PLAN.data_file("records", split="{split}"), split=SPLITS, allow_missing=True),
        summary=PLAN.data_file("summary"),
    log:
        PLAN.draw_log("logs", "log"),
    benchmark:
        PLAN.draw_log("benchmarks", "tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
    params:
        out_dir=PLAN.output_folder,
        flags=PLAN.data_flags,
    shell:
        "python -m experiments.synthetic_sequences.generate --out-dir {params.out_dir:q} {params.flags} > {log:q} 2>&1"
