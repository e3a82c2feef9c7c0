# Aggregation: every expected run's records (or the archive's) into the two tables that
# tables, figures, macros and the scorecard read.


rule write_config:
    output:
        CONFIG_FILE,
    log:
        "logs/write_config.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        # only what decides the runs: changing execution or data settings redoes nothing
        text=yaml.safe_dump(grid.experiment_config(config), sort_keys=False),
    shell:
        "printf '%s' {params.text:q} > {output:q} 2> {log:q}"


rule aggregate_runs:
    input:
        config=CONFIG_FILE,
        records=aggregate_records,
    output:
        runs=RUNS_TABLE,
        epochs=EPOCHS_TABLE,
    log:
        "logs/aggregate.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        source=["--archive", ARCHIVE] if ARCHIVE else ["--records", "results/runs"],
        expected=expected_flag(),
    shell:
        "{params.initmem} aggregate --config {input.config:q} {params.source:q} "
        "{params.expected:q} --runs {output.runs:q} --epochs {output.epochs:q} > {log:q} 2>&1"


# A staged study's expected runs: those its looks asked for (workflow/rules/looks.smk).
if STAGING:

    rule asked_runs:
        input:
            config=CONFIG_FILE,
            claims=PAPER_DIR / "claims.yaml",
            decisions=look_file(len(looks.LOOKS)),
        output:
            ASKED_FILE,
        log:
            "logs/looks/asked.log",
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            initmem=INITMEM,
        shell:
            "{params.initmem} claims --asked {input.decisions:q} --config {input.config:q} "
            "--claims {input.claims:q} --out-runs {output:q} > {log:q} 2>&1"
