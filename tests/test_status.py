"""`initmem status`: counts, trainers (orphans after Snakemake was killed), device-hours."""

import json
import os
import signal
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

import pytest
import yaml
from workflow_helpers import TEST_CONFIG, snakemake_background

from initmem import cli
from initmem.plan import grid
from initmem.records import heartbeat, status
from initmem.records.files import read_records


def test_a_config_before_anything_ran_is_all_queued(tmp_path):
    got = status.sweep_status(TEST_CONFIG, tmp_path / "runs")
    assert got.total == {**{s: 0 for s in status.STATES}, status.QUEUED: 4}
    assert [(r["b"], r[status.QUEUED]) for r in got.counts] == [(32, 2), (32, 2)]
    assert got.trainers == [] and got.eta is None
    assert got.hours["spent"] == 0 and got.hours["projected"] == got.hours["remaining"] > 0


def test_records_count_by_their_status_damaged_and_failed(tmp_path):
    """Synthetic records of the 4 runs: one's summary deleted under a pack whose trainer
    ended (preempted), one's flipped (damaged); the other two by their own status."""
    records = tmp_path / "runs"
    assert cli.main(["synthetic-records", "--config", str(TEST_CONFIG), "--out-dir",
                     str(tmp_path / "aggregate"), "--records-dir", str(records)]) == 0
    packs = list(grid.make_packs(grid.load_config(TEST_CONFIG)).values())
    lost, flipped = packs[0].runs[0], packs[1].runs[1]
    (records / lost.run_dir / "summary.parquet").unlink()
    summary = records / flipped.run_dir / "summary.parquet"
    raw = bytearray(summary.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    summary.write_bytes(bytes(raw))
    beat = {"pid": 1, "host": "gpu042", "start": 0.0, "beat": 10.0, "pack": packs[0].key,
            "epoch": 1, "epochs": 1, "ended": "Preempted: stopped at update 1"}
    (records / ".checkpoints").mkdir()
    heartbeat.path_of(records / ".checkpoints", packs[0]).write_text(json.dumps(beat))
    got = status.sweep_status(TEST_CONFIG, records)
    others = [read_records(records / r.run_dir)[1].iloc[0] for r in
              (packs[0].runs[1], packs[1].runs[0])]
    outcomes = Counter(row["status"] for row in others)
    assert got.total == {**{s: 0 for s in status.STATES}, **outcomes, status.FAILED: 1,
                         status.DAMAGED: 1}
    assert [(t.state, t.ended) for t in got.trainers] == [(heartbeat.ENDED, beat["ended"])]
    assert got.hours["spent"] == pytest.approx(sum(r["wall_time_s"] for r in others) / 3600)


def test_watch_redraws_in_place_until_ctrl_c(tmp_path, monkeypatch, capsys):
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    # status's clock alone: squeue's subprocess sleeps too, through the time module
    clock = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time)
                                     if not name.startswith("_")})
    monkeypatch.setattr(status, "time", clock)
    monkeypatch.setattr(clock, "sleep", sleep)
    assert cli.main(["status", "--config", str(TEST_CONFIG), "--records", str(tmp_path),
                     "--watch", "5"]) == 0
    screens = capsys.readouterr().out.split("\033[H\033[2J")
    assert sleeps == [5, 5] and screens[0] == "" and len(screens) == 3
    assert all(screen.startswith(f"{TEST_CONFIG} at ") for screen in screens[1:])


def long_config(tmp_path: Path) -> Path:
    """The test config with epochs enough to be caught training (minutes, never reached)."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["recipe"]["epochs"] = 5000
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def wait_for_trainers(root: Path, n: int, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while len([p for p in root.glob(f"*{heartbeat.SUFFIX}") if heartbeat.read(p)]) < n:
        assert proc.poll() is None, f"snakemake ended with status {proc.returncode}"
        assert time.monotonic() < deadline, f"{n} trainers did not start"
        time.sleep(0.2)


@pytest.mark.slow
def test_after_snakemake_is_killed_status_names_the_orphans_and_their_packs_are_held(
        tmp_path, capsys):
    """SIGKILL of Snakemake mid-training: its two trainers train on, re-parented; status
    counts their runs as running and names them orphans; a second trainer of a held pack
    waits for it, naming it; once they are killed too, their runs count as failed."""
    config, work = long_config(tmp_path), tmp_path / "work"
    runs, root = work / "results" / "runs", work / "results" / "runs" / ".checkpoints"
    proc = snakemake_background(work, config, "all")
    pids = []
    try:
        wait_for_trainers(root, 2, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()  # not communicate: its orphans hold its pipes open
        got = status.sweep_status(config, runs)
        pids = [t.pid for t in got.trainers]
        assert got.total == {**{s: 0 for s in status.STATES}, status.RUNNING: 4}
        assert [(t.state, t.orphan) for t in got.trainers] == [(heartbeat.LIVE, True)] * 2
        assert got.hours["spent"] > 0 and got.eta is not None
        assert cli.main(["status", "--config", str(config), "--records", str(runs)]) == 0
        text = capsys.readouterr().out
        assert text.count("live, orphan: no Snakemake above it") == 2, text
        pack_id, pack = next(iter(grid.make_packs(grid.load_config(config)).items()))
        second = subprocess.Popen(
            [sys.executable, "-m", "initmem", "train",
             str(work / "results" / "packs" / grid.spec_name(pack_id, pack)), str(runs),
             "--device", "cpu", "--no-progress"], stderr=subprocess.PIPE, text=True)
        holder = got.trainers[0]
        said = next(line for line in second.stderr if ": waiting, looking again" in line)
        assert f"being trained by pid {holder.pid} on host {holder.host}" in said
        second.terminate()  # it waits rather than train the pack a second time
        assert second.wait(timeout=60) == 75, second.stderr.read()
    finally:
        for pid in pids:  # the orphans this test's Snakemake started
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(map(heartbeat.pid_alive, pids)):
        assert time.monotonic() < deadline, "the killed trainers are still alive"
        time.sleep(0.05)
    after = status.sweep_status(config, runs)
    assert after.total == {**{s: 0 for s in status.STATES}, status.FAILED: 4}
    assert [t.state for t in after.trainers] == [heartbeat.DEAD] * 2
    assert cli.main(["status", "--config", str(config), "--records", str(runs),
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["failed"] == 4


def fake_tool(folder: Path, name: str, output: str, status_code: int = 0) -> None:
    tool = folder / name
    tool.write_text(f"#!/bin/sh\ncat <<'END'\n{output}\nEND\nexit {status_code}\n")
    tool.chmod(0o755)


def test_slurm_jobs_come_live_from_squeue_and_ended_from_sacct(tmp_path, monkeypatch):
    """squeue lists the running attempt; sacct (accounting) adds the ended ones it no
    longer lists, failed with their exit code, preempted; other rules' jobs are not ours."""
    comment = "rule_train_main-p0_wildcards_"
    fake_tool(tmp_path, "squeue", f"12|RUNNING|0:42|None|{comment}")
    fake_tool(tmp_path, "sacct", f"10|FAILED|0:05:01|1:0|{comment}\n"
                                 f"11|PREEMPTED|1:00:00|0:15|{comment}\n"
                                 f"12|RUNNING|0:00:42|0:0|{comment}\n"
                                 "13|COMPLETED|0:00:09|0:0|rule_aggregate_runs_wildcards_")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    jobs = status.slurm_jobs({"main-p0": ["main-p0"]})
    assert [(j["job_id"], j["state"], j["reason"]) for j in jobs] == [
        ("12", "RUNNING", "None"), ("10", "FAILED", "exit code 1:0"),
        ("11", "PREEMPTED", "exit code 0:15")]
    fake_tool(tmp_path, "sacct", "sacct: error: Slurm accounting storage is disabled", 1)
    assert [j["job_id"] for j in status.slurm_jobs({"main-p0": ["main-p0"]})] == ["12"]


@pytest.mark.parametrize("age_s", [20, 121])
def test_another_hosts_trainer_slurm_says_is_gone_is_cut_off_while_it_beats_then_dead(
        tmp_path, fake_slurm, capsys, age_s):
    """Two trainers on other nodes: one whose node SLURM shows down, one SLURM runs
    there; one snapshot (one squeue of every user's jobs) judges both. The first, while
    it beats, is live and cut off (a partition: its pack stays with it); silent past the
    fence (no beat for FENCE_S), dead, never an orphan, its runs failed."""
    fake_slurm.answer("squeue", ["12|RUNNING|imnode1", "13|RUNNING|imnode2"])
    fake_slurm.answer("sinfo", ["imnode1|down*", "imnode2|mixed"])
    root = tmp_path / "runs" / ".checkpoints"
    root.mkdir(parents=True)
    packs = list(grid.make_packs(grid.load_config(TEST_CONFIG)).values())
    now = time.time()
    for pack, job, node, age in zip(packs, ("12", "13"), ("imnode1", "imnode2"), (age_s, 20),
                                    strict=True):
        beat = {"pid": 4242, "host": node, "start": now - 1000, "beat": now - age,
                "pack": pack.key, "epoch": 2, "epochs": 3, "epoch_s": 10.0,
                "slurm_job_id": job, "slurm_node": node, "slurm_restarts": 0}
        heartbeat.path_of(root, pack).write_text(json.dumps(beat))
    got = status.sweep_status(TEST_CONFIG, tmp_path / "runs")
    cut_off = age_s < heartbeat.FENCE_S
    first = heartbeat.LIVE if cut_off else heartbeat.DEAD
    assert got.total == {**{s: 0 for s in status.STATES},
                         **({status.RUNNING: 4} if cut_off else
                            {status.FAILED: 2, status.RUNNING: 2})}
    assert [(t.host, t.state, t.orphan, t.cut_off) for t in got.trainers] == [
        ("imnode1", first, False, cut_off), ("imnode2", heartbeat.LIVE, False, False)]
    assert got.trainers[0].why == (
        "beat 20 s ago, though node imnode1 is down: SLURM's word counts after 120 s without "
        "a beat (cut off from SLURM?); last progress 20 s ago, within 600 s" if cut_off
        else "node imnode1 is down; no beat for more than 120 s")
    assert [c for c in fake_slurm.calls() if c.startswith("squeue -h -a")] == \
        ["squeue -h -a -o %i|%T|%N"]
    assert cli.main(["status", "--config", str(TEST_CONFIG), "--records",
                     str(tmp_path / "runs")]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "imnode1" in line)
    if cut_off:
        assert ("live, cut off (beat 20 s ago, though node imnode1 is down: SLURM's word "
                "counts after 120 s without a beat (cut off from SLURM?); last progress 20 s "
                "ago, within 600 s); the pack stays with it: a job SLURM requeued waits for "
                "its records, and takes the pack over from its checkpoint once it stops "
                "beating  4242  imnode1" in row), row
    else:
        assert "dead (node imnode1 is down; no beat for more than 120 s)  4242  imnode1" in row
    assert "orphan" not in text
    assert cli.main(["status", "--config", str(TEST_CONFIG), "--records",
                     str(tmp_path / "runs"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [t["state"] for t in shown["trainers"]] == [first, "live"]
    assert shown["trainers"][0]["cut_off"] is cut_off
    assert shown["trainers"][1]["why"].startswith("SLURM job 13 runs on imnode2; last progress ")
