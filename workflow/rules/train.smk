# Training: one rule per pack with unfinished runs (UNFINISHED, common.smk). Its outputs
# are those runs' summaries, so asking for one trains its pack, from the pack's spec
# (results/packs/<pack_id>.json, written by its own rule); the pack's finished runs are
# no outputs, so Snakemake never deletes them, and `initmem train` skips them. The spec
# is an `ancient` input and every param is `derived` (see common.smk): regrouping runs
# into packs writes new specs but retrains nothing; only missing records train. Time
# limits use eager step times (THROUGHPUT): a CUDA-graph run falls back to eager steps
# when its self-check fails, so its limit must cover those; and the expected epochs of
# early-stopping runs (STOPPING): a pack that outruns its limit checkpoints at SIGUSR1
# and is resubmitted.
# Longer packs start first (priority: their estimated seconds), so no long pack is left
# to run alone at the end.


rule write_pack_spec:
    output:
        "results/packs/{pack_id}.json",
    log:
        "logs/packs/{pack_id}.log",
    localrule: True
    run:
        PACKS[wildcards.pack_id].dump(output[0])


for pack_id, unfinished in UNFINISHED.items():
    seconds = cost.pack_seconds(
        PACKS[pack_id], THROUGHPUT, STOPPING, EXECUTION["compaction"]
    )

    rule:
        name:
            f"train_{pack_id}"
        input:
            spec=ancient(f"results/packs/{pack_id}.json"),
        output:
            unfinished,
        log:
            f"logs/train/{pack_id}.log",
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
            "{params.initmem} train {input.spec} results/runs {params.flags} "
            "--no-progress > {log} 2>&1"
