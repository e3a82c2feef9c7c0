"""Commands typed from anywhere: every `initmem` subcommand from a folder outside the
checkout (paths the package owns resolve from it, paths typed from where they are typed:
initmem.checkout), and the commands README.md and docs/ show, run as typed."""

from __future__ import annotations

import re
import time

import pytest
from workflow_helpers import ROOT, scratch_checkout, typed

from initmem import cli

LAPTOP = ROOT / "config" / "laptop_v2.yaml"
ARCHIVE = ROOT / "results" / "laptop" / "v2" / "runs.tar"
GPU_FIRST = ROOT / "config" / "gpu_first.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """`initmem ARGV` in this process: its exit status and what it printed."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as done:  # argparse: --help, or bad arguments
        code = done.code
    out = capsys.readouterr()
    return code, out.out + out.err


def test_every_subcommand_answers_help_from_another_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in cli.COMMANDS:
        code, out = run([name, "--help"], capsys)
        assert code == 0 and f"usage: initmem {name}" in out, out


# Each subcommand that reads no training data, typed from a temporary folder with the
# paths a user would type there (absolute). The rest need CIFAR-10, TeX, Chromium or a
# server: train, cifar10-copy, figure (matplotlib: test_figures), paper (latexmk),
# report (pages: test_report), tensorboard (test_tensorboard), macros and scorecard
# (an aggregate of the workflow's: test_workflow); their --help runs above.
ANYWHERE = {
    "grid": (["grid", "--config", GPU_FIRST], "total"),
    "cost gpu_first": (["cost", "--config", GPU_FIRST], "paper/published/table5.csv"),
    "cost laptop": (["cost", "--config", LAPTOP], "total"),  # its throughput_csv
    "status": (["status", "--config", LAPTOP], "of 6.39 projected"),
    "claims --plan": (["claims", "--plan", "--config", LAPTOP, "--draws", "0"],
                      "| `sgd_clock_threshold` |"),
    "verify": (["verify", "--config", LAPTOP, "--archive", ARCHIVE], "55 good"),
    "archive config": (["archive", "config", ARCHIVE], "families:"),
    "results": (["results", "--config", LAPTOP, "--root", "{tmp}/results"], ""),
    "aggregate": (["aggregate", "--config", LAPTOP, "--archive", ARCHIVE, "--runs",
                   "runs.parquet", "--epochs", "epochs.parquet"], ""),
    "table": (["table", "1", "--config", LAPTOP, "--out", "table1.tex"], ""),
    "synthetic-records": (["synthetic-records", "--config", ROOT / "config" / "test.yaml",
                           "--out-dir", "synthetic"], ""),
    "slurm-profile": (["slurm-profile", "--account", "lab42"], "slurm"),
}


# claims --plan designs the laptop study's seeds (14 s): with the slow tier.
SLOW = {"claims --plan"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in sorted(ANYWHERE)])
def test_subcommand_runs_from_another_folder(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # slurm-profile's home
    argv, expected = ANYWHERE[name]
    code, out = run([str(a).format(tmp=tmp_path) for a in argv], capsys)
    assert code == 0, out
    assert expected in out
    assert "does not exist" not in out


# The commands of README.md and docs/*.md: the lines of code blocks (indented or fenced)
# that start with one of these, and inline code that does and names a file or the config
# (`--config CONFIG`); prose also names a command alone (`initmem cost`), a reference,
# not a line to type.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TYPED = re.compile(r"^(initmem|snakemake|make) ")
NAMES_A_FILE = re.compile(r"\S/\S|\.(yaml|tar)\b")
# where a line's command ends: a comment, or the aligned description of a listing
COMMAND_END = re.compile(r"\s+#|\s{3,}")
# A template, not a command: placeholders (CONFIG, <recipe_id>), alternatives, ellipses.
TEMPLATE = re.compile(r"\b[A-Z][A-Z0-9_]*\b(?!=)|<[^>]+>|\[|\||\.\.\.")
# Typed commands not run here, and why (test_skipped_commands_are_still_documented keeps
# this list honest).
SKIPPED = {
    "make demo": "trains the demo for minutes (bench/fresh_demo.py, test_demo)",
    "make test": "the test suite itself",
    "make test-slow": "the test suite itself",
    "make lint": "CI's first step",
    "make laptop": "rebuilds the laptop study (test_environment's two clones)",
    "make demo report": "trains the demo",
    "make slurm-profile ACCOUNT=lab42 PARTITION=gpu": "test_commands runs it with its own "
                                                      "XDG_CONFIG_HOME",
    "initmem status --config config.yaml --watch 60": "redraws until Ctrl-C",
    "initmem tensorboard results/runs tb && tensorboard --logdir tb": "starts a server",
    "initmem cifar10-copy data/cifar10": "builds CIFAR-10 from ../shared",
    "initmem claims --runs results/aggregate/runs.parquet --epochs "
    "results/aggregate/epochs.parquet --out-csv claims.csv --out-tex claims.tex":
        "reads the workflow's aggregate (test_workflow)",
    "snakemake --profile slurm all": "submits to a SLURM cluster (test_slurm)",
    "snakemake --profile slurm all --configfile config/gpu_first.yaml": "submits to SLURM",
    "initmem slurm-profile": "writes the user's profile (the slurm-profile case above, with "
                             "its own XDG_CONFIG_HOME; test_slurm_nodes)",
    "snakemake --profile slurm all --configfile config/test.yaml --slurm-no-account "
    "--slurm-status-command squeue": "submits to a two-node SLURM (test_slurm_nodes)",
    "snakemake results/figures/fig2.pdf --configfile archived.yaml --config "
    "archive=results/archive/runs.tar": "needs the archive `snakemake archive` packs",
    "snakemake --report results/report/report.html report_files --configfile CONFIG":
        "writes the report of report_files' outputs, even with -n (test_report)",
}


def documented_commands() -> list[str]:
    """Every command line the docs show, continuation lines joined, comments dropped."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        code = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
        code += [m.group(0) for m in re.finditer(r"(?:^ {4}.*\n)+", text, re.M)]
        lines = re.sub(r"\\\n\s*", " ", "\n".join(code)).splitlines()
        lines += [s for s in re.findall(r"`([^`\n]+)`", text)
                  if NAMES_A_FILE.search(s) or set(s.split()) & set(PLACEHOLDERS)]
        for line in lines:
            command = COMMAND_END.split(line.strip())[0]
            if TYPED.match(command) and not re.match(r"^\S+ \S+:", command):  # not output
                found.append(" ".join(command.split()))
    return list(dict.fromkeys(found))


def test_the_docs_show_the_commands_the_issue_named():
    commands = documented_commands()
    assert "initmem claims --plan --config CONFIG" in commands  # README, as typed
    assert as_run("initmem claims --plan --config CONFIG") == \
        "initmem claims --plan --config config/laptop_v2.yaml"
    assert "initmem claims --plan --config config/gpu_first.yaml --noise-sd 1.5" in commands
    assert "make laptop" in commands and "snakemake tables" in commands
    assert not any(c.startswith("initmem train:") for c in commands)  # error output


def test_skipped_commands_are_still_documented():
    assert set(SKIPPED) <= set(documented_commands())


# A template whose only placeholder is the config runs with this one in its place.
PLACEHOLDERS = {"CONFIG": "config/laptop_v2.yaml", "C": "config/laptop_v2.yaml"}


def as_run(command: str) -> str | None:
    """The command as this test runs it: placeholders filled, Snakemake and make dry
    (-n), initmem as typed; None for a template it cannot fill."""
    words = [PLACEHOLDERS.get(w, w) for w in command.split()]
    command = " ".join(words)
    if TEMPLATE.search(command):
        return None
    return f"{command} -n" if words[0] in ("snakemake", "make") else command


@pytest.mark.slow
def test_documented_commands_run_as_typed(tmp_path):
    """Each command from a scratch checkout laid out as this one (it writes only there):
    initmem's as typed, Snakemake's and make's dry (-n: the targets, configs and files
    they name exist and the workflow plans them)."""
    where = scratch_checkout(tmp_path / "checkout")
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        (where / name).symlink_to(ROOT / name)
    for path in (ROOT / "config").iterdir():  # the configs' files beside them (a CSV)
        if not (where / "config" / path.name).exists():
            (where / "config" / path.name).symlink_to(path)
    (where / "results").mkdir()  # the committed studies' archives, read only
    (where / "results" / "laptop").symlink_to(ROOT / "results" / "laptop")
    ran, skipped = [], []
    for command in documented_commands():
        line = None if command in SKIPPED else as_run(command)
        if line is None:
            skipped.append(command)
            continue
        if any(r.startswith(f"{line}  (") for r in ran):  # a template filled as typed
            continue
        start = time.monotonic()
        done = typed(line, where, timeout=600)
        assert done.returncode == 0, f"{command}:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        ran.append(f"{line}  ({time.monotonic() - start:.1f} s)")
    print("ran:", *ran, "skipped:", *(f"{c}: {SKIPPED.get(c, 'a template')}" for c in skipped),
          sep="\n  ")
    assert len(ran) >= 10, ran
