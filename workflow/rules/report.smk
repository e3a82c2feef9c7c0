# The HTML report's own pages (`snakemake --report`): what Snakemake cannot show from LaTeX
# or CSV (Tables 1-7, scorecard, claims) and the run status (initmem.paper.report). What
# the report shows, with its captions (workflow/report/) and places in the paper:
# get_report_files in common.smk, the Snakefile's `report_files` target.


rule write_report_status:
    input:
        runs=RUNS_TABLE,
        config=CONFIG_FILE,
    output:
        status=f"{REPORT_DIR}/status.html",
        marks=MARKS_FILE,
    log:
        "logs/report/status.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        config_name=config_name(),
        # a live sweep's page adds `initmem status` (trainers, device-hours) of its records
        source=(
            ["--archive", ARCHIVE]
            if ARCHIVE
            else [
                "--records",
                "results/runs",
                "--sweep-config",
                config_path(),
                "--published",
                PAPER_DIR / "published",
            ]
        ),
    shell:
        "{params.initmem} report status --runs {input.runs:q} "
        "--config-name {params.config_name:q} {params.source:q} "
        "--config {input.config:q} --out {output.status:q} --marks {output.marks:q} "
        "> {log:q} 2>&1"


rule write_report_front:
    input:
        "results/figures/fig1.png",
    output:
        FRONT_FILE,
    log:
        "logs/report/front.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} report front {input:q} --out {output:q} > {log:q} 2>&1"


rule render_table_page:
    input:
        cells="results/tables/table{n}.csv",
        config=CONFIG_FILE,
        marks=MARKS_FILE,
    output:
        f"{REPORT_DIR}/tables/table{{n}}.html",
    log:
        "logs/report/table{n}.log",
    wildcard_constraints:
        n=TABLES_OF_RUNS,
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} report table {wildcards.n:q} --cells {input.cells:q} "
        "--config {input.config:q} --marks {input.marks:q} --out {output:q} "
        "> {log:q} 2>&1"


rule render_settings_table_page:
    input:
        config=CONFIG_FILE,
        marks=MARKS_FILE,
    output:
        f"{REPORT_DIR}/tables/table1.html",
    log:
        "logs/report/table1.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
    shell:
        "{params.initmem} report table 1 --config {input.config:q} "
        "--marks {input.marks:q} --out {output:q} > {log:q} 2>&1"


rule render_csv_page:
    input:
        csv="results/{name}/{name}.csv",
        marks=MARKS_FILE,
    output:
        f"{REPORT_DIR}/{{name}}.html",
    log:
        "logs/report/{name}.log",
    wildcard_constraints:
        name="scorecard|claims",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        title=lambda wildcards: wildcards.name.capitalize(),
    shell:
        "{params.initmem} report csv {input.csv:q} --title {params.title:q} "
        "--marks {input.marks:q} --out {output:q} > {log:q} 2>&1"
