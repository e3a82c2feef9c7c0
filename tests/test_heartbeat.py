"""Heartbeats: a trainer names itself beside its checkpoints, and a pack held by a live
trainer is never trained by a second one."""

import json
import os
import socket
import subprocess
import time

import pandas as pd
import pytest
from test_resume import PACK, cli, wait_for_checkpoint

from initmem.records import cluster, heartbeat
from initmem.records.files import read_records

HOST = socket.gethostname()


def beat_of(pid: int, age_s: float = 0.0, host: str = HOST, **fields) -> dict:
    return {"pid": pid, "host": host, "start": time.time() - age_s - 1, "pack": PACK.key,
            "spec": "pack.json", "epoch": 2, "epochs": 3, "beat": time.time() - age_s,
            "epoch_s": None, **fields}


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def other_trainer():
    """A live process that is not this one (standing in for another trainer)."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def state_of(beat: dict, **kwargs) -> tuple[str, str]:
    verdict = heartbeat.state(beat, **kwargs)
    return verdict.state, verdict.why


def test_states_of_heartbeats(dead_pid, other_trainer):
    assert state_of(beat_of(other_trainer, 12)) == (heartbeat.LIVE,
                                                    "last beat 12 s ago, within 600 s")
    assert state_of(beat_of(other_trainer, age_s=601)) == (
        heartbeat.STALLED, "last beat 601 s ago, more than 600 s")
    # an epoch measured at 400 s: 700 s without a beat is not yet a stall
    assert state_of(beat_of(other_trainer, 700, epoch_s=400.0)) == (
        heartbeat.LIVE, "last beat 700 s ago, within 800 s")
    assert state_of(beat_of(dead_pid)) == (heartbeat.DEAD,
                                           f"pid {dead_pid} is gone from this host")
    ended = beat_of(other_trainer, ended="Preempted: stopped at update 7")
    # its pid may be another process now
    assert state_of(ended) == (heartbeat.ENDED, "its trainer stopped: Preempted: stopped at "
                                                "update 7")
    # another host's pid means nothing here: only the age of its beat tells
    assert heartbeat.state(beat_of(dead_pid, host="gpu042")).state == heartbeat.LIVE
    assert heartbeat.state(beat_of(dead_pid, 601, host="gpu042")).state == heartbeat.STALLED


ON_IMNODE1 = {"host": "imnode1", "slurm_job_id": "12", "slurm_node": "imnode1",
              "slurm_restarts": 0}


@pytest.mark.parametrize(("squeue", "scontrol", "sinfo", "why"), [
    ([], None, [], "SLURM job 12 has ended (squeue does not list it)"),
    (["7|RUNNING|imnode1"], None, [], "SLURM job 12 has ended (squeue does not list it)"),
    (["12|PENDING|"], None, [], "SLURM job 12 is PENDING, not running on imnode1"),
    (["12|COMPLETING|imnode1"], None, [], "SLURM job 12 is COMPLETING, not running on "
                                          "imnode1"),
    (["12|RUNNING|imnode2"], None, [], "SLURM job 12 runs on imnode2, not on imnode1"),
    (["12|RUNNING|imnode[2-3]"], ["imnode2", "imnode3"], [],
     "SLURM job 12 runs on imnode2,imnode3, not on imnode1"),
    (["12|RUNNING|imnode1"], None, ["imnode1|down*", "imnode2|idle"], "node imnode1 is down"),
], ids=["no-jobs", "ended", "pending", "completing", "other-node", "other-nodes", "node-down"])
def test_another_hosts_trainer_slurm_says_is_gone_is_dead_at_once(fake_slurm, squeue, scontrol,
                                                                  sinfo, why):
    fake_slurm.answer("squeue", squeue)
    fake_slurm.answer("sinfo", sinfo)
    if scontrol is not None:
        fake_slurm.answer("scontrol", scontrol)
    assert state_of(beat_of(1, **ON_IMNODE1)) == (heartbeat.DEAD, why)  # a beat 0 s old


def test_a_later_start_of_the_same_slurm_job_is_its_requeue(fake_slurm, monkeypatch):
    """SLURM runs one instance of a job: its next start (restart count up) finds the
    earlier one gone, wherever that ran, without asking squeue; the same start (another
    step of one allocation) is judged as any other job."""
    fake_slurm.answer("squeue", ["12|RUNNING|imnode[1-2]"])
    fake_slurm.answer("scontrol", ["imnode1", "imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|mixed", "imnode2|mixed"])
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert state_of(beat_of(1, **ON_IMNODE1)) == (heartbeat.DEAD,
                                                  "this is SLURM job 12 again (requeued)")
    assert fake_slurm.calls() == []
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    assert state_of(beat_of(1, **ON_IMNODE1)) == (
        heartbeat.LIVE, "SLURM job 12 runs on imnode1; last beat 0 s ago, within 600 s")


def test_another_hosts_trainer_slurm_runs_there_is_judged_by_its_age(fake_slurm):
    fake_slurm.answer("squeue", ["12|RUNNING|imnode[1-2]", "13|PENDING|"])
    fake_slurm.answer("scontrol", ["imnode1", "imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|mixed", "imnode2|down"])
    slurm = cluster.Snapshot()
    assert state_of(beat_of(1, 30, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.LIVE, "SLURM job 12 runs on imnode1; last beat 30 s ago, within 600 s")
    assert state_of(beat_of(1, 601, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.STALLED, "SLURM job 12 runs on imnode1; last beat 601 s ago, more than "
                           "600 s")
    # one snapshot judges every beat: squeue and sinfo once, each node list expanded once
    assert fake_slurm.calls() == ["squeue -h -a -o %i|%T|%N",
                                  "scontrol show hostnames imnode[1-2]", "sinfo -h -N -o %N|%T"]
    no_job = {**ON_IMNODE1, "slurm_job_id": None}
    assert heartbeat.state(beat_of(1, **no_job), slurm=cluster.Snapshot()).state == \
        heartbeat.LIVE
    assert len(fake_slurm.calls()) == 3  # a beat outside SLURM asks nothing


@pytest.mark.parametrize("how", ["missing", "failing", "hanging", "unexpandable"])
def test_where_slurm_does_not_answer_another_hosts_beat_is_judged_by_its_age(
        fake_slurm, monkeypatch, how):
    monkeypatch.setattr(cluster, "TIMEOUT_S", 0.5)
    if how == "unexpandable":  # squeue answers, but its node list cannot be expanded
        fake_slurm.answer("squeue", ["12|RUNNING|imnode[1-2]"])
        fake_slurm.answer("scontrol", status=1)
    elif how != "missing":
        fake_slurm.answer("squeue", status=1, hang=how == "hanging")
    fake_slurm.answer("sinfo", ["imnode1|idle"])
    said = ("SLURM job 12 is running, on nodes scontrol did not expand" if how == "unexpandable"
            else "SLURM does not answer about job 12")
    assert state_of(beat_of(1, 599, **ON_IMNODE1)) == (
        heartbeat.LIVE, f"{said}; last beat 599 s ago, within 600 s")
    assert state_of(beat_of(1, 601, **ON_IMNODE1)) == (
        heartbeat.STALLED, f"{said}; last beat 601 s ago, more than 600 s")


def write_beat(out, beat: dict):
    path = heartbeat.path_of(out / ".checkpoints", PACK)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(beat))
    return path


@pytest.mark.parametrize("how", ["live", "stalled", "other-host", "slurm-runs-it-there"])
def test_a_pack_held_by_another_trainer_is_refused(tmp_path, other_trainer, fake_slurm, how):
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    fake_slurm.answer("squeue", ["12|RUNNING|imnode1"])
    fake_slurm.answer("sinfo", ["imnode1|mixed"])
    beat = {"live": beat_of(other_trainer), "stalled": beat_of(other_trainer, 3600),
            "other-host": beat_of(1, host="gpu042"),
            "slurm-runs-it-there": beat_of(1, 20, **ON_IMNODE1)}[how]
    path = write_beat(out, beat)
    proc = cli(spec, out)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    line = f"pid {beat['pid']} on host {beat['host']}"
    last = err.splitlines()[-1]
    assert last.startswith("initmem train: error: ") and line in last and PACK.key in last
    if how == "slurm-runs-it-there":
        assert "(live: SLURM job 12 runs on imnode1; last beat " in last
    assert "Traceback" not in err
    assert json.loads(path.read_text()) == beat  # untouched
    assert not (out / PACK.runs[0].run_dir).exists()


def test_of_two_trainers_starting_at_once_one_holds_the_pack(tmp_path):
    """The lock is taken before the heartbeat is read: a second claim while the first
    holds it is refused, naming the holder by its heartbeat, and even before any
    heartbeat exists (the holder may be on another node); released, the pack is free and
    no lock file is left behind."""
    with heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
        lock = tmp_path / f"{PACK.key}.lock"
        assert lock.exists()
        with pytest.raises(heartbeat.Held) as named, \
                heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
            pass
        assert str(named.value).startswith(f"pack {PACK.key} is being trained by pid "
                                           f"{os.getpid()} on host {HOST} (it holds {lock})")
        assert "\n" not in str(named.value)
        heartbeat.path_of(tmp_path, PACK).unlink()  # as if the first had not beaten yet:
        with pytest.raises(heartbeat.Held) as named, \
                heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
            pass  # the lock file names it
        assert f"trained by pid {os.getpid()} on host {HOST} (it holds {lock})" in \
            str(named.value)
    assert not lock.exists() and not list(tmp_path.iterdir())
    with heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
        pass


@pytest.mark.slow
def test_a_dead_trainers_heartbeat_is_taken_over_and_removed_at_the_end(tmp_path, dead_pid):
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    path = write_beat(out, beat_of(dead_pid))
    proc = cli(spec, out)
    wait_for_checkpoint(out / ".checkpoints" / PACK.key, proc)
    mine = heartbeat.read(path)
    assert (mine["pid"], mine["host"], mine["pack"]) == (proc.pid, HOST, PACK.key)
    assert 1 <= mine["epoch"] <= 3 and mine["epochs"] == 3
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"taking over pack {PACK.key} from pid {dead_pid} on host {HOST}" in err
    assert not path.exists()
    assert not (out / ".checkpoints").exists()  # the pack's folder went, then the empty root


def test_initmem_train_takes_over_a_pack_slurm_says_is_gone_and_records_where_it_ran(
        tmp_path, fake_slurm, monkeypatch):
    """Another node's trainer whose job SLURM has requeued (pending): taken over at once,
    with one warning saying why; the records name this host and this job, trained from
    the start (no resume)."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    fake_slurm.answer("squeue", ["12|PENDING|", "77|RUNNING|imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|down", "imnode2|mixed"])
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    path = write_beat(out, beat_of(4242, 20, **ON_IMNODE1))
    proc = cli(spec, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    warnings = [line for line in err.splitlines() if "taking over" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        f"taking over pack {PACK.key} from pid 4242 on host imnode1: its heartbeat is dead "
        "(SLURM job 12 is PENDING, not running on imnode1)"), err
    assert not path.exists()
    for run in PACK.runs:
        summary = read_records(out / run.run_dir)[1].iloc[0]
        assert (summary["host"], summary["slurm_job_id"]) == (HOST, "77")
        assert pd.isna(summary["resumed_from_epoch"])
