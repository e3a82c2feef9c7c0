"""Config values and paths reach the shell as quoted words, never code (issue 34, part B):
each crafted value would run `touch MARK` if it were code; MARK must never exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_helpers import ROOT, SNAKEMAKE, TEST_CONFIG, scratch_checkout, snakemake

from initmem.plan.grid import ConfigError, load_config, validate_config
from initmem.records.archive import pack

RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
PLACEHOLDER = re.compile(r"\{(?:input|output|params|log|wildcards|threads|resources)\b[^}]*\}")
ALLOWED = "a path of letters, digits and _ . , : @ % + = / -"


def test_every_value_in_a_rules_shell_command_is_quoted():
    """{x:q} everywhere; only the interpreter prefix, quoted where it is built, is not."""
    bare = [(path.name, p) for path in RULES for p in PLACEHOLDER.findall(path.read_text())
            if not p.endswith(":q}") and p != "{params.initmem}"]
    assert not bare


@pytest.mark.parametrize(("key", "value", "named"), [
    ("data", {"root": "$(touch MARK)"}, "data.root='$(touch MARK)'"),
    ("archive", "r$(touch MARK).tar", "archive='r$(touch MARK).tar'"),
    ("compare_archives", ["a`touch MARK`.tar"], "compare_archives[0]='a`touch MARK`.tar'"),
    ("execution", {"tensorboard": "tb; touch MARK"},
     "execution.tensorboard='tb; touch MARK'"),
    ("execution", {"throughput_csv": "x|touch MARK"},
     "execution.throughput_csv='x|touch MARK'")])
def test_a_path_with_shell_characters_is_refused_naming_it(key, value, named):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    with pytest.raises(ConfigError) as error:
        validate_config({**config, key: value})
    assert f"{named} is not allowed" in str(error.value) and ALLOWED in str(error.value)


def test_the_workflow_stops_at_a_hostile_root_and_archive_running_nothing(tmp_path):
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["data"] = {"root": "$(touch MARK)"}
    (tmp_path / "hostile.yaml").write_text(yaml.safe_dump(config))
    done = snakemake(tmp_path, tmp_path / "hostile.yaml", "-n", "--config",
                     "archive=r$(touch MARK).tar")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: invalid config: archive='r$(touch MARK).tar' is not allowed; "
                      f"archive must be {ALLOWED} (no spaces, quotes or other shell "
                      "characters)"]
    assert "data.root='$(touch MARK)' is not allowed" in done.stderr
    assert not list(tmp_path.rglob("MARK"))


def test_make_reads_an_archive_with_a_hostile_name_running_nothing(tmp_path):
    """The archived-config rule of `make report ARCHIVE=`: make turns $$ into $, so the
    shell is handed r$(touch${IFS}MARK).tar, the file's real name."""
    archive = tmp_path / "r$(touch${IFS}MARK).tar"
    pack(load_config(TEST_CONFIG), tmp_path / "none", archive)
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(["make", "-f", str(ROOT / "Makefile"), f"VENV={venv}",
                           "ARCHIVED_CONFIG=archived.yaml",
                           "ARCHIVE=r$$(touch$${IFS}MARK).tar", "archived-config"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((tmp_path / "archived.yaml").read_text())["from_archive"] is True
    assert not list(tmp_path.rglob("MARK"))


@pytest.mark.slow
def test_a_checkout_path_with_shell_characters_runs_nothing(tmp_path):
    """The interpreter prefix (PYTHONPATH=<checkout>/src python) is quoted where it is
    built: a checkout in `a b$(touch MARK)` renders Table 1 and touches nothing."""
    checkout = scratch_checkout(tmp_path / "a b$(touch MARK)", TEST_CONFIG)
    done = subprocess.run([SNAKEMAKE, "results/tables/table1.tex", "--cores", "1"],
                          cwd=checkout, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (checkout / "results" / "tables" / "table1.tex").exists()
    assert not list(tmp_path.rglob("MARK"))
