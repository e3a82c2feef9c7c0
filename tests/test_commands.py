"""The README's and the design's commands, run exactly as a user types them.

`snakemake tables`, `snakemake results/figures/fig3.pdf` and `snakemake --profile slurm
all` rely on Snakemake finding profiles/default (the workflow's profile) and the named
profile `slurm` by themselves; `make demo` on its prerequisite check. Each runs in a
scratch folder laid out as the checkout, so nothing here writes into the checkout.
"""

import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch
from workflow_helpers import ROOT, TEST_CONFIG, job_counts, scratch_checkout, typed

from initmem.plan import artifacts


def test_snakemake_tables_dry_run_of_the_paper_as_typed(tmp_path):
    done = typed("snakemake tables -n", scratch_checkout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    counts = job_counts(done.stdout)
    assert sum(n for r, n in counts.items() if r.startswith("train_")) == 351
    assert counts["render_table"] == 6 and counts["tables"] == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="the guard is for machines without GPU")
def test_snakemake_tables_of_the_paper_without_gpu_says_what_it_would_cost(tmp_path):
    done = typed("snakemake tables", scratch_checkout(tmp_path))
    assert done.returncode != 0
    assert "this machine has no GPU" in done.stderr and "--profile slurm" in done.stderr
    assert "make demo" in done.stderr and "make laptop" in done.stderr
    assert "Job stats" not in done.stdout + done.stderr  # it speaks before any job list
    assert not (tmp_path / "results" / "runs").exists()  # nothing trained


@pytest.mark.slow
def test_snakemake_tables_and_one_figure_as_typed(tmp_path):
    """On a tiny synthetic config as config.yaml: the design's two reviewer commands."""
    checkout = scratch_checkout(tmp_path, config=TEST_CONFIG)
    done = typed("snakemake tables", checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (checkout / "results" / "tables").glob("*.tex")) == \
        [f"{t.name}.tex" for t in artifacts.TABLES.values()]
    done = typed("snakemake results/figures/fig3.pdf", checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (checkout / "results" / "figures" / "fig3.pdf").stat().st_size > 0
    assert "train_" not in done.stdout  # the runs were trained once, for the tables


def test_slurm_profile_installs_once_and_refuses_to_replace_another(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    profile = tmp_path / "xdg" / "snakemake" / "slurm" / "config.yaml"
    done = typed("initmem slurm-profile --account lab42 --partition gpu", ROOT, env)
    assert done.returncode == 0, done.stderr
    assert f"wrote {profile}" in done.stdout and "slurm_account: lab42" in done.stdout
    text = profile.read_text()
    assert "executor: slurm" in text and "slurm_partition: gpu" in text
    assert "left unchanged" in typed("initmem slurm-profile --account lab42 --partition gpu",
                                     ROOT, env).stdout
    other = typed("initmem slurm-profile --account lab43", ROOT, env)
    assert other.returncode == 2 and "pass --force" in other.stderr
    assert "make slurm-profile ... FORCE=1" in other.stderr
    assert profile.read_text() == text
    assert typed("initmem slurm-profile --account lab43 --force", ROOT, env).returncode == 0
    assert "slurm_account: lab43" in profile.read_text()


def test_snakemake_finds_the_installed_slurm_profile_by_name(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    written = typed("initmem slurm-profile --partition gpu", ROOT, env)
    assert written.returncode == 0
    assert "note: no --account: jobs go to the cluster's default account" in written.stderr
    done = typed("snakemake --profile slurm all -n", scratch_checkout(tmp_path / "c"), env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Using profiles slurm and workflow specific profile profiles/default" in done.stderr


def test_make_slurm_profile_passes_account_and_partition(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    done = typed("make -n slurm-profile ACCOUNT=lab42 PARTITION=gpu", ROOT, env)
    assert " ".join(done.stdout.replace("\\", " ").split()) == \
        ".venv/bin/initmem slurm-profile --account 'lab42' --partition 'gpu'"  # quoted words


def path_without(tool: str, where: Path) -> str:
    """A PATH of links to what `make demo` calls up to its check, leaving `tool` out."""
    where.mkdir()
    python = os.path.realpath(sys.executable)  # a real interpreter, not a venv or shim
    (where / "python3.11").symlink_to(python)
    for name in ("make", "sh", "bash", "env", "id", "cat", "kpsewhich", "pdflatex",
                 "latexmk"):
        found = shutil.which(name)
        if name != tool and found:
            (where / name).symlink_to(found)
    return str(where)


def test_make_demo_without_data_or_network_stops_at_once_with_one_line(tmp_path):
    """A clone with no offline copy beside it, no CIFAR-10 and no network (the release's
    address refuses): one line within seconds, before the venv is built."""
    if not (shutil.which("latexmk") and shutil.which("kpsewhich")):
        pytest.skip("no TeX here: make demo stops at its TeX check first")
    checkout = scratch_checkout(tmp_path / "clone")
    (checkout / "Makefile").symlink_to(ROOT / "Makefile")
    started = time.monotonic()
    done = typed("make demo", checkout, {"PREREQUISITES_INSTALL": "no",
                                          "CIFAR10_URL": "http://127.0.0.1:9/cifar.tar.gz"})
    assert time.monotonic() - started < 10
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make:")]
    assert len(lines) == 1 and lines[0].startswith("make demo: CIFAR-10 is not in")
    assert "extract cifar-10-python.tar.gz into data/cifar10" in lines[0]
    assert not (checkout / ".venv").exists()


def test_make_demo_without_latexmk_stops_before_anything_is_built(tmp_path):
    env = {"PATH": path_without("latexmk", tmp_path / "bin"), "PREREQUISITES_INSTALL": "no"}
    done = typed("make demo", ROOT, env)
    assert done.returncode != 0
    assert "make demo: missing" in done.stderr and "latexmk" in done.stderr
    assert "sudo apt-get install" in done.stderr and "sudo dnf install" in done.stderr
    assert "brew install" in done.stderr
    assert "snakemake" not in done.stdout and "pip" not in done.stdout


def test_the_prerequisite_check_passes_where_everything_is_there(tmp_path):
    if not (shutil.which("latexmk") and shutil.which("kpsewhich")):
        pytest.skip("no TeX here")
    done = typed(f"workflow/prerequisites.sh {os.path.realpath(sys.executable)}", ROOT,
                 {"PREREQUISITES_INSTALL": "no"})
    assert done.returncode == 0, done.stderr


def test_every_command_the_readme_prints_names_a_real_target():
    """The README's and docs' snakemake lines put targets before --configfile, which takes
    every word after it (a target after it would be read as a second config file)."""
    targets = {"all", "tables", "figures", "claims", "archive", "report_files"}
    checked = 0
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for line in "\n".join(p.read_text() for p in pages).splitlines():
        words = line.split("#")[0].split()
        if "snakemake" not in words or "--configfile" not in words:
            continue
        files = words[words.index("--configfile") + 1:]
        files = files[:next((i for i, w in enumerate(files) if w.startswith("-")), None)]
        assert all(w.endswith((".yaml", "CONFIG", "\\")) for w in files), line
        assert not targets & set(files), line
        checked += 1
    assert checked >= 5
