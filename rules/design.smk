checkpoint design_look:
    # a sequential design's look k (analysis/look_files.py): it reads the open arms' runs at the look's layout, and its
    # file says what look k + 1 trains; the input functions of the next look and of the tables read it, verified.
    # Look 1 also records the design in the results folder (planning/design_record.py), outside its declared output, which
    # snakemake would delete before the job: the record must outlive its look files
    input:
        metrics=look_metrics,
        previous=previous_look,
    output:
        results(LOOK),
    log:
        results("logs/design_look/look{look}.log"),
    benchmark:
        results("benchmarks/design_look/look{look}.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=1000,
    params:
        design=design_flag(),
        control_of=control_pairs(),
        reset=reset_flag(),
        pilot=pilot_flags(),
    shell:
        "python -m experiments.synthetic_sequences.analysis.look_files --look {wildcards.look} --design {params.design} "
        "--control-of={params.control_of:q} --metrics {input.metrics:q} --previous {input.previous:q} {params.reset} "
        "--out {output:q} {params.pilot} > {log:q} 2>&1"
