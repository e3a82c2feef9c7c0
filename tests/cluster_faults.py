"""The fault matrix on .ci/local_slurm.sh's two-node cluster: each fault of a cluster at
each phase of a training job, during a sweep through the named profile, judged by what
must hold (docs/records.md, "One trainer a pack"): final records equal to an
uninterrupted run's, no finished record deleted at any moment, at most one checkpoint
interval trained twice, the sweep's exit status 0. bench/faults.py prints the whole
table; tests/test_slurm_nodes.py runs the rows CI has time for.

Faults: a node killed (every process of its namespace, SIGKILL), a node cut off (its
network down: SLURM marks it down and requeues its job while its trainer runs on into
the shared folder), the job preempted (`scontrol requeue`), the submitting Snakemake
killed and the documented command run again (after `snakemake --unlock`), the same packs
submitted from a second checkout sharing the results folder. Phases: before the trainer
reads its spec, mid-epoch, during a checkpoint write, after the records are written and
before the job ends, while the submitting host aggregates.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml
from workflow_helpers import ROOT, TEST_CONFIG, scratch_checkout

from initmem.plan import grid
from initmem.records import files, heartbeat
from initmem.training import checkpoint

NODES = ("imnode1", "imnode2")
LOCAL_SLURM = ROOT / ".ci" / "local_slurm.sh"
BIN = Path(sys.executable).parent
# The README's cluster command and the two flags a cluster without accounting needs
# (and a 2 s first status check: the plugin's default 40 s, growing 10 s a check, would
# leave a job that finished unnoticed for most of a minute)
SWEEP = ("snakemake --profile slurm {target} --configfile config/sweep.yaml "
         "--slurm-no-account --slurm-status-command squeue "
         "--slurm-init-seconds-before-status-checks 2")
AGGREGATE = "results/aggregate/runs.parquet"  # the records, without tables and paper
FAULTS = ("node-killed", "node-cut-off", "preempted", "snakemake-restarted", "second-checkout")
PHASES = ("before-spec", "mid-epoch", "checkpoint-write", "records-written", "aggregating")


def local_slurm(*args: str) -> None:
    done = subprocess.run([str(LOCAL_SLURM), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def sweep_config(epochs: int, optimizers: tuple[str, ...] = ("sgd", "adam")) -> dict:
    """The test config at `epochs` epochs, one pack per optimizer."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["grid"]["optimizer"] = list(optimizers)
    config["families"]["main"]["recipe"]["epochs"] = epochs
    return config


def checkout_with(where: Path, config: dict) -> Path:
    """A scratch checkout whose config/sweep.yaml is `config`."""
    checkout = scratch_checkout(where)
    (checkout / "config" / "sweep.yaml").write_text(yaml.safe_dump(config))
    return checkout


def sweep(checkout: Path, env: dict[str, str], target: str = "all", background: bool = False,
          command: str = SWEEP):
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    shell = {**os.environ, "PATH": path, **env}
    command = command.format(target=target)
    if not background:
        return subprocess.run(command, shell=True, cwd=checkout, text=True, env=shell,
                              capture_output=True, timeout=1800)
    return subprocess.Popen(command, shell=True, cwd=checkout, text=True, env=shell,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def squeue(*args: str) -> list[list[str]]:
    out = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True).stdout
    return [line.split("|") for line in out.splitlines()]


def kill_node(node: str) -> None:
    """Every process of the node's namespace, as a lost node (SIGKILL: nothing says why)."""
    pids = subprocess.run(["ip", "netns", "pids", node], capture_output=True, text=True,
                          check=True).stdout.split()
    subprocess.run(["kill", "-9", *pids], check=False)


def cut_off(node: str, up: bool = False) -> None:
    """The node's network down (its processes run on, on the shared folder), or up."""
    i = NODES.index(node) + 1
    subprocess.run(["ip", "-n", node, "link", "set", f"imv{i}n", "up" if up else "down"],
                   check=True)


def node_state(node: str) -> str:
    done = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True,
                          text=True)
    return done.stdout.strip()


def trained_values(checkout: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summaries less where and when they were made, histories) of the sweep's runs."""
    runs = grid.expand_runs(grid.load_config(checkout / "config" / "sweep.yaml"))
    summaries, histories = files.read_folder_records(checkout / "results" / "runs", runs)
    assert summaries.num_rows == len(runs)
    return (summaries.to_pandas().drop(columns=list(files.PROVENANCE_COLUMNS)),
            histories.to_pandas())


def same_training(a: Path, b: Path) -> bool:
    try:
        for got, expected in zip(trained_values(a), trained_values(b), strict=True):
            pd.testing.assert_frame_equal(got, expected, check_exact=True)
    except (AssertionError, files.RecordError):
        return False
    return True


class Watch(threading.Thread):
    """Every 20 ms: the summaries there, and any that, once there, disappeared."""

    def __init__(self, paths: list[Path]):
        super().__init__(daemon=True)
        self.paths = paths
        self.seen: set[Path] = set()
        self.vanished: set[Path] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = {p for p in self.paths if p.exists()}
            self.vanished |= self.seen - now
            self.seen |= now
            time.sleep(0.02)

    def stop(self) -> None:
        self.done.set()
        self.join()


@dataclass
class Target:
    """Where a fault hits: a pack (its key), its SLURM job and node, and the epoch its
    trainer had reached (heartbeat) at that moment."""

    pack_key: str | None
    job_id: str | None
    node: str
    epoch: int


class Cluster:
    """A sweep's view of the shared folder and the queue, for the phase triggers."""

    def __init__(self, checkout: Path, packs: dict):
        self.checkout, self.packs = checkout, packs
        self.root = checkout / "results" / "runs" / ".checkpoints"

    def jobs(self) -> dict[str, tuple[str, str, str]]:
        """Pack key -> (job id, state, node) of the training jobs in the queue."""
        found = {}
        for job_id, state, node, name in squeue("-o", "%i|%T|%N|%k"):
            for pack_id, pack in self.packs.items():
                if pack_id in name:
                    found[pack.key] = (job_id, state, node)
        return found

    def beat(self, key: str) -> dict | None:
        return heartbeat.read(self.root / f"{key}{heartbeat.SUFFIX}")

    def finished(self, key: str) -> bool:
        pack = next(p for p in self.packs.values() if p.key == key)
        return all((self.checkout / "results" / "runs" / r.run_dir / "summary.parquet")
                   .exists() for r in pack.runs)

    def target(self, key: str | None, job_id: str | None = None,
               node: str | None = None) -> Target:
        beat = self.beat(key) if key else None
        return Target(key, job_id, node or (beat or {}).get("host") or NODES[0],
                      beat["epoch"] if beat else 0)


def before_spec(c: Cluster) -> Target | None:
    for key, (job_id, state, node) in c.jobs().items():
        if state == "RUNNING" and c.beat(key) is None and not c.finished(key):
            return c.target(key, job_id, node)
    return None


def mid_epoch(c: Cluster) -> Target | None:
    for key, (job_id, state, node) in c.jobs().items():
        beat = c.beat(key)
        if state == "RUNNING" and beat and not beat.get("ended") and beat["epoch"] >= 3:
            return c.target(key, job_id, node)
    return None


def checkpoint_write(c: Cluster) -> Target | None:
    for tmp in c.root.glob(f"*/{checkpoint.TMP_PREFIX}*.tmp"):
        key = tmp.parent.name
        job_id, _, node = c.jobs().get(key, (None, "", None))
        return c.target(key, job_id, node)
    return None


def records_written(c: Cluster) -> Target | None:
    for key, (job_id, state, node) in c.jobs().items():
        if state == "RUNNING" and c.finished(key):
            return c.target(key, job_id, node)
    return None


def aggregating(c: Cluster) -> Target | None:
    return c.target(None) if (c.checkout / "logs" / "aggregate.log").exists() else None


TRIGGERS: dict[str, Callable[[Cluster], Target | None]] = {
    "before-spec": before_spec, "mid-epoch": mid_epoch, "checkpoint-write": checkpoint_write,
    "records-written": records_written, "aggregating": aggregating}
# How often each trigger looks: a checkpoint of these packs takes milliseconds to write
POLL_S = {"checkpoint-write": 0.001, "records-written": 0.005}


@dataclass
class Row:
    fault: str
    phase: str
    caught: bool  # the phase was seen and the fault injected there
    same_records: bool
    deleted: int  # finished records that vanished while it ran
    epochs_twice: int  # of the faulted pack
    exit_status: str
    wall_s: float
    note: str = ""


def inject(fault: str, phase: str, where: Path, reference: Path, env: dict[str, str],
           epochs: int, timeout_s: float = 600) -> Row:
    """One row: a fresh sweep in `where`, the fault injected at the phase (once seen),
    the sweep (rerun where the fault needs it) to its end, judged against `reference`
    (the same config trained without faults)."""
    checkout = checkout_with(where / "checkout", sweep_config(epochs))
    packs = grid.make_packs(grid.load_config(checkout / "config" / "sweep.yaml"))
    summaries = [checkout / "results" / "runs" / r.run_dir / "summary.parquet"
                 for p in packs.values() for r in p.runs]
    cluster, watch = Cluster(checkout, packs), Watch(summaries)
    watch.start()
    start = time.monotonic()
    proc = sweep(checkout, env, AGGREGATE, background=True)
    second = None
    if fault == "second-checkout":
        other = scratch_checkout(where / "second")
        (other / "config" / "sweep.yaml").write_text((checkout / "config" / "sweep.yaml")
                                                     .read_text())
        (other / "results").symlink_to(checkout / "results")
    target = _wait_for_phase(cluster, phase, proc, timeout_s)
    statuses, note = [], ""
    if target is not None:
        note = _hit(fault, target, proc)
        if fault == "second-checkout":
            second = sweep(other, env, AGGREGATE, background=True)
    if fault == "snakemake-restarted" and target is not None:
        proc.wait()
        unlock = sweep(checkout, env, command="snakemake --unlock --configfile "
                                              "config/sweep.yaml")
        statuses.append(f"unlock {unlock.returncode}")
        proc = sweep(checkout, env, AGGREGATE, background=True)
    out = _finish(proc, timeout_s)
    statuses.append(str(proc.returncode))
    if second is not None:
        out += _finish(second, timeout_s)
        statuses.append(f"second {second.returncode}")
    watch.stop()
    _restore(fault, target)
    same = same_training(checkout, reference)
    return Row(fault, phase, target is not None, same, len(watch.vanished),
               _epochs_twice(checkout, packs, target), ", ".join(statuses),
               time.monotonic() - start, note or _removed(out))


def _wait_for_phase(cluster: Cluster, phase: str, proc: subprocess.Popen,
                    timeout_s: float) -> Target | None:
    deadline, every = time.monotonic() + timeout_s, POLL_S.get(phase, 0.05)
    while proc.poll() is None and time.monotonic() < deadline:
        if (target := TRIGGERS[phase](cluster)) is not None:
            return target
        time.sleep(every)
    return None


def _hit(fault: str, target: Target, proc: subprocess.Popen) -> str:
    if fault == "node-killed":
        kill_node(target.node)
    elif fault == "node-cut-off":
        cut_off(target.node)
    elif fault == "preempted":
        if target.job_id is None:
            return "no job to preempt at this phase"
        subprocess.run(["scontrol", "requeue", target.job_id], check=False)
    elif fault == "snakemake-restarted":
        os.killpg(proc.pid, signal.SIGKILL)  # the shell and its Snakemake, not the jobs
    return ""


def _finish(proc: subprocess.Popen, timeout_s: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += "\n[timed out]"
    return out or ""


def _restore(fault: str, target: Target | None) -> None:
    """The cluster as it was for the next row: both nodes up, no job left."""
    if target is not None and fault == "node-cut-off":
        cut_off(target.node, up=True)
    if jobs := [j for j, in squeue("-o", "%i")]:
        subprocess.run(["scancel", "--full", *jobs], check=False)
    if target is not None and fault in ("node-killed", "node-cut-off"):
        local_slurm("start", "--nodes", "2")


def _epochs_twice(checkout: Path, packs: dict, target: Target | None) -> int:
    """Whole epochs of the faulted pack trained twice: where another trainer wrote its
    records, those its trainer had begun past the epoch they resumed at (all it had
    finished, where they started over); none where its own trainer wrote them. A
    preempted trainer checkpoints mid-epoch, so a resume redoes part of one epoch at
    most (0 here); -1: no records."""
    if target is None or target.pack_key is None:
        return 0
    pack = next(p for p in packs.values() if p.key == target.pack_key)
    try:
        summary = files.read_records(checkout / "results" / "runs" / pack.runs[0].run_dir)[1]
    except files.RecordError:
        return -1
    summary = summary.iloc[0]
    resumed = summary["resumed_from_epoch"]
    if summary["host"] == target.node and pd.isna(resumed) and (
            target.job_id is None or str(summary["slurm_job_id"]) == target.job_id):
        return 0
    return max(0, target.epoch - 1) if pd.isna(resumed) else max(0, target.epoch - int(resumed))


def _removed(out: str) -> str:
    found = re.findall(r"Removing output files of failed job", out)
    return f"Snakemake removed outputs {len(found)}x" if found else ""
