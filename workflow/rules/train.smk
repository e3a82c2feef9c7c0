# Training: one rule per pack. Its outputs are its runs' record files, so asking for one
# run's file trains its pack, from the pack's spec (results/packs/<pack_id>.json, written by
# its own rule). The spec is an `ancient` input and every param is `derived` (see
# common.smk): regrouping runs into packs writes new specs but retrains nothing; only
# missing records train. Time limits use eager step times (THROUGHPUT): a CUDA-graph run
# falls back to eager steps when its self-check fails, so its limit must cover those; and
# the expected epochs of early-stopping runs (STOPPING): a pack that outruns its limit
# checkpoints at SIGUSR1 and is resubmitted.
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


for pack_id, pack in PACKS.items():

    rule:
        name:
            f"train_{pack_id}"
        input:
            spec=ancient(f"results/packs/{pack_id}.json"),
        output:
            run_files(pack.runs),
        log:
            f"logs/train/{pack_id}.log",
        priority: round(cost.pack_seconds(pack, THROUGHPUT, STOPPING, EXECUTION["compaction"]))
        conda:
            "../../envs/train.yaml"
        threads: EXECUTION["cpus_per_job"]
        resources:
            runtime=cost.runtime_minutes(
                pack,
                EXECUTION["min_runtime_min"],
                THROUGHPUT,
                STOPPING,
                EXECUTION["compaction"],
            ),
            mem_mb=EXECUTION["mem_mb"],
            gpu=EXECUTION["gpus_per_job"],
        params:
            flags=derived(train_flags()),
            initmem=derived(INITMEM),
        shell:
            "{params.initmem} train {input.spec} results/runs {params.flags} "
            "--no-progress > {log} 2>&1"
