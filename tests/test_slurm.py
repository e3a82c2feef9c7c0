"""The tiny synthetic config through the slurm profile on a real (local) SLURM cluster.

Start one with `.ci/local_slurm.sh start` (root; no accounting, no GPUs:
hence --slurm-no-account, --slurm-status-command squeue and the config's gpus_per_job 0).
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import (
    TEST_CONFIG,
    job_counts,
    scratch_checkout,
    snakemake,
    snakemake_background,
    typed,
)

from initmem.plan import cost, grid
from initmem.records import heartbeat, status


def cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s.startswith(("idle", "mix")) for s in done.stdout.split())


pytestmark = [
    pytest.mark.slurm,
    # one cluster, whose queue the tests read: they run one after another on one worker
    pytest.mark.xdist_group("slurm"),
    pytest.mark.skipif(not cluster_answers(), reason="no SLURM cluster answers sinfo with an "
                       "idle node (start one: .ci/local_slurm.sh start)"),
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


def one_long_pack_on_slurm(tmp_path, epochs: int) -> tuple[Path, subprocess.Popen]:
    """The test config cut to one pack of `epochs` epochs, its training submitted to SLURM
    in the background and running as far as its first checkpoint; its config file."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["grid"]["optimizer"] = ["adam"]  # one pack
    config["families"]["main"]["recipe"]["epochs"] = epochs
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    proc = snakemake_background(tmp_path, config_file, "results/aggregate/runs.parquet",
                                "--slurm-no-account", "--slurm-status-command", "squeue",
                                "--slurm-init-seconds-before-status-checks", "2",
                                profile="slurm")
    checkpoints = tmp_path / "results" / "runs" / ".checkpoints"
    deadline = time.monotonic() + 300
    while not list(checkpoints.glob("*/latest.pt")):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("no checkpoint")
        time.sleep(0.5)
    return config_file, proc


def test_status_shows_the_training_jobs_id_and_state(tmp_path):
    # epochs make the pack id this test's own: other checkouts may share the cluster
    config, proc = one_long_pack_on_slurm(tmp_path, epochs=5000 + os.getpid() % 1000)
    (pack_id,) = grid.make_packs(grid.load_config(config))
    try:
        queue = subprocess.run(["squeue", "-h", "-o", "%i|%T|%k"], capture_output=True,
                               text=True).stdout.splitlines()
        ours = [line.split("|")[:2] for line in queue if line.endswith(f"|rule_train_{pack_id}")]
        got = status.sweep_status(config, tmp_path / "results" / "runs")
    finally:
        subprocess.run(["scancel", *(job_id for job_id, _ in ours)], check=False)
        proc.kill()
        proc.wait()
    assert [state for _, state in ours] == ["RUNNING"], queue
    assert [(j["job_id"], j["state"], j["job"]) for j in got.slurm] == \
        [(ours[0][0], "RUNNING", pack_id)]
    assert got.total[status.RUNNING] == 2
    assert [(t.pack_id, t.state, t.orphan) for t in got.trainers] == \
        [(pack_id, heartbeat.LIVE, False)]  # the job's own Snakemake is above it
    assert f"{ours[0][0]}  RUNNING" in status.render(got)


def test_a_preempted_job_resumes_in_a_second_allocation(tmp_path):
    """SIGUSR1 to the job's steps (what the slurm profile's --signal=USR1@600 sends before
    the time limit, sent here at once with scancel so the test is deterministic): the pack
    checkpoints and exits 75, Snakemake resubmits it, the second allocation resumes."""
    _, proc = one_long_pack_on_slurm(tmp_path, epochs=100)  # long enough to signal it
    try:
        jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True,
                              text=True).stdout.split()
        assert len(jobs) == 1, jobs
        subprocess.run(["scancel", "--signal=USR1", jobs[0]], check=True)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    # 2 allocations, or more on a slow machine: the profile's own SIGUSR1 ten minutes
    # before the 15-minute limit preempts a second time, and each allocation resumes.
    assert (out + err).count("has been submitted with SLURM jobid") >= 2
    (log,) = (tmp_path / "logs" / "train").glob("*.log")
    assert "resumed from checkpoint" in log.read_text()
    table = pd.read_parquet(tmp_path / "results" / "aggregate" / "runs.parquet")
    assert (table["status"] == "completed").all() and (table["epochs_run"] == 100).all()


@pytest.mark.slow
def test_the_demo_through_the_named_profile_as_typed(tmp_path):
    """The README's cluster command, verbatim after `initmem slurm-profile`, plus the two
    flags a cluster without accounting needs and a 2 s first status check (the plugin's
    40 s, growing 10 s a check, suits jobs of hours, not the demo's jobs of a minute), on
    generated images (tests may not need CIFAR-10). Training jobs go to SLURM; tables,
    figures and the PDF are built here."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    checkout = scratch_checkout(tmp_path / "checkout", synthetic_demo=True)
    assert typed("initmem slurm-profile", checkout, env).returncode == 0
    done = typed("snakemake --profile slurm all --configfile config/demo.yaml "
                 "--slurm-no-account --slurm-status-command squeue "
                 "--slurm-init-seconds-before-status-checks 2", checkout, env, timeout=1800)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    config = grid.load_config(checkout / "config" / "demo.yaml")
    seconds = dict.fromkeys(grid.make_packs(config), 1.0)
    jobs = cost.training_jobs(seconds, config["execution"]["packs_per_job"])
    assert log.count("has been submitted with SLURM jobid") == len(jobs)
    assert (checkout / "results" / "paper" / "paper.pdf").stat().st_size > 0
