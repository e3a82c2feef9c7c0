"""The slurm profile on a real two-node SLURM (.ci/local_slurm.sh start --nodes 2: two
network namespaces with their own hostnames, sharing this filesystem), through the
commands users type; a node lost mid-training, a preempted job, one pack submitted twice,
and the fault matrix's rows that CI has time for (tests/cluster_faults.py): a node cut
off mid-epoch, and the submitting Snakemake killed mid-epoch and run again.

The module stops the single-node cluster test_slurm.py uses, starts two nodes, and
restores the single node afterwards (the SLURM tests share one pytest worker).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cluster_faults import (
    AGGREGATE,
    BIN,
    NODES,
    checkout_with,
    inject,
    kill_node,
    local_slurm,
    node_state,
    squeue,
    sweep,
    sweep_config,
    trained_values,
)
from workflow_helpers import ROOT, TEST_CONFIG, typed

from initmem.plan import grid
from initmem.records import files


def can_make_nodes() -> str | None:
    """Why this machine cannot run the two-node cluster, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, slurmd)"
    missing = [t for t in ("ip", "nsenter", "unshare", "slurmctld", "slurmd", "munged")
               if shutil.which(t) is None]
    return f"needs {', '.join(missing)}" if missing else None


pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.xdist_group("slurm"),  # one cluster: with test_slurm.py, one worker
    pytest.mark.skipif(can_make_nodes() is not None, reason=str(can_make_nodes())),
]




def single_node_up() -> bool:
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.split()) and \
        not done.stdout.startswith("imnode")


@pytest.fixture(scope="module")
def two_nodes():
    restore = single_node_up()
    local_slurm("stop")
    local_slurm("start", "--nodes", "2")
    yield NODES
    local_slurm("stop")
    if restore:
        local_slurm("start")


@pytest.fixture(scope="module")
def profile_env(two_nodes, tmp_path_factory) -> dict[str, str]:
    """The named profile `slurm`, installed as the README says (`initmem slurm-profile`)."""
    env = {"XDG_CONFIG_HOME": str(tmp_path_factory.mktemp("xdg"))}
    done = typed("initmem slurm-profile", ROOT, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return env








class Uninterrupted:
    """Configs trained here without SLURM, in one go and in the background while the
    cluster tests run (most of their time is waiting on SLURM): what they must equal."""

    def __init__(self, where: Path):
        self.where, self.training = where, {}

    def start(self, name: str, config: dict) -> None:
        checkout = checkout_with(self.where / name, config)
        with open(checkout / "snakemake.log", "w") as log:
            self.training[name] = checkout, subprocess.Popen(
                [str(BIN / "snakemake"), AGGREGATE, "--cores", "1", "--configfile",
                 "config/sweep.yaml"], cwd=checkout, stdout=log, stderr=subprocess.STDOUT)

    def __getitem__(self, name: str) -> Path:
        checkout, proc = self.training[name]
        code = proc.wait(timeout=900)
        assert code == 0, (checkout / "snakemake.log").read_text()[-5000:]
        return checkout


LONG_EPOCHS = 60  # one pack: about 30 s of training here, a checkpoint each epoch
FAULT_EPOCHS = 120  # two packs: long enough that a requeued job starts while they train


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The test config, its one pack of LONG_EPOCHS, and its two packs of FAULT_EPOCHS,
    each trained here in one go."""
    trained = Uninterrupted(tmp_path_factory.mktemp("uninterrupted"))
    trained.start("test", yaml.safe_load(TEST_CONFIG.read_text()))
    trained.start("long", sweep_config(LONG_EPOCHS, ("adam",)))
    trained.start("faults", sweep_config(FAULT_EPOCHS))
    yield trained
    for _, proc in trained.training.values():
        proc.kill()
        proc.wait()




def assert_same_training(a: Path, b: Path) -> None:
    for got, expected in zip(trained_values(a), trained_values(b), strict=True):
        pd.testing.assert_frame_equal(got, expected, check_exact=True)




def wait_for(what: str, check, timeout: float = 300.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(every)
    return got


def status_json(checkout: Path, env: dict[str, str], node: str | None = None) -> dict:
    """`initmem status --json` of the sweep, here or (srun) on a node."""
    command = [str(BIN / "initmem"), "status", "--config", "config/sweep.yaml",
               "--records", "results/runs", "--json"]
    if node is not None:
        command = ["srun", "-w", node, "-N1", "-n1", "--quiet", *command]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def finished(proc: subprocess.Popen, timeout: float = 900) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-5000:]
    return out


@pytest.fixture(scope="module")
def test_config_on_two_nodes(uninterrupted, profile_env, tmp_path_factory) -> Path:
    """config/test.yaml's whole sweep (`all`: tables, figures, paper) on the two nodes
    (`uninterrupted` first: the references train meanwhile)."""
    checkout = checkout_with(tmp_path_factory.mktemp("two") / "checkout",
                             yaml.safe_load(TEST_CONFIG.read_text()))
    done = sweep(checkout, profile_env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-5000:]
    return checkout


def test_the_test_config_spreads_over_both_nodes_and_trains_as_on_one(
        test_config_on_two_nodes, uninterrupted):
    checkout = test_config_on_two_nodes
    summary = pd.read_parquet(checkout / "results" / "aggregate" / "runs.parquet")
    assert (summary["status"] == "completed").all()
    assert sorted(summary["host"].unique()) == list(NODES)  # one pack on each
    assert summary.groupby("host")["slurm_job_id"].nunique().eq(1).all()
    assert summary["slurm_job_id"].nunique() == 2 and summary["resumed_from_epoch"].isna().all()
    for target in ("tables/table1.tex", "figures/fig1.pdf", "paper/paper.pdf"):
        assert (checkout / "results" / target).stat().st_size > 0, target
    assert_same_training(checkout, uninterrupted["test"])


def test_status_prints_the_same_counts_on_either_node_and_here(test_config_on_two_nodes,
                                                                 profile_env):
    checkout = test_config_on_two_nodes
    seen = {where: status_json(checkout, profile_env, node)
            for where, node in [("here", None), *((n, n) for n in NODES)]}
    for where, got in seen.items():
        assert got["total"]["completed"] == 4, where
        assert (got["counts"], got["total"]) == (seen["here"]["counts"], seen["here"]["total"])


@dataclass(frozen=True)
class Interrupted:
    """A sweep of one pack, preempted and then its node lost, as the test saw it."""
    checkout: Path
    job_id: str
    out: str                # the sweep's output
    resumed_at: int         # the epoch the preempted job resumed at
    lost_node: str          # where it trained when its node was lost
    seen: list[dict]        # status's trainers on the lost node while it was down


@pytest.fixture(scope="module")
def interrupted(profile_env, tmp_path_factory) -> Interrupted:
    """One sweep through the profile, interrupted twice while its pack trains (each after
    a checkpoint): `scontrol requeue` (preemption: SIGTERM, a checkpoint and exit; SLURM
    starts the same job again), then, once it has resumed, every process of its node's
    namespace killed (SLURM takes the node down and requeues the job onto the other node,
    whose trainer takes the pack over once the holder has not beaten for FENCE_S and SLURM
    says it is gone)."""
    checkout = checkout_with(tmp_path_factory.mktemp("interrupted") / "checkout",
                             sweep_config(LONG_EPOCHS, ("adam",)))
    proc = sweep(checkout, profile_env, AGGREGATE, background=True)
    try:
        job_id, checkpoint = training_job(checkout, proc)
        subprocess.run(["scontrol", "requeue", job_id], check=True)
        resumed_at, node = resumed(checkout, checkpoint, proc)
        kill_node(node)
        wait_for(f"{node} down", lambda: node_state(node).startswith("down"), timeout=120)
        seen = []  # status while the node is down, until the job trains again
        while True:
            got = status_json(checkout, profile_env)
            seen += [t for t in got["trainers"] if t["host"] == node]
            if any(t["host"] != node for t in got["trainers"]) or proc.poll() is not None:
                break
        out = finished(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        local_slurm("start", "--nodes", "2")  # the lost node back, for the next tests
    return Interrupted(checkout, job_id, out, resumed_at, node, seen)


def training_job(checkout: Path, proc: subprocess.Popen) -> tuple[str, Path]:
    """(job id, checkpoint) of the one training job, once its pack has checkpointed."""
    checkpoints = checkout / "results" / "runs" / ".checkpoints"
    (checkpoint,) = wait_for("a checkpoint", lambda: sweeping(proc) and list(
        checkpoints.glob("*/latest.pt")))
    ((job_id, state),) = squeue("-o", "%i|%T")
    assert state == "RUNNING"
    return job_id, checkpoint


def resumed(checkout: Path, checkpoint: Path, proc: subprocess.Popen) -> tuple[int, str]:
    """(epoch, node) where the requeued job resumed, once it has checkpointed there."""
    (log,) = (checkout / "logs" / "train").glob("*.log")  # each allocation writes it anew
    line = wait_for("the job resumed", lambda: sweeping(proc) and log.exists() and next(
        (x for x in log.read_text().splitlines() if "resumed from checkpoint" in x), None))
    resumed_at = int(re.search(r"at epoch (\d+)", line).group(1))
    written = mtime(checkpoint)
    wait_for("its next checkpoint", lambda: sweeping(proc) and mtime(checkpoint) not in
             (None, written))
    ((state, node),) = squeue("-o", "%T|%N")
    assert state == "RUNNING"
    return resumed_at, node


def mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:  # between a checkpoint's two generations
        return None


def sweeping(proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"the sweep ended first: {proc.stdout.read()[-3000:]}")
    return True






def test_a_preempted_job_resumes_from_its_checkpoint(interrupted):
    assert interrupted.resumed_at >= 1  # not restarted at epoch 0
    assert interrupted.out.count("has been submitted with SLURM jobid") == 1  # the same job


def test_a_node_lost_mid_training_resumes_on_the_other(interrupted, profile_env):
    """Status shows the lost node's trainer cut off while its last beat is recent (from
    outside, a dead node and one cut off from SLURM look alike until the beat is old),
    then dead; never an orphan."""
    seen = interrupted.seen
    assert seen, "status never showed the lost node's trainer"
    assert all((t["cut_off"] or t["state"] != "live") and not t["orphan"] for t in seen), seen
    assert seen[0]["cut_off"], seen
    summary = pd.read_parquet(interrupted.checkout / "results" / "aggregate" / "runs.parquet")
    assert (summary["host"] != interrupted.lost_node).all()
    assert (summary["slurm_job_id"] == interrupted.job_id).all()  # SLURM requeued it
    # resumed from the checkpoint the resumed job wrote, not from the first one
    assert (summary["resumed_from_epoch"] > interrupted.resumed_at).all()
    assert status_json(interrupted.checkout, profile_env)["total"]["completed"] == 2


def test_interrupted_twice_it_trains_as_in_one_go(interrupted, uninterrupted):
    assert_same_training(interrupted.checkout, uninterrupted["long"])


def test_one_pack_submitted_twice_at_once_trains_once(two_nodes, tmp_path):
    """Two jobs of one pack on the two nodes at the same moment: one trains, the other
    waits for it, naming the holder's host and pid in one line, and ends with status 0
    without training once the records are there; one set of records."""
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(sweep_config(LONG_EPOCHS, ("adam",))))
    ((pack_id, pack),) = grid.make_packs(grid.load_config(config_file)).items()
    spec = tmp_path / f"{pack_id}.json"
    pack.dump(spec)
    jobs = [subprocess.Popen(
        ["sbatch", "--wait", "-w", node, "-o", str(tmp_path / f"{node}.log"), "--wrap",
         f"exec {BIN / 'initmem'} train {spec} {tmp_path / 'runs'} --no-progress"],
        stdout=subprocess.PIPE, text=True) for node in NODES]
    codes = [job.wait(timeout=600) for job in jobs]
    logs = {node: (tmp_path / f"{node}.log").read_text() for node in NODES}
    assert codes == [0, 0], (codes, logs)  # sbatch --wait: the job's own status
    winner, loser = NODES if "of 2 runs" in logs[NODES[0]] else NODES[::-1]
    waits = [line for line in logs[loser].splitlines() if ": waiting, looking again" in line]
    assert len(waits) == 1 and f"on host {winner}" in waits[0], logs[loser]
    assert "by pid " in waits[0], waits
    assert logs[loser].splitlines()[-1].endswith("all 2 runs have records; nothing to train")
    assert "Traceback" not in logs[loser] and "of 2 runs" not in logs[loser]
    summaries, _ = files.read_folder_records(tmp_path / "runs", list(pack.runs))
    assert summaries.num_rows == 2 and set(summaries["host"].to_pylist()) == {winner}


@pytest.mark.parametrize("fault", ["node-cut-off", "snakemake-restarted"])
def test_a_fault_mid_epoch_deletes_nothing_and_trains_nothing_twice(
        two_nodes, profile_env, uninterrupted, tmp_path, fault):
    """The issue's two events (docs/workflow.md, "Running on a cluster", the matrix): a
    node cut off while its trainer runs on (SLURM requeues its job elsewhere, whose
    trainer waits for it, or finds its records), and the sweep restarted while its jobs
    run (the resubmitted jobs wait for them): the same records as in one go, none
    deleted at any moment, no epoch trained twice, status 0."""
    row = inject(fault, "mid-epoch", tmp_path, uninterrupted["faults"], profile_env,
                 FAULT_EPOCHS)
    assert row.caught
    assert (row.same_records, row.deleted, row.epochs_twice) == (True, 0, 0), row
    assert all(s.split()[-1] == "0" for s in row.exit_status.split(", ")), row
    assert "removed" not in row.note, row
