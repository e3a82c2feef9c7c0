"""The committed laptop-scale study v2 (results/laptop/v2/runs.tar, and the rerun of its
central cells in results/laptop/v2/rerun/): real runs, and a reviewer's rebuild of a
figure and the claims from it, without training or data. The first study's archives
(results/laptop/runs.tar and quiet_rerun/, schema 2) stay as the older record format's
test data."""

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
LAPTOP = ROOT / "results" / "laptop"
ARCHIVE, RERUN = LAPTOP / "v2" / "runs.tar", LAPTOP / "v2" / "rerun" / "runs.tar"
CONFIG = ROOT / "config" / "laptop_v2.yaml"
FIRST_ARCHIVE, FIRST_RERUN = LAPTOP / "runs.tar", LAPTOP / "quiet_rerun" / "runs.tar"
FIRST_CONFIG = ROOT / "config" / "laptop.yaml"


@pytest.mark.parametrize(("path", "least"), [(ARCHIVE, 55), (RERUN, 25)],
                         ids=["archive", "rerun"])
def test_the_archive_holds_real_trained_cifar10_runs_of_one_commit(path: Path, least: int):
    summaries, histories = (t.to_pandas() for t in archive.read_archive(path))
    assert len(summaries) >= least
    assert set(summaries["record_source"]) == {"trained"}
    assert set(summaries["dataset"]) == {"cifar10"}
    assert set(histories["run_id"]) == set(summaries["run_id"])
    assert summaries["code_version"].nunique() == 1 and summaries["code_version"].notna().all()
    manifest = archive.read_manifest(path)
    assert grid.archived(manifest["config"]) == grid.archived(
        grid.experiment_config(grid.load_config(CONFIG)))  # its spelling of before schema 5


def test_the_rerun_is_other_code_and_threads_on_the_same_runs():
    """What code-level float differences do: the same runs, another commit, two threads."""
    first, rerun = (archive.read_archive(p)[0].to_pandas().set_index("run_id")
                    for p in (ARCHIVE, RERUN))
    assert set(rerun.index) <= set(first.index)
    assert set(first["code_version"]) != set(rerun["code_version"])


@pytest.mark.parametrize("path", [FIRST_ARCHIVE, FIRST_RERUN], ids=["first", "first_rerun"])
def test_the_schema_2_archives_verify_and_aggregate_without_bn_var_ratio(path: Path):
    """Written before bn_var_ratio was recorded: it reads as NaN (not measured)."""
    assert archive.read_manifest(path)["schema_version"] == 2
    runs = grid.expand_runs(grid.load_config(FIRST_CONFIG))
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
                 str(RERUN), "--label", "results/laptop/v2/runs.tar", "--label",
                 "results/laptop/v2/rerun/runs.tar", "--out-csv", str(tmp_path / "c.csv"),
                 "--out-tex", str(tmp_path / "c.tex"), "--out-md", str(out)]) == 0
    committed = (ROOT / "results" / "laptop" / "claims.md").read_text()
    assert out.read_text() == committed
    assert committed in (ROOT / "docs" / "laptop.md").read_text()
    verdicts = dict(pd.read_csv(tmp_path / "c.csv")[["id", "verdict"]].to_numpy())
    shown = dict(re.findall(r"^\| `(\w+)` \| (holds|fails|cannot be judged) \|",
                            (ROOT / "README.md").read_text(), re.MULTILINE))
    assert shown == verdicts
