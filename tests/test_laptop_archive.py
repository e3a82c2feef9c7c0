"""The committed laptop-scale study (results/laptop/runs.tar, and its quiet rerun with
main's code in results/laptop/quiet_rerun/): real runs, and a reviewer's rebuild of a
figure and the claims from it, without training or data."""

from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import snakemake

from initmem.cli import main
from initmem.plan import grid
from initmem.records import archive

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "results" / "laptop" / "runs.tar"
QUIET_RERUN = ROOT / "results" / "laptop" / "quiet_rerun" / "runs.tar"
CONFIG = ROOT / "config" / "laptop.yaml"


@pytest.mark.parametrize("path", [ARCHIVE, QUIET_RERUN], ids=["archive", "quiet_rerun"])
def test_the_archive_holds_real_trained_cifar10_runs(path: Path):
    summaries, histories = (t.to_pandas() for t in archive.read_archive(path))
    assert len(summaries) >= 60
    assert set(summaries["record_source"]) == {"trained"}
    assert set(summaries["dataset"]) == {"cifar10"}
    assert set(histories["run_id"]) == set(summaries["run_id"])
    assert summaries["code_version"].notna().all()
    manifest = archive.read_manifest(path)
    assert manifest["config"] == grid.experiment_config(grid.load_config(CONFIG))


@pytest.mark.slow
def test_a_figure_and_the_claims_rebuild_from_the_archive(tmp_path):
    done = snakemake(tmp_path, CONFIG, "results/figures/fig1.pdf", "claims", "--config",
                     f"archive={ARCHIVE}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "results" / "figures" / "fig1.pdf").stat().st_size > 0
    verdicts = pd.read_csv(tmp_path / "results" / "claims" / "claims.csv")["verdict"]
    assert set(verdicts) <= {"holds", "fails", "cannot be judged"}
    assert not (tmp_path / "results" / "runs").exists()  # nothing trained


def test_the_committed_claims_are_what_the_engine_says_today(tmp_path):
    """results/laptop/claims.md (and the README's copy) is the engine's verdict on both
    archives, as `make laptop` writes it: stale verdicts cannot hide there."""
    out = tmp_path / "claims.md"
    assert main(["claims", "--config", str(CONFIG), "--archive", str(ARCHIVE), "--archive",
                 str(QUIET_RERUN), "--label", "results/laptop/runs.tar", "--label",
                 "results/laptop/quiet_rerun/runs.tar", "--out-csv", str(tmp_path / "c.csv"),
                 "--out-tex", str(tmp_path / "c.tex"), "--out-md", str(out)]) == 0
    committed = (ROOT / "results" / "laptop" / "claims.md").read_text()
    assert out.read_text() == committed
    assert committed in (ROOT / "README.md").read_text()
