"""The committed laptop-scale study (results/laptop/runs.tar, and its quiet rerun with
main's code in results/laptop/quiet_rerun/): real runs, and a reviewer's rebuild of a
figure and the claims from it, without training or data."""

import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from workflow_helpers import snakemake

from initmem.cli import main
from initmem.plan import grid
from initmem.records import aggregate, archive
from initmem.records.verify import verify_archive

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


@pytest.mark.parametrize("path", [ARCHIVE, QUIET_RERUN], ids=["archive", "quiet_rerun"])
def test_the_schema_2_archives_verify_and_aggregate_without_bn_var_ratio(path: Path):
    """Written before bn_var_ratio was recorded: it reads as NaN (not measured)."""
    assert archive.read_manifest(path)["schema_version"] == 2
    runs = grid.expand_runs(grid.load_config(CONFIG))
    findings = verify_archive(path, runs)
    assert {f.state for f in findings} <= {"good", "missing"}
    assert sum(f.state == "good" for f in findings) == archive.read_manifest(path)["runs"]
    table, epochs = aggregate.aggregate(runs, *archive.read_archive(path))
    assert table["bn_var_ratio_best"].isna().all()
    assert epochs["bn_var_ratio"].to_pandas().isna().all() and epochs.num_rows > 0


@pytest.mark.slow
def test_a_figure_and_the_claims_rebuild_from_the_archive(tmp_path):
    done = snakemake(tmp_path, CONFIG, "results/figures/fig1.pdf", "results/figures/fig1.png",
                     "claims", "--config",
                     f"archive={ARCHIVE}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "results" / "figures" / "fig1.pdf").stat().st_size > 0
    # the README's picture is what the workflow draws today, pixel for pixel
    drawn = matplotlib.image.imread(tmp_path / "results" / "figures" / "fig1.png")
    assert np.array_equal(drawn, matplotlib.image.imread(ROOT / "results" / "laptop" /
                                                         "fig1.png"))
    verdicts = pd.read_csv(tmp_path / "results" / "claims" / "claims.csv")["verdict"]
    assert set(verdicts) <= {"holds", "fails", "cannot be judged"}
    assert not (tmp_path / "results" / "runs").exists()  # nothing trained


def test_the_committed_claims_are_what_the_engine_says_today(tmp_path):
    """results/laptop/claims.md (and docs/laptop.md's copy, and the README's verdicts) is
    the engine's verdict on both archives, as `make laptop` writes it: stale verdicts
    cannot hide there."""
    out = tmp_path / "claims.md"
    assert main(["claims", "--config", str(CONFIG), "--archive", str(ARCHIVE), "--archive",
                 str(QUIET_RERUN), "--label", "results/laptop/runs.tar", "--label",
                 "results/laptop/quiet_rerun/runs.tar", "--out-csv", str(tmp_path / "c.csv"),
                 "--out-tex", str(tmp_path / "c.tex"), "--out-md", str(out)]) == 0
    committed = (ROOT / "results" / "laptop" / "claims.md").read_text()
    assert out.read_text() == committed
    assert committed in (ROOT / "docs" / "laptop.md").read_text()
    verdicts = dict(pd.read_csv(tmp_path / "c.csv")[["id", "verdict"]].to_numpy())
    shown = dict(re.findall(r"^\| `(\w+)` \| (holds|fails|cannot be judged) \|",
                            (ROOT / "README.md").read_text(), re.MULTILINE))
    assert shown == verdicts
