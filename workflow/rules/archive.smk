# The raw-runs archive: every run record in one file (format: initmem.archive). With
# `--config archive=PATH` the aggregate reads that file instead and nothing is trained.

if not ARCHIVE:

    rule pack_archive:
        input:
            config=CONFIG_FILE,
            records=lambda wildcards: staged_records() if STAGING else summary_files(),
        output:
            ARCHIVE_FILE,
        log:
            "logs/archive.log",
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            initmem=INITMEM,
            expected=expected_flag(),
        shell:
            "{params.initmem} archive pack --config {input.config:q} "
            "--records results/runs {params.expected:q} --out {output:q} > {log:q} 2>&1"
