checkpoint design_look:
    # a sequential design's look k (planning/looks.py): it reads the open arms' runs at the look's layout, and its
    # file says what look k + 1 trains; the input functions of the next look and of the tables read it
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
        previous=previous_flag,
    shell:
        "python -m experiments.synthetic_sequences.analysis.sequential --look {wildcards.look} --design {params.design} "
        "--control-of={params.control_of:q} --metrics {input.metrics:q} {params.previous} --out {output:q} > {log:q} 2>&1"
