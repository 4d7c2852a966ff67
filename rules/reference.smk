rule train_zfree:
    input:
        train=results("data/train.parquet"),
        val=results("data/val.parquet"),
    output:
        checkpoint=results("zfree/model.pt"),
        summary=results("zfree/model.json"),
        train_log=results("zfree/train_log.jsonl"),
    log:
        results("logs/train_zfree.log"),
    benchmark:
        results("benchmarks/train_zfree.tsv")
    conda:
        "../envs/pipeline.yaml"
    threads: 2
    resources:
        runtime=30,
        mem_mb=2000,
    params:
        flags=cli_flags("zfree"),
    shell:
        "python -m core.disentanglement.zfree --threads {threads} train --train {input.train:q} --val {input.val:q} "
        "--checkpoint {output.checkpoint:q} --log {output.train_log:q} {params.flags} > {log:q} 2>&1"


rule score_records:
    input:
        checkpoint=zfree_checkpoint(),
        records=results("data/{split}.parquet"),
    output:
        results("zfree/scores/{split}.parquet"),
    log:
        results("logs/score_records/{split}.log"),
    benchmark:
        results("benchmarks/score_records/{split}.tsv")
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
        # c_base comes from validation records only, scored in the artifact's own mode
        scores=results("zfree/scores/val.parquet"),
    output:
        results("reference/{mode}.json"),
    log:
        results("logs/reference_scale/{mode}.log"),
    benchmark:
        results("benchmarks/reference_scale/{mode}.tsv")
    conda:
        "../envs/pipeline.yaml"
    resources:
        runtime=5,
        mem_mb=1000,
    shell:
        "python -m core.disentanglement.reference --scores {input.scores:q} --mode {wildcards.mode:q} --out {output:q} > {log:q} 2>&1"
