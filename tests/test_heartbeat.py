"""Heartbeats: a trainer names itself beside its checkpoints, and a pack held by a live
trainer is never trained by a second one."""

import json
import socket
import subprocess
import time

import pytest
from test_resume import PACK, cli, wait_for_checkpoint

from initmem.records import heartbeat

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


def test_states_of_heartbeats(dead_pid, other_trainer):
    assert heartbeat.state(beat_of(other_trainer)) == heartbeat.LIVE
    assert heartbeat.state(beat_of(other_trainer, age_s=601)) == heartbeat.STALLED
    # an epoch measured at 400 s: 700 s without a beat is not yet a stall
    assert heartbeat.state(beat_of(other_trainer, 700, epoch_s=400.0)) == heartbeat.LIVE
    assert heartbeat.state(beat_of(dead_pid)) == heartbeat.DEAD
    ended = beat_of(other_trainer, ended="Preempted: stopped at update 7")
    assert heartbeat.state(ended) == heartbeat.ENDED  # its pid may be another process now
    # another host's pid means nothing here: only the age of its beat tells
    assert heartbeat.state(beat_of(dead_pid, host="gpu042")) == heartbeat.LIVE
    assert heartbeat.state(beat_of(dead_pid, 601, host="gpu042")) == heartbeat.STALLED


def write_beat(out, beat: dict):
    path = heartbeat.path_of(out / ".checkpoints", PACK)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(beat))
    return path


@pytest.mark.parametrize("how", ["live", "stalled", "other-host"])
def test_a_pack_held_by_another_trainer_is_refused(tmp_path, other_trainer, how):
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    beat = {"live": beat_of(other_trainer), "stalled": beat_of(other_trainer, 3600),
            "other-host": beat_of(1, host="gpu042")}[how]
    path = write_beat(out, beat)
    proc = cli(spec, out)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    line = f"pid {beat['pid']} on host {beat['host']}"
    last = err.splitlines()[-1]
    assert last.startswith("initmem train: error: ") and line in last and PACK.key in last
    assert "Traceback" not in err
    assert json.loads(path.read_text()) == beat  # untouched
    assert not (out / PACK.runs[0].run_dir).exists()


def test_of_two_trainers_starting_at_once_one_holds_the_pack(tmp_path):
    """The lock is taken before the heartbeat is read: a second claim while the first
    holds it is refused even before any heartbeat exists; released, the pack is free and
    no lock file is left behind."""
    with heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
        lock = tmp_path / f"{PACK.key}.lock"
        assert lock.exists()
        heartbeat.path_of(tmp_path, PACK).unlink()  # as if the first had not beaten yet
        refused = pytest.raises(heartbeat.Held, match=f"pack {PACK.key} is being trained "
                                                      "by another process on this host")
        with refused, heartbeat.held(tmp_path, PACK, tmp_path / "pack.json"):
            pass
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
