rule record_grid:
    input:
        looks=PLAN.look_files,  # a sequential design's look files: the runs its looks trained
    output:
        PLAN.grid_record_pattern(),
    log:
        PLAN.grid_record_log(),
    run:
        # written here so that only a run that will read it writes it
        PLAN.write_grid_record(output[0], log[0])


rule extract_metrics:
    input:
        # the run's files are checked by extraction itself: hashed against metadata.json's outputs_sha256
        chunk=PLAN.run_chunk,
    output:
        results(METRICS_TEMPLATE.format(run=RUN)),
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
        run_dir=PLAN.run_folder,
    shell:
        EXTRACT_METRICS.format(run_dir="{params.run_dir:q}", out="{output:q}") + " > {log:q} 2>&1"


rule aggregate_tables:
    input:
        metrics=PLAN.run_metrics,
        summaries=PLAN.data_summary_files,
        references=PLAN.scale_files,
        grid=PLAN.grid_record_file,  # the runs the tables may read; each run's inputs are held to current_inputs()
        current=PLAN.current_input_files,
        looks=PLAN.look_files,
    output:
        tables=[reported(t) if t.endswith((".csv", "verdict.md")) else t for t in PLAN.table_files()],
        metrics=results("tables/metrics.parquet"),
        grid=PLAN.tables_grid_copy(),  # under the fixed design a new grid is a new name: the tables rebuild
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
        out_dir=PLAN.output_folder,
        control_of=PLAN.control_pairs(),
        primary=PLAN.primary_flag(),
        inputs=PLAN.input_flags,
        data_summaries=PLAN.data_summary_flags,
        pilot=PLAN.pilot_flags(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.tables aggregate --metrics {input.metrics:q} "
        "--data-summary {params.data_summaries} --references {input.references:q} --control-of={params.control_of:q} "
        "--primary {params.primary} "
        "--grid {input.grid:q} --grid-copy {output.grid:q} {params.inputs} --looks {input.looks:q} "
        "--out-dir {params.out_dir:q} {params.pilot} > {log:q} 2>&1"


rule plots:
    input:
        runs=results("tables/runs.parquet"),
        mean_vs_sum=results("tables/mean_vs_sum.parquet"),
        curves=results("tables/curves.parquet"),
        cross_term=results("tables/cross_term.parquet"),
    output:
        [reported(path) for path in PLAN.plot_files()],
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
        out_dir=PLAN.output_folder,
        control_of=PLAN.control_pairs(),
        per_term=PLAN.plot_split_flag(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.report.plots --runs {input.runs:q} "
        "--mean-vs-sum {input.mean_vs_sum:q} --curves {input.curves:q} --cross-term {input.cross_term:q} --control-of={params.control_of:q} "
        "{params.per_term}--out-dir {params.out_dir:q} > {log:q} 2>&1"


rule beta_curve_plot:
    input:
        runs=results("tables/runs.parquet"),
        table=results("tables/beta_curves.parquet"),
    output:
        reported(results("plots/beta_curves.png")),
    log:
        results("logs/beta_curve_plot.log"),
    benchmark:
        results("benchmarks/beta_curve_plot.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=1000,
    params:
        control_of=PLAN.control_pairs(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.report.beta_curve_plot {input.runs:q} --table {input.table:q} "
        "--control-of={params.control_of:q} --plot {output:q} > {log:q} 2>&1"


# The targets ask for the runs' metrics files and a sequential design's look files themselves: snakemake leaves a
# deleted file whose consumers' outputs exist alone, so a metrics or look file deleted under finished tables is
# recomputed only because a target wants it (and a recomputed file is a new one, so the tables follow).
TARGETS = [
    PLAN.table_files(),
    rules.aggregate_tables.output.grid,
    PLAN.plot_files(),
    PLAN.beta_curve_plot_files(),
    PLAN.look_files,
    PLAN.run_metrics,
]


rule tables:
    input:
        *TARGETS,
