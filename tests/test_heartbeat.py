"""Heartbeats: a trainer names itself beside its checkpoints, and a pack held by a live
trainer is never trained by a second one."""

import json
import os
import re
import signal
import socket
import subprocess
import time

import pandas as pd
import pytest
from fakes import write_fake_run
from test_resume import PACK, cli, wait_for_checkpoint

from initmem.records import cluster, heartbeat
from initmem.records.files import read_records, write_records

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
                                                    "last progress 12 s ago, within 600 s")
    assert state_of(beat_of(other_trainer, age_s=601)) == (
        heartbeat.STALLED, "last progress 601 s ago, more than 600 s")
    # an epoch measured at 400 s: 700 s without a beat is not yet a stall
    assert state_of(beat_of(other_trainer, 700, epoch_s=400.0)) == (
        heartbeat.LIVE, "last progress 700 s ago, within 800 s")
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
def test_another_hosts_trainer_slurm_says_is_gone_is_dead_once_it_stops_beating(
        fake_slurm, squeue, scontrol, sinfo, why):
    """SLURM's word is not proof of death: a node cut off from SLURM (marked down, its job
    requeued) may still run its trainer on the shared folder. While it beats it is live,
    with SLURM's word said; once it has not beaten for FENCE_S, dead."""
    fake_slurm.answer("squeue", squeue)
    fake_slurm.answer("sinfo", sinfo)
    if scontrol is not None:
        fake_slurm.answer("scontrol", scontrol)
    slurm = cluster.Snapshot()
    assert state_of(beat_of(1, 20, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.LIVE, f"beat 20 s ago, though {why}: SLURM's word counts after 120 s without a "
                        "beat (cut off from SLURM?); last progress 20 s ago, within 600 s")
    assert state_of(beat_of(1, 121, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.DEAD, f"{why}; no beat for more than 120 s")


def test_a_later_start_of_the_same_slurm_job_is_its_requeue(fake_slurm, monkeypatch):
    """SLURM runs one instance of a job it can reach: its next start (restart count up)
    finds the earlier one gone once that one no longer beats (a requeue after a
    partition runs beside it), without asking squeue; the same start (another step of
    one allocation) is judged as any other job."""
    fake_slurm.answer("squeue", ["12|RUNNING|imnode[1-2]"])
    fake_slurm.answer("scontrol", ["imnode1", "imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|mixed", "imnode2|mixed"])
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert state_of(beat_of(1, 121, **ON_IMNODE1)) == (
        heartbeat.DEAD, "this is SLURM job 12 again (requeued); no beat for more than 120 s")
    assert state_of(beat_of(1, 5, **ON_IMNODE1))[0] == heartbeat.LIVE
    assert fake_slurm.calls() == []
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    assert state_of(beat_of(1, **ON_IMNODE1)) == (
        heartbeat.LIVE, "SLURM job 12 runs on imnode1; last progress 0 s ago, within 600 s")


def test_a_trainer_that_beats_but_does_not_progress_is_stalled(other_trainer, fake_slurm):
    """The beat says the process lives (its own thread), the progress that its loop
    moves: a hung loop in a live process is stalled, here or on a node SLURM calls gone."""
    fake_slurm.answer("squeue", [])
    fake_slurm.answer("sinfo", [])
    hung = {"progress": time.time() - 601}
    assert state_of(beat_of(other_trainer, 2, **hung)) == (
        heartbeat.STALLED, "last progress 601 s ago, more than 600 s")
    verdict = heartbeat.state(beat_of(1, 2, **ON_IMNODE1, **hung))
    assert (verdict.state, verdict.cut_off) == (heartbeat.STALLED, True)


def test_the_heartbeat_pulses_while_the_loop_is_silent(tmp_path, monkeypatch):
    """Between progress beats (an evaluation, a checkpoint write) the thread keeps the
    beat fresh; it stops with the pack, whose heartbeat then goes."""
    monkeypatch.setattr(heartbeat, "PULSE_S", 0.02)
    path = heartbeat.path_of(tmp_path, PACK)
    with heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
        first = heartbeat.read(path)
        time.sleep(0.3)
        later = heartbeat.read(path)
        assert later["beat"] > first["beat"] and later["progress"] == first["progress"]
    assert not path.exists()
    time.sleep(0.1)
    assert not path.exists()  # no pulse after the end


def test_another_hosts_trainer_slurm_runs_there_is_judged_by_its_age(fake_slurm):
    fake_slurm.answer("squeue", ["12|RUNNING|imnode[1-2]", "13|PENDING|"])
    fake_slurm.answer("scontrol", ["imnode1", "imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|mixed", "imnode2|down"])
    slurm = cluster.Snapshot()
    assert state_of(beat_of(1, 30, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.LIVE, "SLURM job 12 runs on imnode1; last progress 30 s ago, within 600 s")
    assert state_of(beat_of(1, 601, **ON_IMNODE1), slurm=slurm) == (
        heartbeat.STALLED, "SLURM job 12 runs on imnode1; last progress 601 s ago, more than "
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
        heartbeat.LIVE, f"{said}; last progress 599 s ago, within 600 s")
    assert state_of(beat_of(1, 601, **ON_IMNODE1)) == (
        heartbeat.STALLED, f"{said}; last progress 601 s ago, more than 600 s")


def write_beat(out, beat: dict):
    path = heartbeat.path_of(out / ".checkpoints", PACK)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(beat))
    return path


def waiting(proc: subprocess.Popen) -> str:
    """The line in which the trainer says it waits (read as it comes)."""
    for line in proc.stderr:
        if ": waiting, looking again every" in line:
            return line
    raise AssertionError(f"the trainer ended (status {proc.wait()}) without waiting")


HELD_BY = {"live": lambda other: beat_of(other), "stalled": lambda other: beat_of(other, 3600),
           "other-host": lambda _: beat_of(1, host="gpu042"),
           "slurm-runs-it-there": lambda _: beat_of(1, 20, **ON_IMNODE1),
           # cut off: SLURM marked its node down and requeued its job, yet it beats
           "cut-off": lambda _: beat_of(1, 20, **{**ON_IMNODE1, "slurm_job_id": "13"})}


# A trainer's start and waits cost about 5 s a case: the live holder and the cut-off one in
# the fast tier, the other holders with the slow tier (their states are judged, without a
# trainer, by the heartbeat tests above).
FAST_HOLDERS = ("live", "cut-off")


@pytest.mark.parametrize("how", [h if h in FAST_HOLDERS else pytest.param(
    h, marks=pytest.mark.slow) for h in HELD_BY])
def test_a_pack_held_by_another_trainer_is_waited_for_until_its_records_are_written(
        tmp_path, other_trainer, fake_slurm, how):
    """A second trainer neither trains a held pack nor fails (its job would be retried
    and fail again): it waits, says for whom in one line, and ends with status 0, having
    touched nothing, once the holder has written the records."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    fake_slurm.answer("squeue", ["12|RUNNING|imnode1", "13|PENDING|"])
    fake_slurm.answer("sinfo", ["imnode1|down" if how == "cut-off" else "imnode1|mixed"])
    beat = HELD_BY[how](other_trainer)
    path = write_beat(out, beat)
    proc = cli(spec, out)
    line = waiting(proc)
    assert f"pid {beat['pid']} on host {beat['host']}" in line and PACK.key in line
    if how == "cut-off":
        assert re.search(r"\(live: beat \d+ s ago, though SLURM job 13 is PENDING, not "
                         "running on imnode1", line), line
    for run in PACK.runs:  # the holder finishes
        write_fake_run(out, run)
    written = {run: (out / run.run_dir / "summary.parquet").read_bytes() for run in PACK.runs}
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.splitlines()[-1].endswith(
        f"pack {PACK.key}: all 2 runs have records; nothing to train")
    assert "Traceback" not in err
    assert json.loads(path.read_text()) == beat  # untouched, as are the records
    assert all((out / run.run_dir / "summary.parquet").read_bytes() == data
               for run, data in written.items())


def test_a_trainer_waiting_for_a_held_pack_stops_on_sigterm_for_a_retry(tmp_path,
                                                                       other_trainer):
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    beat = beat_of(other_trainer)
    path = write_beat(out, beat)
    proc = cli(spec, out)
    waiting(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err  # PREEMPTED_EXIT: the scheduler tries again later
    assert err.splitlines()[-1].endswith(
        f"received SIGTERM: stopped while waiting for pack {PACK.key}; exiting with status 75")
    assert json.loads(path.read_text()) == beat
    assert not (out / PACK.runs[0].run_dir).exists()


def test_a_finished_pack_is_skipped_in_one_line(tmp_path):
    """A job whose runs another trainer finished (it was requeued, or submitted again by
    a restarted sweep) succeeds without touching them: no lock, no heartbeat, no data."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    for run in PACK.runs:
        write_fake_run(out, run)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    proc = cli(spec, out, "--data-root", str(tmp_path / "no-data-here"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert err.splitlines()[-1].endswith(
        f"pack {PACK.key}: all 2 runs have records; nothing to train")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_trainer_whose_pack_was_taken_over_writes_nothing_more(tmp_path):
    """The fence: once the heartbeat names another trainer (this one was judged dead, cut
    off for too long), this one's next beat, checkpoint or record raises Fenced, and its
    ending does not mark the other's heartbeat ended nor remove it."""
    path = heartbeat.path_of(tmp_path, PACK)
    other = beat_of(4242, host="imnode2")
    taken = f"pack {PACK.key} was taken over by pid 4242 on host imnode2; this trainer stops"
    with pytest.raises(heartbeat.Fenced, match=taken), \
            heartbeat.held(tmp_path, PACK, tmp_path / "pack.json") as beat:
        beat.check_owned()  # still ours
        path.write_text(json.dumps(other))
        beat.beat(2)
    assert json.loads(path.read_text()) == other


def test_records_written_without_replace_keep_a_finished_run(tmp_path):
    """A trainer's records never replace a finished run's, even one placed by another
    trainer between its check and its write."""
    run = PACK.runs[0]
    write_fake_run(tmp_path, run, offset=0.1)
    kept = (tmp_path / run.run_dir / "summary.parquet").read_bytes()
    history, summary = read_records(tmp_path / run.run_dir)
    assert not write_records(tmp_path / run.run_dir, history, summary.iloc[0].to_dict(),
                             replace=False)
    assert (tmp_path / run.run_dir / "summary.parquet").read_bytes() == kept
    assert [p.name for p in (tmp_path / run.run_dir).iterdir()] != []
    assert not list((tmp_path / run.run_dir).glob(".*.tmp"))


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
    """Another node's trainer whose job SLURM has requeued (pending), silent for longer
    than FENCE_S: taken over, with one warning saying why; the records name this
    host and this job, trained from the start (no resume)."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    fake_slurm.answer("squeue", ["12|PENDING|", "77|RUNNING|imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|down", "imnode2|mixed"])
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    path = write_beat(out, beat_of(4242, 121, **ON_IMNODE1))  # it stopped beating
    proc = cli(spec, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    warnings = [line for line in err.splitlines() if "taking over" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        f"taking over pack {PACK.key} from pid 4242 on host imnode1: its heartbeat is dead "
        "(SLURM job 12 is PENDING, not running on imnode1; no beat for more than 120 s)"), err
    assert not path.exists()
    for run in PACK.runs:
        summary = read_records(out / run.run_dir)[1].iloc[0]
        assert (summary["host"], summary["slurm_job_id"]) == (HOST, "77")
        assert pd.isna(summary["resumed_from_epoch"])
