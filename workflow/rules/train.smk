# Training: one rule per training job of the config (TRAINING_JOBS, common.smk: up to
# execution.packs_per_job packs, 1 by default), finished or not, so that a SLURM job's own
# Snakemake always finds its rule. Its outputs are its unfinished runs' summaries, so
# asking for one trains its packs, from their specs (results/packs/<pack_id>.<key>.json:
# SPEC_FILES, common.smk);
# finished runs are no outputs, and `initmem train` skips them. No finished record is ever
# deleted (docs/records.md, "One trainer a pack"): the outputs are update(), which
# Snakemake never removes before a job runs, even when another trainer finished them
# meanwhile; the profiles keep a failed job's outputs (keep-incomplete: a summary is
# written whole or not at all). Specs are `ancient` inputs and every param is `derived`
# (see common.smk): regrouping runs into packs or packs into jobs retrains nothing; only
# missing records train. Time limits use eager step times (THROUGHPUT) and the expected
# epochs of early-stopping runs (STOPPING); a job that outruns its limit checkpoints at
# SIGUSR1 and is resubmitted. Longer jobs start first (priority: their estimated
# seconds). One job writes every spec before any training starts, so whichever pack's
# spec came first never trains first by accident, and the specs cost one parse, not one
# each; when one is missing, all are written again from the config as it is.
SPECS_TO_WRITE = [
    SPEC_FILES[pack_id]
    for pack_ids in TRAINING_JOBS.values()
    if job_outputs(pack_ids)
    for pack_id in pack_ids
]


if SPECS_TO_WRITE:

    rule write_pack_specs:
        output:
            SPECS_TO_WRITE,
        log:
            "logs/packs.log",
        localrule: True
        run:
            pack_of = {path: PACKS[pack_id] for pack_id, path in SPEC_FILES.items()}
            for path in output:
                pack_of[path].dump(path)


for job, pack_ids in TRAINING_JOBS.items():
    seconds = sum(PACK_SECONDS[pack_id] for pack_id in pack_ids)

    rule:
        name:
            f"train_{job}"
        input:
            specs=[ancient(SPEC_FILES[pack_id]) for pack_id in pack_ids],
        output:
            [update(path) for path in job_outputs(pack_ids)],
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
