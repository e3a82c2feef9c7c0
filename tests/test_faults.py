"""Finished work survives the faults one machine can stage (the two-node ones are in
test_slurm_nodes.py, the whole matrix in bench/faults.py): a training job whose runs
another trainer finished succeeds without touching them, and a sweep restarted while its
jobs run waits for them: no finished record deleted, no pack trained twice."""

from __future__ import annotations

import signal
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cluster_faults import Watch
from fakes import write_fake_run
from test_status import wait_for_trainers
from workflow_helpers import TEST_CONFIG, snakemake, snakemake_background

from initmem.plan import grid
from initmem.records import heartbeat
from initmem.records.files import read_records
from initmem.training import checkpoint


def summaries_of(work: Path, config: Path) -> list[Path]:
    """Where each run of the config has its summary."""
    return [work / "results" / "runs" / run.run_dir / "summary.parquet"
            for pack in grid.make_packs(grid.load_config(config)).values()
            for run in pack.runs]


def records_of(work: Path, config: Path) -> dict[Path, tuple[bytes, int]]:
    """Each run's summary (every run of the config): its bytes and mtime."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns)
            for path in summaries_of(work, config) if path.exists()}


def test_a_jobs_own_snakemake_finds_its_rule_after_its_runs_finished(tmp_path):
    """What a SLURM job runs (`--target-jobs`, `--mode remote`, `--force`, as the plugin
    spawns it) after another trainer finished the job's runs: its rule is there (it was
    not: UnknownRuleException, then Snakemake deleted the records as a failed job's), and
    it succeeds in one line without touching the records."""
    packs = grid.make_packs(grid.load_config(TEST_CONFIG))
    (tmp_path / "results" / "packs").mkdir(parents=True)
    for pack_id, pack in packs.items():
        pack.dump(tmp_path / "results" / "packs" / grid.spec_name(pack_id, pack))
        for run in pack.runs:
            write_fake_run(tmp_path / "results" / "runs", run)
    before = records_of(tmp_path, TEST_CONFIG)
    job = next(iter(packs))
    done = snakemake(tmp_path, TEST_CONFIG, "--target-jobs", f"train_{job}:", "--force",
                     "--nolock", "--mode", "remote")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "logs" / "train" / f"{job}.log").read_text().splitlines()
    assert log[-1].endswith(f"pack {packs[job].key}: all 2 runs have records; nothing to train")
    assert records_of(tmp_path, TEST_CONFIG) == before


@pytest.mark.slow
def test_a_failed_job_keeps_the_records_it_wrote(tmp_path):
    """A job of two packs whose second pack fails (its checkpoint does not restore) keeps
    the first pack's records: Snakemake used to remove a failed job's outputs ('since they
    might be corrupted'), but a summary is written whole or not at all, and the workflow's
    profile keeps them (keep-incomplete)."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["execution"]["packs_per_job"] = 2
    path = tmp_path / "two_per_job.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    first, second = grid.make_packs(grid.load_config(path)).values()
    broken = tmp_path / "results" / "runs" / ".checkpoints" / second.key
    broken.mkdir(parents=True)
    (broken / checkpoint.LATEST).write_bytes(b"not a checkpoint")
    done = snakemake(tmp_path, path, "results/aggregate/runs.parquet")
    assert done.returncode != 0
    assert "Removing output files" not in done.stdout + done.stderr
    kept = records_of(tmp_path, path)
    assert set(kept) == {tmp_path / "results" / "runs" / run.run_dir / "summary.parquet"
                         for run in first.runs}


def long_config(tmp_path: Path, epochs: int) -> Path:
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["families"]["main"]["recipe"]["epochs"] = epochs
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_a_sweep_restarted_while_its_jobs_run_waits_for_them(tmp_path):
    """The submitting Snakemake killed mid-training (a login shell that closed), its
    trainers train on; the documented command run again (after `snakemake --unlock`)
    submits the two packs again, whose trainers wait for the running ones and end in one
    line once those wrote the records. The sweep ends with status 0; no record vanished
    at any moment; each run trained once, from the start, by the first sweep's trainers."""
    config, work = long_config(tmp_path, 200), tmp_path / "work"
    root = work / "results" / "runs" / ".checkpoints"
    first = snakemake_background(work, config, "results/aggregate/runs.parquet")
    wait_for_trainers(root, 2, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    pids = {heartbeat.read(p)["pid"] for p in root.glob(f"*{heartbeat.SUFFIX}")}
    unlock = snakemake(work, config, "--unlock")
    assert unlock.returncode == 0, unlock.stderr
    watch = Watch(summaries_of(work, config))
    watch.start()
    again = snakemake_background(work, config, "results/aggregate/runs.parquet")
    out, err = again.communicate(timeout=900)
    watch.stop()
    assert again.returncode == 0, out + err
    assert "Removing output files" not in out + err
    assert watch.vanished == set() and len(watch.seen) == 4
    logs = [p.read_text() for p in (work / "logs" / "train").glob("*.log")]
    assert all("nothing to train" in log.splitlines()[-1] for log in logs), logs
    waited = [log for log in logs if ": waiting, looking again every" in log]
    assert waited, "the restarted sweep's trainers came after the first sweep's had ended"
    assert all(any(f"pid {pid} " in log for pid in pids) for log in waited)
    for path in watch.seen:
        assert pd.isna(read_records(path.parent)[1].iloc[0]["resumed_from_epoch"])
