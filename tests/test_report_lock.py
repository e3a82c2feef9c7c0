"""`make report`'s whole recipe runs under results/report/.lock (`initmem report locked`):
a second `make report` is refused before it rewrites the archived config that the first
one's two Snakemake calls read (issue 48)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import ROOT

from initmem.errors import InputError
from initmem.paper.report import run_locked


def test_the_command_runs_under_the_lock_and_its_status_is_returned(tmp_path):
    lock = tmp_path / "report" / ".lock"
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError: sys.exit(3)")
    assert run_locked(lock, ["--", sys.executable, "-c", probe, str(lock)]) == 3  # held
    assert run_locked(lock, [sys.executable, "-c", "pass"]) == 0
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released once the command ended
    os.close(fd)


def test_a_held_lock_refuses_at_once_and_runs_nothing(tmp_path):
    lock, mark = tmp_path / ".lock", tmp_path / "MARK"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with pytest.raises(InputError, match=r"\.lock: held by another `make report`"):
        run_locked(lock, ["touch", str(mark)])
    assert not mark.exists()
    with pytest.raises(InputError, match="no command to run"):
        run_locked(tmp_path / "other.lock", ["--"])


def test_a_planted_link_is_never_written_through(tmp_path):
    target = tmp_path / "precious"
    target.write_text("keep")
    (tmp_path / ".lock").symlink_to(target)
    with pytest.raises(InputError, match="a symbolic link"):
        run_locked(tmp_path / ".lock", ["true"])
    assert target.read_text() == "keep"


def test_make_report_is_refused_while_another_holds_the_lock(tmp_path):
    """As typed: the second `make report ARCHIVE=...` exits 2 with the one-line error and
    leaves the first one's archived config as it was."""
    (tmp_path / "results" / "report").mkdir(parents=True)
    archived = tmp_path / "results" / "report" / "archived.yaml"
    archived.write_text("the first report's config\n")
    fd = os.open(tmp_path / "results" / "report" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(["make", "-f", str(ROOT / "Makefile"), f"VENV={venv}", "-o",
                           f"{venv}/.installed", "ARCHIVE=other.tar", "report"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert "held by another `make report` in this folder" in done.stderr
    assert archived.read_text() == "the first report's config\n"
