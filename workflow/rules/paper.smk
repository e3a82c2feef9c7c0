# The paper: paper/main.tex finds every generated input under results/ (initmem.paper);
# it is built once every table, figure and number exists.


rule write_paper_status:
    input:
        runs=RUNS_TABLE,
    output:
        "results/paper/status.tex",
    log:
        "logs/paper_status.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"
    params:
        initmem=INITMEM,
        config_name=config_name(),
        archive=["--archive", ARCHIVE] if ARCHIVE else [],
    shell:
        "{params.initmem} paper status --runs {input.runs:q} --out {output:q} "
        "--config-name {params.config_name:q} {params.archive:q} > {log:q} 2>&1"


rule build_paper:
    input:
        sources=sorted(PAPER_DIR.glob("*.tex")),
        tables=TABLE_FILES,
        figures=FIGURE_FILES,
        macros="results/paper/macros.tex",
        status="results/paper/status.tex",
        scorecard="results/scorecard/scorecard.tex",
        claims="results/claims/claims.tex",
    output:
        PAPER_PDF,
    log:
        "logs/paper.log",
    localrule: True
    conda:
        "../../envs/analysis.yaml"  # latexmk and TeX come from the system
    params:
        initmem=INITMEM,
        paper=PAPER_DIR,
    shell:
        "{params.initmem} paper build --paper {params.paper:q} --results results "
        "--out {output:q} > {log:q} 2>&1"
