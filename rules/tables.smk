rule record_grid:
    output:
        GRID_RECORD,
    log:
        results("logs/record_grid.log"),
    run:
        # the document was built and checked at parse time; written here so that only a run that will read it writes it
        write_grid(GRID_DOCUMENT, output[0])
        Path(log[0]).write_text(f"{output[0]}: the record of {len(GRID)} runs\n")


rule extract_metrics:
    input:
        # the run's files are checked by extraction itself: hashed against metadata.json's outputs_sha256
        chunk=run_chunk,
    output:
        results(f"metrics/{RUN}.parquet"),
    log:
        results(f"logs/extract_metrics/{RUN}.log"),
    benchmark:
        results(f"benchmarks/extract_metrics/{RUN}.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=500,
    params:
        run_dir=run_folder,
    shell:
        "python -m experiments.synthetic_sequences.analysis.tables extract --run-dir {params.run_dir:q} --out {output:q} > {log:q} 2>&1"


rule aggregate_tables:
    input:
        metrics=run_metrics(),
        summary=results("data/summary.json"),
        references=reference_artifacts(),
        grid=GRID_RECORD,  # the runs the tables may read; each run's inputs are held to current_inputs()
        current=list(current_inputs().values()),
    output:
        tables=reported_table_files(),
        metrics=results("tables/metrics.parquet"),
        grid=results(f"tables/{tables_grid_file(GRID_RECORD)}"),  # a new grid is a new name: the tables rebuild
    log:
        results("logs/aggregate_tables.log"),
    benchmark:
        results("benchmarks/aggregate_tables.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=10,
        mem_mb=2000,
    params:
        out_dir=output_folder,
        control_of=control_pairs(),
        inputs=input_flags(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.tables aggregate --metrics {input.metrics:q} "
        "--data-summary {input.summary:q} --references {input.references:q} --control-of={params.control_of:q} "
        "--grid {input.grid:q} {params.inputs} --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule plots:
    input:
        runs=results("tables/runs.parquet"),
        mean_vs_sum=results("tables/mean_vs_sum.parquet"),
        curves=results("tables/curves.parquet"),
    output:
        reported_plot_files(),
    log:
        results("logs/plots.log"),
    benchmark:
        results("benchmarks/plots.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=1000,
    params:
        out_dir=output_folder,
        control_of=control_pairs(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.plots --runs {input.runs:q} "
        "--mean-vs-sum {input.mean_vs_sum:q} --curves {input.curves:q} --control-of={params.control_of:q} "
        "--out-dir {params.out_dir:q} > {log:q} 2>&1"
