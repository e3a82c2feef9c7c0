# Training: one rule per training job with unfinished runs (TRAINING_JOBS, common.smk:
# up to execution.packs_per_job packs, 1 by default). Its outputs are those runs'
# summaries, so asking for one trains its packs, from their specs
# (results/packs/<pack_id>.json, each written by its own rule); finished runs are no
# outputs, so Snakemake never deletes them, and `initmem train` skips them. Specs are
# `ancient` inputs and every param is `derived` (see common.smk): regrouping runs into
# packs or packs into jobs retrains nothing; only missing records train. Time limits use
# eager step times (THROUGHPUT): a CUDA-graph run falls back to eager steps when its
# self-check fails, so its limit must cover those; and the expected epochs of
# early-stopping runs (STOPPING): a job that outruns its limit checkpoints at SIGUSR1
# and is resubmitted.
# Longer jobs start first (priority: their estimated seconds), so no long job is left to
# run alone at the end. Every spec is written before any training starts (they take
# milliseconds): a training job is only ready once its spec exists, so specs written one
# per freed core let whichever pack's spec came first train first, not the longest.


rule write_pack_spec:
    output:
        "results/packs/{pack_id}.json",
    log:
        "logs/packs/{pack_id}.log",
    priority: SPEC_PRIORITY
    localrule: True
    run:
        PACKS[wildcards.pack_id].dump(output[0])


for job, pack_ids in TRAINING_JOBS.items():
    seconds = sum(PACK_SECONDS[pack_id] for pack_id in pack_ids)

    rule:
        name:
            f"train_{job}"
        input:
            specs=[ancient(f"results/packs/{pack_id}.json") for pack_id in pack_ids],
        output:
            [path for pack_id in pack_ids for path in UNFINISHED[pack_id]],
        log:
            f"logs/train/{job}.log",
        priority: round(seconds)
        conda:
            "../../envs/train.yaml"
        threads: EXECUTION["cpus_per_job"]
        resources:
            runtime=cost.limit_minutes(seconds, EXECUTION["min_runtime_min"]),
            mem_mb=EXECUTION["mem_mb"],
            gpu=EXECUTION["gpus_per_job"],
        params:
            flags=derived(train_flags()),
            initmem=derived(INITMEM),
        shell:
            "{params.initmem} train {input.specs} results/runs {params.flags} "
            "--no-progress > {log} 2>&1"
