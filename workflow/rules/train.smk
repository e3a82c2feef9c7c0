# Training: one rule per training job with unfinished runs (TRAINING_JOBS, common.smk:
# up to execution.packs_per_job packs, 1 by default). Its outputs are those runs'
# summaries, so asking for one trains its packs, from their specs
# (results/packs/<pack_id>.json); finished runs are no outputs, so Snakemake never
# deletes them, and `initmem train` skips them. Specs are `ancient` inputs and every
# param is `derived` (see common.smk): regrouping runs into packs or packs into jobs
# retrains nothing; only missing records train. Time limits use eager step times
# (THROUGHPUT): a CUDA-graph run falls back to eager steps when its self-check fails, so
# its limit must cover those; and the expected epochs of early-stopping runs (STOPPING):
# a job that outruns its limit checkpoints at SIGUSR1 and is resubmitted.
# Longer jobs start first (priority: their estimated seconds), so no long job is left to
# run alone at the end. One job writes every spec, before any training starts: a
# training job is only ready once its spec exists, so specs written one per freed core
# let whichever pack's spec came first train first, not the longest; and Snakemake runs
# each `run:` job in a fresh process that parses the workflow again (4 s, so 2.5 of the
# demo's 6 minutes went to 75 one-spec jobs). When one spec is missing, all are written
# again from the config as it is, which is what one job per spec wrote too.


if TRAINING_JOBS:

    rule write_pack_specs:
        output:
            [
                f"results/packs/{pack_id}.json"
                for pack_ids in TRAINING_JOBS.values()
                for pack_id in pack_ids
            ],
        log:
            "logs/packs.log",
        localrule: True
        run:
            for path in output:
                PACKS[Path(path).stem].dump(path)


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
            "{params.initmem} train {input.specs:q} results/runs {params.flags:q} "
            "--no-progress > {log:q} 2>&1"
