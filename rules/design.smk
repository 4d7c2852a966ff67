checkpoint design_look:
    # a sequential design's look k (sequential/look_files.py): it reads the open arms' runs at the look's layout, and its
    # file says what look k + 1 trains; the input functions of the next look and of the tables read it, verified. A
    # curve design's look k (sequential/curve_looks.py) reads the open curves' runs of stages 1..k and places stage k + 1.
    # Look 1 also records the design in the results folder (sequential/record.py), outside its declared output, which
    # snakemake would delete before the job: the record must outlive its look files
    input:
        metrics=PLAN.look_metrics,
        previous=PLAN.previous_looks,
        recomputed=PLAN.recomputed_metrics,  # the runs the looks before read, which this look recomputes
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
        module=PLAN.look_module(),
        # what decides the look, and only that: its advice takes the pilot's command from the environment
        design=PLAN.design_flags(),
    shell:
        "python -m {params.module} --look {wildcards.look} {params.design} --metrics {input.metrics:q} "
        "--previous {input.previous:q} --out {output:q} > {log:q} 2>&1"
