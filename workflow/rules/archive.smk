# The raw-runs archive: every run record in one file (format: initmem.archive). With
# `--config archive=PATH` the aggregate reads that file instead and nothing is trained.

if not ARCHIVE:

    rule pack_archive:
        input:
            config=CONFIG_FILE,
            records=summary_files(),
        output:
            ARCHIVE_FILE,
        log:
            "logs/archive.log",
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            initmem=INITMEM,
        shell:
            "{params.initmem} archive pack --config {input.config:q} "
            "--records results/runs --out {output:q} > {log:q} 2>&1"
