"""The tiny synthetic config through the slurm profile on a real (local) SLURM cluster.

Start one with `workflow/scripts/local_slurm.sh start` (root; no accounting, no GPUs:
hence --slurm-no-account, --slurm-status-command squeue and the config's gpus_per_job 0).
"""

import shutil
import subprocess

import pandas as pd
import pytest
from workflow_helpers import TEST_CONFIG, job_counts, snakemake

from initmem import grid


def cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s.startswith(("idle", "mix")) for s in done.stdout.split())


pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(not cluster_answers(), reason="no SLURM cluster answers sinfo with an "
                       "idle node (start one: workflow/scripts/local_slurm.sh start)"),
]


def test_tiny_config_trains_on_slurm_and_aggregates_locally(tmp_path):
    done = snakemake(tmp_path, TEST_CONFIG, "results/aggregate/runs.parquet",
                     "--slurm-no-account", "--slurm-status-command", "squeue",
                     "--slurm-init-seconds-before-status-checks", "2",
                     profile="slurm", timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    counts = job_counts(done.stderr)
    assert sum(n for rule, n in counts.items() if rule.startswith("train_")) == 2
    assert log.count("has been submitted with SLURM jobid") == 2  # aggregate stays local

    runs = grid.expand_runs(grid.load_config(TEST_CONFIG))
    table = pd.read_parquet(tmp_path / "results" / "aggregate" / "runs.parquet")
    assert list(table["run_id"]) == [r.run_id for r in runs]
    assert (table["status"] == "completed").all()
    for run in runs:
        assert (tmp_path / "results" / "runs" / run.run_dir / "history.parquet").exists()
