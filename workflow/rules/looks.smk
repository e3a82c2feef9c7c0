# The staged study (config `staged`; docs/claims.md, "A study in looks"): checkpoint
# look_<j> judges every claim on the runs trained by look j and writes its decisions
# (results/looks/look<j>.csv). Look j + 1's runs are those the claims it leaves open add
# (look_runs), so Snakemake trains them only once look j has decided, and trains nothing
# more once every claim is decided. The aggregate reads every run the looks trained, and
# only those are expected of the study (ASKED_FILE, written by the asked_runs rule; the other
# runs were never needed, so they are not missing).


def look_file(j):
    return f"results/looks/look{j}.csv"


def open_after(j):
    """The claims open after look j (every claim before the first)."""
    if j == 0:
        return {cells.claim["id"] for cells in STAGING.claims}
    return looks.open_claims(getattr(checkpoints, f"look_{j}").get().output.decisions)


def look_runs(j):
    """The summaries of the runs look j (1-based) trains or reads."""
    return [
        f"results/runs/{STAGING.runs[run_id].run_dir}/summary.parquet"
        for run_id in sorted(STAGING.wanted(j - 1, open_after(j - 1)))
    ]


def staged_records():
    """The aggregate's input in a staged study: the runs the looks asked for (after the
    last look's decisions), and every run the looks trained."""
    last = len(looks.LOOKS)
    runs = set().union(*(look_runs(j) for j in range(1, last + 1)))
    return [ASKED_FILE, *sorted(runs)]


def expected_flag():
    """The aggregate's and the archive's --expected: a staged study's asked-for runs."""
    return ["--expected", ASKED_FILE] if STAGING else []


for j in range(1, len(looks.LOOKS) + 1) if STAGING else ():

    checkpoint:
        name:
            f"look_{j}"
        input:
            config=CONFIG_FILE,
            claims=PAPER_DIR / "claims.yaml",
            previous=[look_file(j - 1)] if j > 1 else [],
            summaries=lambda wildcards, j=j: look_runs(j),
        output:
            decisions=look_file(j),
        log:
            f"logs/looks/look{j}.log",
        localrule: True
        conda:
            "../../envs/analysis.yaml"
        params:
            initmem=INITMEM,
            look=j,
            previous=["--previous", look_file(j - 1)] if j > 1 else [],
        shell:
            "{params.initmem} claims --look {params.look:q} --config {input.config:q} "
            "--records results/runs {params.previous:q} --claims {input.claims:q} "
            "--out-csv {output.decisions:q} > {log:q} 2>&1"
