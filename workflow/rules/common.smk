# Shared by every stage: the validated config, its packs, paths and input functions.

import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod

# initmem from this checkout, installed or not
SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))

from initmem.errors import InputError
from initmem.plan import artifacts, cost, grid, inputs, looks
from initmem.plan.claims_file import read_claims

# Snakemake's YAML reader keeps the last of a repeated key silently: the package's
# reader refuses it, naming the file and line. Then the config's one check (the schema
# and what a schema cannot say), with errors that name the key, the bad value and what is
# allowed as the only output (Snakemake would put its frames first); the rules read the
# config it returns, its defaults filled in.
try:
    for path in workflow.configfiles:
        inputs.load_yaml(path, "config")
    config.update(grid.validate_config(config))
except InputError as err:
    sys.exit(f"error: {err}")

# Rules run this checkout's initmem with the interpreter running Snakemake (the venv) or,
# under --sdm conda, the rule's environment (which does not install initmem). Snakemake
# documents no API for the deployment method in use; workflow.deployment_settings is
# where Snakemake 9 keeps the --sdm setting.
USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
# Every other value reaches a rule's shell command as a list formatted with :q (one quoted
# word each): a path or config value is an argument, never code.
INTERPRETER = "python" if USE_CONDA else sys.executable
PYTHON = f"PYTHONPATH={shlex.quote(str(SRC))} {shlex.quote(INTERPRETER)}"
INITMEM = f"{PYTHON} -m initmem"

EXECUTION = config["execution"]
# A runs archive: the aggregate reads it instead of run folders, and nothing is trained.
ARCHIVE = config["archive"]
# A staged study (config `staged`; docs/claims.md, "A study in looks") packs each look's
# seeds apart, so that a look trains only its own (workflow/rules/looks.smk).
CLAIMS_PATH = Path(workflow.basedir) / "paper" / "claims.yaml"
STAGING = (
    looks.Staging.of(config, read_claims(CLAIMS_PATH))
    if config["staged"] and not ARCHIVE
    else None
)
PACKS = {} if ARCHIVE else looks.study_packs(config, CLAIMS_PATH)
# Each pack's spec, named by its id and its content (grid.spec_name): a config edit that
# changes a pack's runs writes a new spec instead of training the old one's.
SPEC_FILES = {
    pack_id: f"results/packs/{grid.spec_name(pack_id, pack)}"
    for pack_id, pack in PACKS.items()
}
# The model of the training jobs' time limits, read once: execution.throughput_csv (its
# eager steps) or the built-in estimate. Nothing to train from an archive: no CSV needed.
THROUGHPUT = cost.BUILTIN if ARCHIVE else cost.throughput(EXECUTION)
RUNS_TABLE = "results/aggregate/runs.parquet"
# A staged study's expected runs: those its looks asked for (the asked_runs rule).
ASKED_FILE = "results/looks/runs.txt"
EPOCHS_TABLE = "results/aggregate/epochs.parquet"
CONFIG_FILE = "results/config.yaml"
ARCHIVE_FILE = "results/archive/runs.tar"
# The paper's tables and figures, as initmem.plan.artifacts declares them.
TABLE_FILES = [f"results/tables/{t.name}.tex" for t in artifacts.TABLES.values()]
FIGURE_FILES = [
    f"results/figures/{f.name}.{ext}"
    for f in artifacts.FIGURES.values()
    for ext in ("pdf", "png")
]


def numbers(declared, reads_runs):
    """A wildcard constraint: the numbers of the declared tables or figures that read
    the runs (or, reads_runs=False, that do not)."""
    return "|".join(str(n) for n, a in declared.items() if a.reads_runs == reads_runs)


TABLES_OF_RUNS = numbers(artifacts.TABLES, True)
FIGURES_OF_RUNS = numbers(artifacts.FIGURES, True)
CLAIMS_FILES = [
    *(f"results/claims/claims.{ext}" for ext in ("csv", "tex", "md")),
    "results/claims/claims_values.csv",
]
# The paper's sources; everything generated goes to results/.
PAPER_DIR = Path(workflow.basedir) / "paper"
# When early-stopping runs are expected to stop (Table 5's best epochs + patience): the
# time limits and priorities of their packs (initmem.plan.cost, "Epochs").
STOPPING = cost.config_stopping(config, PAPER_DIR / "published")
PAPER_PDF = "results/paper/paper.pdf"


# A run is finished exactly when its summary exists (written after its history). Only
# unfinished runs' summaries are training outputs (train.smk): Snakemake tests a requested
# file against every declared output by regular expression, which is most of a dry run's
# time over the paper's runs (docs/performance.md), and a file no rule declares is one
# Snakemake never deletes.
SUMMARIES = {
    pack_id: [f"results/runs/{run.run_dir}/summary.parquet" for run in pack.runs]
    for pack_id, pack in PACKS.items()
}
EXISTS = {path: os.path.exists(path) for paths in SUMMARIES.values() for path in paths}
FINISHED = [path for path, exists in EXISTS.items() if exists]
UNFINISHED = {
    pack_id: missing
    for pack_id, paths in SUMMARIES.items()
    if (missing := [path for path in paths if not EXISTS[path]])
}
# Training jobs: execution.packs_per_job packs to a job, balanced by their estimated
# seconds (priorities and SLURM time limits: train.smk). Every job of the config gets a
# rule, finished or not, since a SLURM job's own Snakemake parses the workflow again, maybe
# after another trainer finished its runs (a requeue, a node cut off, a restarted sweep),
# and must find the same rule under the same name (docs/records.md, "One trainer a pack").
PACK_SECONDS = {
    pack_id: cost.pack_seconds(pack, THROUGHPUT, STOPPING, EXECUTION["compaction"])
    for pack_id, pack in PACKS.items()
}
TRAINING_JOBS = cost.training_jobs(PACK_SECONDS, EXECUTION["packs_per_job"])


def job_outputs(pack_ids):
    """A training job's outputs: the summaries of its unfinished runs, as this parse sees
    them (none once another trainer finished them: the job then succeeds at once)."""
    return [path for pack_id in pack_ids for path in UNFINISHED.get(pack_id, [])]


def summary_files():
    """Every expected run's summary as the aggregate asks for it: a finished run's (a
    plain file, no rule makes it) and, of each training job with unfinished runs, its
    first output, which brings the job in (Snakemake matches outputs in order); the job
    makes the rest before the aggregate runs."""
    outputs = [job_outputs(ids) for ids in TRAINING_JOBS.values()]
    return FINISHED + [paths[0] for paths in outputs if paths]


def get_records():
    """What the aggregate reads: the archive, or every expected run's summary."""
    return [ARCHIVE] if ARCHIVE else summary_files()


# How a step runs, never what it computes: auto/true/false -> train's auto/on/off.
SPEED_PATHS = ("cuda_graphs", "channels_last")
SWITCH = {"auto": "auto", True: "on", False: "off"}


def train_flags():
    """train's options, a list of words (the rule quotes each)."""
    data = config["data"]
    flags = ["--data-root", data["root"], "--device", EXECUTION["device"]]
    for key in SPEED_PATHS:
        flags += [f"--{key.replace('_', '-')}", SWITCH[EXECUTION[key]]]
    flags += [] if EXECUTION["compaction"] else ["--no-compaction"]
    if EXECUTION["tensorboard"]:  # live learning curves, never read back
        flags += ["--tensorboard", EXECUTION["tensorboard"]]
    flags += ["--download"] if data["download"] else []
    flags += ["--allow-unverified"] if data["allow_unverified"] else []
    return flags


def source_digest(*modules):
    """SHA-256 of these modules of src/initmem: as a rule's param, a change of the code
    behind its output reruns it (Snakemake sees no code that a shell command runs)."""
    digest = hashlib.sha256()
    for module in modules:
        digest.update((SRC / "initmem" / module).read_bytes())
    return digest.hexdigest()


def derived(value):
    """A param that Snakemake does not record as a rerun trigger (it takes `output`).
    Record paths pin the runs' specs, so regrouping runs into packs, moving the data,
    changing device or interpreter must never retrain a finished run."""
    return lambda wildcards, output: value


def confirm_cpu_launch():
    """Before a local launch without GPU trains more than an hour of GPU work: print what
    it would cost and stop unless confirm_cpu_full is set. Snakemake documents no API for
    the jobs a run will execute; `onstart` sees the DAG, and needrun_jobs() is where
    Snakemake 9 lists them (the only reliable count: a target may need a few packs or all).
    """
    pending = [
        PACKS[pack_id]
        for job in workflow.dag.needrun_jobs()
        if job.rule.name.startswith("train_")
        for pack_id in TRAINING_JOBS[job.rule.name.removeprefix("train_")]
        if pack_id in UNFINISHED
    ]
    _stop_unless_confirmed(pending)


def aggregate_records(wildcards):
    """The aggregate's input (get_records). A target that needs it (tables, figures, the
    paper) needs every unfinished run, so the no-GPU guard can speak here, while Snakemake
    builds its DAG: before it lists hundreds of training jobs (onstart comes after)."""
    if not ARCHIVE and not workflow.dryrun:
        _stop_unless_confirmed([PACKS[pack_id] for pack_id in UNFINISHED])
    return staged_records() if STAGING else get_records()


def _stop_unless_confirmed(packs):
    if not workflow.local_exec:
        return
    warning = cost.cpu_launch_warning(
        packs, config["confirm_cpu_full"], STOPPING, EXECUTION["compaction"]
    )
    if warning:
        # SystemExit, not an error: inside an input function Snakemake would wrap an
        # error in a traceback; the guard is a message, not a failure of the code
        print(f"\n{warning}\n", file=sys.stderr)
        raise SystemExit(1)


# The HTML report: its pages, and what it shows where (workflow/rules/report.smk).
REPORT_DIR = "results/report"
CAPTIONS = Path(workflow.basedir) / "workflow" / "report"
MARKS_FILE = f"{REPORT_DIR}/marks.json"
# The front page's figure (workflow/report/workflow.rst includes it).
FRONT_FILE = f"{REPORT_DIR}/front.rst"


def config_path():
    """The config file this run read, absolute."""
    return Path(
        workflow.configfiles[-1] if workflow.configfiles else "config.yaml"
    ).resolve()


def config_name():
    """The config file this run read, relative to the checkout when it lies inside."""
    path = config_path()
    base = Path(workflow.basedir).resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


# The report's own pages sit under the category every table and figure follows
# (theirs: initmem.plan.artifacts, with their captions).
REPRODUCTION = artifacts.REPRODUCTION


def reported(path, caption, section):
    category, subcategory = section
    return report(
        path,
        caption=str(CAPTIONS / f"{caption}.rst"),
        category=category,
        subcategory=subcategory,
    )


def get_report_files():
    """Every file the report shows: run status, scorecard, claims and paper first, then
    every declared figure and table under its section, with its caption."""
    files = [
        reported(f"{REPORT_DIR}/status.html", "status", (REPRODUCTION, "Run status")),
        reported(
            f"{REPORT_DIR}/scorecard.html", "scorecard", (REPRODUCTION, "Scorecard")
        ),
        reported(f"{REPORT_DIR}/claims.html", "claims", (REPRODUCTION, "Claims")),
        reported(PAPER_PDF, "paper", (REPRODUCTION, "Paper")),
    ]
    files += [
        reported(f"results/figures/{f.name}.png", f.caption, f.section)
        for f in artifacts.FIGURES.values()
    ]
    files += [
        reported(f"{REPORT_DIR}/tables/{t.name}.html", t.caption, t.section)
        for t in artifacts.TABLES.values()
    ]
    return files
