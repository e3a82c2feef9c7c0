# Training: one rule per pack. Its outputs are its runs' record files, so asking for one
# run's file trains its pack; a pack's spec is written next to its log before training.


def train_flags():
    data = config["data"]
    flags = [f"--data-root {data['root']}", f"--device {EXECUTION['device']}"]
    flags += ["--download"] if data["download"] else []
    flags += ["--allow-unverified"] if data["allow_unverified"] else []
    return " ".join(flags)


for pack_id, pack in PACKS.items():

    rule:
        name:
            f"train_{pack_id}"
        output:
            run_files(pack.runs),
        log:
            f"logs/train/{pack_id}.log",
        params:
            spec=derived(json.dumps(pack.to_dict())),
            spec_file=derived(f"results/packs/{pack_id}.json"),
            flags=derived(train_flags()),
        threads: EXECUTION["cpus_per_job"]
        resources:
            runtime=cost.runtime_minutes(pack, EXECUTION["min_runtime_min"]),
            mem_mb=EXECUTION["mem_mb"],
            gpu=EXECUTION["gpus_per_job"],
        conda:
            "../../envs/train.yaml"
        shell:
            "mkdir -p results/packs && printf '%s\\n' {params.spec:q} > {params.spec_file} && "
            "{INITMEM} train {params.spec_file} results/runs {params.flags} "
            "--no-progress > {log} 2>&1"
