rule synthetic_sequences:
    output:
        splits=expand(results("data/{split}.parquet"), split=SPLITS),
        summary=results("data/summary.json"),
    log:
        results("logs/synthetic_sequences.log"),
    benchmark:
        results("benchmarks/synthetic_sequences.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=10,
        mem_mb=1000,
    params:
        out_dir=output_folder,
        flags=cli_flags("data"),
    shell:
        "python -m experiments.synthetic_sequences.generate --out-dir {params.out_dir:q} {params.flags} > {log:q} 2>&1"
