from experiments.synthetic_sequences.planning.chunks import chunk_record


rule train_run:
    input:
        train=PLAN.data_file("records", split="train"),
        val=PLAN.data_file("records", split="val"),
        test=PLAN.data_file("records", split="test"),
        # wired by the run's own {reference} and {mode}: a sum run of block 1 can only ever be given
        # reference/ref1/sum.json, and the scores and warm start of block 1
        train_scores=PLAN.block_file("scores", split="train"),
        val_scores=PLAN.block_file("scores", split="val"),
        reference=results(BLOCK["scale"]),
        warm_start=PLAN.warm_start_checkpoint,
    output:
        # the chunk's record, written last; each seed's own files (run_layout.RUN_OUTPUTS) are the trainer's, in
        # its run directory, checked by extract_metrics
        chunk_record(config["results"], CHUNK),
    log:
        results(f"logs/train_run/{CHUNK}.log"),
    benchmark:
        results(f"benchmarks/train_run/{CHUNK}.tsv")
    conda:
        "../envs/pipeline.yaml"
    threads: 1
    # the Slurm profile packs this group's jobs (its group-components); a design with looks trains unpacked
    # (sequential/stage.py: snakemake packs again after each checkpoint)
    group:
        PLAN.train_group()
    resources:
        runtime=PLAN.train_resource("runtime", 60),
        mem_mb=PLAN.train_resource("mem_mb", 2000),
        gpu=PLAN.train_gpus,
        # A Slurm group job runs its members one after another, so its request must be one member's width and
        # the members' summed runtime; one local-scoped slot per job makes snakemake size it that way.
        train_slots=1,
    params:
        # the run key's term, mode and alpha, the family's settings, the seeds and their folders: the plan's one flag set
        flags=PLAN.chunk_flags,
        chunk_training=PLAN.chunk_training(),
    shell:
        "python -m experiments.synthetic_sequences.training.train_disentangled --threads {threads} "
        "--chunk-training {params.chunk_training} "
        "--train-records {input.train:q} --val-records {input.val:q} --test-records {input.test:q} "
        "--train-scores {input.train_scores:q} --val-scores {input.val_scores:q} --reference {input.reference:q} "
        "{params.flags} --chunk-manifest {output:q} > {log:q} 2>&1"
