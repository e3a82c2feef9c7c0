# Training: one rule per pack. Its outputs are its runs' record files, so asking for one
# run's file trains its pack; a pack's spec is written to results/packs/ before training.
# Every param is `derived` (see common.smk): nothing but missing records retrains.
# Time limits use eager step times (THROUGHPUT): a CUDA-graph run falls back to eager
# steps when its self-check fails, so its limit must cover those. Longer packs start
# first (priority: their estimated seconds), so no long pack is left to run alone at the end.


for pack_id, pack in PACKS.items():

    rule:
        name:
            f"train_{pack_id}"
        output:
            run_files(pack.runs),
        log:
            f"logs/train/{pack_id}.log",
        priority: round(cost.pack_seconds(pack, THROUGHPUT))
        conda:
            "../../envs/train.yaml"
        threads: EXECUTION["cpus_per_job"]
        resources:
            runtime=cost.runtime_minutes(pack, EXECUTION["min_runtime_min"], THROUGHPUT),
            mem_mb=EXECUTION["mem_mb"],
            gpu=EXECUTION["gpus_per_job"],
        params:
            spec=derived(json.dumps(pack.to_dict())),
            spec_file=derived(f"results/packs/{pack_id}.json"),
            flags=derived(train_flags()),
            initmem=derived(INITMEM),
        shell:
            "mkdir -p results/packs && printf '%s\\n' {params.spec:q} > {params.spec_file} && "
            "{params.initmem} train {params.spec_file} results/runs {params.flags} "
            "--no-progress > {log} 2>&1"
