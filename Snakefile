# Reproduce "Do Deep Networks Forget Initialization?": train every run of the config,
# aggregate the records, then render the paper's tables, figures and PDF.
#   snakemake all                                  (config.yaml: the paper)
#   snakemake all --configfile config/demo.yaml
#   snakemake --profile slurm all                  (after `initmem slurm-profile`)
# profiles/default, the workflow's profile, is read without being named.
# A --configfile replaces config.yaml entirely: each config describes every run.

from snakemake.utils import min_version

min_version("9.0")


if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/looks.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/archive.smk"
include: "workflow/rules/report.smk"


report: "workflow/report/workflow.rst"


onstart:
    confirm_cpu_launch()


rule all:
    default_target: True
    input:
        PAPER_PDF,
        TABLE_FILES,
        FIGURE_FILES,


rule tables:
    input:
        TABLE_FILES,


rule figures:
    input:
        FIGURE_FILES,


rule archive:
    input:
        ARCHIVE_FILE,


rule claims:
    input:
        CLAIMS_FILES,


# What the HTML report shows; `snakemake --report results/report/report.html report_files`
# then writes the report itself (make report).
rule report_files:
    input:
        get_report_files(),
        FRONT_FILE,
