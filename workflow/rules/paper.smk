# The paper: latexmk on paper/main.tex once every table, figure and number exists.


rule build_paper:
    input:
        sources=sorted(glob.glob("paper/*.tex") + glob.glob("paper/*.bib")),
        tables=TABLE_FILES,
        figures=FIGURE_FILES,
        macros="results/paper/macros.tex",
        scorecard="results/scorecard/scorecard.tex",
    output:
        PAPER_PDF,
    log:
        "logs/paper.log",
    localrule: True
    shell:
        "latexmk -pdf -interaction=nonstopmode -halt-on-error -outdir=paper/build "
        "paper/main.tex > {log} 2>&1 && cp paper/build/main.pdf {output}"
