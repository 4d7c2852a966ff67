from experiments.synthetic_sequences.splits import SCORED_SPLITS


rule train_zfree:
    input:
        train=PLAN.data_file("records", split="train"),
        val=PLAN.data_file("records", split="val"),
    output:
        # one z-free model per reference block, trained with the block's z-free seed
        checkpoint=results(BLOCK["checkpoint"]),
        summary=results(BLOCK["summary"]),
        train_log=results(BLOCK["train_log"]),
    log:
        results("logs/train_zfree/ref{reference}.log"),
    benchmark:
        results("benchmarks/train_zfree/ref{reference}.tsv")
    conda:
        "../envs/pipeline.yaml"
    # a second thread buys this small model nothing (bench/README.md, "Figures kept out of the code"), so the blocks'
    # models train side by side
    threads: 1
    resources:
        runtime=30,
        mem_mb=2000,
    params:
        flags=PLAN.zfree_flags,
    shell:
        "python -m core.disentanglement.zfree --threads {threads} train --train {input.train:q} --val {input.val:q} "
        "--checkpoint {output.checkpoint:q} --log {output.train_log:q} {params.flags} > {log:q} 2>&1"


rule score_records:
    input:
        checkpoint=PLAN.block_checkpoint,
        records=PLAN.data_file("records", split="{split}"),
    output:
        results(BLOCK["scores"]),
    log:
        results("logs/score_records/ref{reference}/{split}.log"),
    benchmark:
        results("benchmarks/score_records/ref{reference}/{split}.tsv")
    wildcard_constraints:
        split="|".join(SCORED_SPLITS),
    conda:
        "../envs/pipeline.yaml"
    threads: 2
    resources:
        runtime=10,
        mem_mb=2000,
    shell:
        "python -m core.disentanglement.zfree --threads {threads} score --checkpoint {input.checkpoint:q} "
        "--records {input.records:q} --out {output:q} > {log:q} 2>&1"


rule reference_scale:
    input:
        # c_base comes from the block's own validation scores only, in the artifact's own mode
        scores=PLAN.block_file("scores", split="val"),
    output:
        results(BLOCK["scale"]),
    log:
        results("logs/reference_scale/ref{reference}/{mode}.log"),
    benchmark:
        results("benchmarks/reference_scale/ref{reference}/{mode}.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=1000,
    shell:
        "python -m core.disentanglement.scale_artifact --scores {input.scores:q} --mode {wildcards.mode:q} --out {output:q} > {log:q} 2>&1"
