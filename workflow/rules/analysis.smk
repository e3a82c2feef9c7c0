# Tables, figures, macros and scorecard: each calls its `python -m initmem` command on the
# aggregated tables. Every file is its own target and needs only the aggregate.


rule render_table:
    input:
        runs=RUNS_TABLE,
        config=CONFIG_FILE,
    output:
        tex="results/tables/table{n}.tex",
        csv="results/tables/table{n}.csv",
    log:
        "logs/tables/table{n}.log",
    wildcard_constraints:
        n=TABLES_OF_RUNS,
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        strict=["--strict"] if config["strict"] else [],
    shell:
        "{params.initmem} table {wildcards.n:q} --runs {input.runs:q} "
        "--config {input.config:q} --out {output.tex:q} {params.strict:q} > {log:q} 2>&1"


rule render_settings_table:
    # Table 1 (optimizer settings) comes from the config alone: no training needed
    # (artifacts.TABLES: the one table that reads no runs)
    input:
        config=CONFIG_FILE,
    output:
        tex="results/tables/table1.tex",
        csv="results/tables/table1.csv",
    log:
        "logs/tables/table1.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} table 1 --config {input.config:q} --out {output.tex:q} "
        "> {log:q} 2>&1"


rule draw_figure:
    input:
        runs=RUNS_TABLE,
        epochs=EPOCHS_TABLE,
        config=CONFIG_FILE,
    output:
        pdf="results/figures/fig{n}.pdf",
        png="results/figures/fig{n}.png",
    log:
        "logs/figures/fig{n}.log",
    wildcard_constraints:
        n=FIGURES_OF_RUNS,
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} figure {wildcards.n:q} --runs {input.runs:q} "
        "--epochs {input.epochs:q} --config {input.config:q} --pdf {output.pdf:q} "
        "--png {output.png:q} > {log:q} 2>&1"


rule draw_toy_figure:
    # Fig. 9 is the toy model of App. G: no runs, and a table of its own beside it
    output:
        pdf="results/figures/fig9.pdf",
        png="results/figures/fig9.png",
        csv="results/figures/fig9.csv",
    log:
        "logs/figures/fig9.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} figure 9 --pdf {output.pdf:q} --png {output.png:q} > {log:q} 2>&1"


rule write_macros:
    input:
        runs=RUNS_TABLE,
        epochs=EPOCHS_TABLE,
        config=CONFIG_FILE,
    output:
        "results/paper/macros.tex",
    log:
        "logs/macros.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} macros --runs {input.runs:q} --epochs {input.epochs:q} "
        "--config {input.config:q} --out {output:q} > {log:q} 2>&1"


rule score_reproduction:
    input:
        runs=RUNS_TABLE,
        config=CONFIG_FILE,
        tables=[
            f"results/tables/{t.name}.csv"
            for t in artifacts.TABLES.values()
            if t.reads_runs
        ],
        published=PAPER_DIR / "published",
    output:
        csv="results/scorecard/scorecard.csv",
        tex="results/scorecard/scorecard.tex",
    log:
        "logs/scorecard.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} scorecard --runs {input.runs:q} --tables results/tables "
        "--published {input.published:q} --config {input.config:q} "
        "--out-csv {output.csv:q} --out-tex {output.tex:q} > {log:q} 2>&1"


rule judge_claims:
    input:
        runs=RUNS_TABLE,
        epochs=EPOCHS_TABLE,
        claims=PAPER_DIR / "claims.yaml",
        config=CONFIG_FILE,
        compared=config["compare_archives"],
    output:
        csv="results/claims/claims.csv",
        tex="results/claims/claims.tex",
        md="results/claims/claims.md",
        values="results/claims/claims_values.csv",
    log:
        "logs/claims.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        # reruns of the same config, judged each: a claim whose verdicts differ is "not robust"
        compared=[
            word
            for a in config["compare_archives"]
            for word in ("--archive", a, "--label", a)
        ],
        label=ARCHIVE or "results/runs",
        # the verdicts are the engine's: a new engine judges again
        engine=source_digest(
            "analysis/claims.py", "analysis/inference.py", "analysis/gates.py"
        ),
    shell:
        "{params.initmem} claims --runs {input.runs:q} --epochs {input.epochs:q} "
        "--label {params.label:q} {params.compared:q} --config {input.config:q} "
        "--claims {input.claims:q} --out-csv {output.csv:q} --out-tex {output.tex:q} "
        "--out-md {output.md:q} --out-values {output.values:q} > {log:q} 2>&1"
