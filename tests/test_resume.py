"""Checkpoints, resume, preemption: an interrupted pack ends bitwise equal to an
uninterrupted one (on CPU), and a damaged checkpoint is detected and skipped."""

import fcntl
import hashlib
import io
import os
import random
import signal
import socket
import subprocess
import sys
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import stopping
import torch

from initmem.cli import main as command_line
from initmem.plan.spec import Pack, Recipe, Run
from initmem.records import heartbeat
from initmem.records.files import PROVENANCE_COLUMNS, read_records
from initmem.training import checkpoint, command, data
from initmem.training.command import INTERRUPTED_EXIT, PREEMPTED_EXIT
from initmem.training.trainer import PackTrainer, Preempted, saved_run_weights

RECIPE = Recipe(family="test", arch="resnet9", optimizer="adam", b=32, epochs=3, lr0=1e-3,
                width=0.125, dataset="synthetic", train_subset=160, eval_subset=64,
                best_test_subset=128, augment=True)  # weights at tau_best checkpointed too
PACK = Pack(RECIPE, (Run(RECIPE, 0.5, 0), Run(RECIPE, 2.0, 1)))
CPU = torch.device("cpu")
LIMIT = 2**30  # bytes: any checkpoint of these tests' packs


@pytest.fixture(scope="module")
def splits():
    return data.load_splits(RECIPE, None)


def records(out: Path) -> list[pd.DataFrame]:
    frames = []
    for run in PACK.runs:
        history, summary = read_records(out / run.run_dir)
        # provenance, not results: the wall time, the host, whether it resumed, and the
        # commit, which an edit of the checkout between the two processes marks dirty
        frames += [history, summary.drop(columns=list(PROVENANCE_COLUMNS))]
    return frames


def assert_same_records(a: Path, b: Path) -> None:
    for left, right in zip(records(a), records(b), strict=True):
        pd.testing.assert_frame_equal(left, right, check_exact=True)


@pytest.fixture(scope="module")
def uninterrupted(splits, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    result = PackTrainer(PACK, splits, out, CPU, progress=False).run()
    return out, result.model.state_dict()


def test_checkpoint_round_trip_and_fallback(tmp_path):
    checkpoint.save(tmp_path, {"k": 1})
    checkpoint.save(tmp_path, {"k": 2})
    assert checkpoint.load_latest(tmp_path, LIMIT) == {"k": 2}
    raw = (tmp_path / checkpoint.LATEST).read_bytes()
    (tmp_path / checkpoint.LATEST).write_bytes(raw[:-10])  # truncated
    with pytest.raises(checkpoint.CheckpointError, match="latest.pt: checksum mismatch"):
        checkpoint.read(tmp_path / checkpoint.LATEST, LIMIT)
    assert checkpoint.load_latest(tmp_path, LIMIT) == {"k": 1}  # falls back to the previous
    flipped = bytearray((tmp_path / checkpoint.PREVIOUS).read_bytes())
    flipped[-1] ^= 0xFF
    (tmp_path / checkpoint.PREVIOUS).write_bytes(bytes(flipped))
    assert checkpoint.load_latest(tmp_path, LIMIT) is None  # nothing good: start over
    assert not list(tmp_path.glob(".ckpt.*"))  # no temporary files left behind


def test_remove_clears_the_temporary_file_of_a_killed_save(tmp_path):
    checkpoint.save(tmp_path / "c", {"k": 1})
    (tmp_path / "c" / f"{checkpoint.TMP_PREFIX}killed.tmp").write_bytes(b"half a save")
    checkpoint.remove(tmp_path / "c")
    assert not (tmp_path / "c").exists()


def stopped_after(updates: int, splits, out: Path, ckpt: Path, pack: Pack = PACK
                  ) -> PackTrainer:
    """A trainer stopped as if SIGTERM arrived during update `updates` (checkpoints at the
    end of epoch 1, update 5, and at the stop)."""
    trainer = PackTrainer(pack, splits, out, CPU, checkpoint_dir=ckpt, progress=False)
    real_step, calls = trainer.optimizer.step, []

    def step_then_stop(lr):
        real_step(lr)
        calls.append(lr)
        trainer.stop_requested = len(calls) >= updates

    trainer.optimizer.step = step_then_stop
    with pytest.raises(Preempted):
        trainer.run()
    return trainer


def provenance(out: Path) -> list[tuple]:
    """Each run's host, SLURM job and resumed epoch (None for null)."""
    summaries = [read_records(out / run.run_dir)[1].iloc[0] for run in PACK.runs]
    return [tuple(None if pd.isna(s[c]) else s[c]
                  for c in ("host", "slurm_job_id", "resumed_from_epoch")) for s in summaries]


def test_resume_after_a_stop_in_mid_epoch_is_bitwise_equal(splits, uninterrupted, tmp_path,
                                                           monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    trainer = stopped_after(7, splits, out, ckpt)
    assert trainer.loop.k == 7 and trainer.loop.step == 2  # epoch 2, update 2 of 5
    resumed = PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False)
    assert resumed.loop.k == 7
    model = resumed.run().model.state_dict()
    assert_same_records(uninterrupted[0], out)
    for name, tensor in uninterrupted[1].items():
        assert torch.equal(tensor, model[name]), name
    # the records say it resumed in epoch 2; the uninterrupted ones that it did not
    host = socket.gethostname()
    assert provenance(out) == [(host, None, 2)] * 2
    assert provenance(uninterrupted[0]) == [(host, None, None)] * 2


def test_resume_right_after_an_epochs_last_update_is_bitwise_equal(splits, uninterrupted,
                                                                   tmp_path):
    """Stopped after update 5, the last of epoch 1, before its evaluation: the resumed
    trainer ends the epoch with no update left, so epoch 1's bn_var_ratio comes from the
    last batch's variances the checkpoint kept."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    trainer = stopped_after(5, splits, out, ckpt)
    assert (trainer.loop.k, trainer.loop.epoch, trainer.loop.step) == (5, 1, 5)
    PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False).run()
    assert_same_records(uninterrupted[0], out)
    assert records(out)[0]["bn_var_ratio"].gt(0).all()
    assert [resumed for *_, resumed in provenance(out)] == [1, 1]


@pytest.mark.slow
def test_resume_of_an_optimizer_evaluated_elsewhere_is_bitwise_equal(splits, tmp_path):
    """Schedule-Free AdamW trains y and is evaluated at x (BatchNorm re-estimated there,
    its weights at tau_best kept): stopped in mid-epoch 2 and resumed, it ends as the pack
    trained straight through, records and final weights bitwise, the kept checkpoint's
    weights (--keep-checkpoint) among them."""
    recipe = Recipe(**{**vars(RECIPE), "optimizer": "schedule_free_adamw",
                       "schedule": "constant"})
    pack = Pack(recipe, tuple(Run(recipe, r.sigma_w, r.seed) for r in PACK.runs))
    straight = PackTrainer(pack, splits, tmp_path / "straight", CPU, progress=False).run()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stopped_after(7, splits, out, ckpt, pack)
    resumed = PackTrainer(pack, splits, out, CPU, checkpoint_dir=ckpt, progress=False).run()
    stopping.assert_same_records(tmp_path / "straight", out, pack)
    assert_same_weights(straight.weights, resumed.weights)
    assert_same_weights(straight.weights,
                        saved_run_weights(checkpoint.load_latest(ckpt, LIMIT)))


def sealed_bytes(body: bytes) -> bytes:
    """A checkpoint file whose checksum is valid over `body` (JSON, newline, tensors)."""
    return (checkpoint.MAGIC + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n"
            + body)


def restores_badly(path: Path) -> None:  # loads, and fails midway through restoring
    state = checkpoint.read(path, LIMIT)
    state["clocks"] = "not a clock"
    path.write_bytes(checkpoint.encode(state))


def tensors_bytes(tensors: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("damage", [
    lambda path: path.write_bytes(sealed_bytes(b"{not json\n" + tensors_bytes({}))),
    lambda path: path.write_bytes(sealed_bytes(b"{}\nnot a torch file")),
    lambda path: path.write_bytes(sealed_bytes(b"[1, 2]\n" + tensors_bytes({}))),
    lambda path: path.write_bytes(sealed_bytes(b'{"k": {"$tensor": 3}}\n' + tensors_bytes({}))),
    restores_badly,
], ids=["json-not", "tensors-not", "not-a-dict", "tensor-missing", "restores-not"])
def test_a_checkpoint_that_fails_for_any_reason_falls_back(splits, uninterrupted, tmp_path,
                                                           damage, caplog):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stopped_after(7, splits, out, ckpt)
    damage(ckpt / checkpoint.LATEST)
    resumed = PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False)
    assert resumed.loop.k == 5  # the previous generation: the end of epoch 1
    assert f"{ckpt / checkpoint.LATEST}: " in caplog.text
    assert "resuming from the older previous.pt instead" in caplog.text
    resumed.run()
    assert_same_records(uninterrupted[0], out)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


@pytest.mark.parametrize("damage_previous", [truncate, restores_badly],
                         ids=["checksum", "restores-not"])
def test_no_generation_restoring_stops_before_anything_restarts(tmp_path, capsys,
                                                                 damage_previous):
    """Both generations damaged: one line naming each and what to do, exit status 2, no
    record written and the checkpoints left for the user to look at or remove."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    ckpt = out / ".checkpoints" / PACK.key
    trainer = PackTrainer(PACK, data.load_splits(RECIPE, None), out, CPU,
                          checkpoint_dir=ckpt, progress=False)
    trainer._save()
    trainer._save()
    truncate(ckpt / checkpoint.LATEST)
    damage_previous(ckpt / checkpoint.PREVIOUS)
    code = command_line(["train", str(spec), str(out), "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{ckpt}: no checkpoint restores ({ckpt / checkpoint.LATEST}: checksum " in err
    assert f"; {ckpt / checkpoint.PREVIOUS}: " in err and "remove the folder" in err
    assert not (out / PACK.runs[0].run_dir).exists()
    assert (ckpt / checkpoint.LATEST).exists() and (ckpt / checkpoint.PREVIOUS).exists()


def test_resume_removes_a_killed_saves_temporary_file_but_not_one_in_flight(splits, tmp_path):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stopped_after(7, splits, out, ckpt)
    killed = ckpt / f"{checkpoint.TMP_PREFIX}killed.tmp"
    killed.write_bytes(b"half a save")
    in_flight = ckpt / f"{checkpoint.TMP_PREFIX}writing.tmp"
    with open(in_flight, "wb") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # as another trainer's save holds it
        resumed = PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False)
        assert resumed.loop.k == 7
        assert not killed.exists() and in_flight.exists()


def test_a_checkpoint_of_another_pack_is_refused(splits, tmp_path):
    PackTrainer(PACK, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c",
                progress=False)._save()
    other = Pack(RECIPE, (Run(RECIPE, 0.5, 0),))
    with pytest.raises(checkpoint.CheckpointError, match="another pack"):
        PackTrainer(other, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c")


def test_a_checkpoint_from_before_epoch_augmentation_is_refused(splits, tmp_path):
    """Until 2026-11 augmentation was drawn per step: its generator states cannot resume."""
    trainer = PackTrainer(PACK, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c",
                          progress=False)
    state = trainer._checkpoint_state()
    del state["augmentations"], state["format"]  # as a checkpoint of format 1 was
    checkpoint.save(tmp_path / "c", state)
    with pytest.raises(checkpoint.CheckpointError, match="older initmem"):
        PackTrainer(PACK, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c")


def test_a_checkpoint_without_the_last_batch_variances_is_refused(splits, tmp_path):
    """Format 4 (before bn_var_ratio) cannot give an epoch resumed after its last update
    its ratio: refused with the same message, not a record with a wrong value."""
    trainer = PackTrainer(PACK, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c",
                          progress=False)
    state = {**trainer._checkpoint_state(), "format": 4}
    del state["batch_variances"]
    checkpoint.save(tmp_path / "c", state)
    with pytest.raises(checkpoint.CheckpointError, match="older initmem .format 4"):
        PackTrainer(PACK, splits, tmp_path / "o", CPU, checkpoint_dir=tmp_path / "c")


def cli(spec: Path | list[Path], out: Path, *extra: str) -> subprocess.Popen:
    """The train command, in the reference's contiguous layout (its CPU default for
    ResNet-9 is channels_last: the same values up to summation order, not bitwise)."""
    specs = [spec] if isinstance(spec, Path) else spec
    return subprocess.Popen([sys.executable, "-m", "initmem", "train", *map(str, specs), str(out),
                             "--device", "cpu", "--no-progress", "--checkpoint-every", "0",
                             "--channels-last", "off", *extra], stderr=subprocess.PIPE,
                            text=True)


def wait_for_checkpoint(folder: Path, proc: subprocess.Popen, past_update: int = 0,
                        timeout: float = 120) -> None:
    """Until the pack has checkpointed beyond update `past_update`."""
    deadline = time.monotonic() + timeout
    while (saved := checkpoint.load_latest(folder, LIMIT)) is None or saved["k"] <= past_update:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, f"no checkpoint past update {past_update} appeared"
        time.sleep(0.02)


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing(uninterrupted, tmp_path):
    """Killed three times, at random updates (so a fast machine cannot finish first) and
    at a random moment within them (in a step, an evaluation or a checkpoint write)."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    folder = out / ".checkpoints" / PACK.key
    rng = random.Random(0)
    updates = RECIPE.epochs * RECIPE.train_subset // RECIPE.b
    for past_update in sorted(rng.sample(range(updates - 4), 3)):
        proc = cli(spec, out)
        wait_for_checkpoint(folder, proc, past_update)
        time.sleep(rng.uniform(0.0, 0.05))
        assert proc.poll() is None, "the pack finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    proc = cli(spec, out)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "resumed from checkpoint" in err, err
    assert_same_records(uninterrupted[0], out)
    assert not (out / ".checkpoints").exists()  # removed after success, folders too


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, PREEMPTED_EXIT),
                                                (signal.SIGUSR1, PREEMPTED_EXIT),
                                                (signal.SIGINT, INTERRUPTED_EXIT)])
def test_a_stop_signal_checkpoints_and_exits_with_its_status(
        signum, status, uninterrupted, tmp_path):
    """Preemption (SIGTERM, SIGUSR1) exits for a retry, Ctrl-C (SIGINT) as interrupted;
    each after a checkpoint, with one line and no traceback, and resumes bitwise."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    folder = out / ".checkpoints" / PACK.key
    proc = cli(spec, out, "--keep-checkpoint")
    wait_for_checkpoint(folder, proc)
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    said = [line for line in err.splitlines() if signum.name in line]
    assert len(said) == 1 and f"checkpoint written; exiting with status {status}" in said[0]
    assert "Traceback" not in err and (folder / checkpoint.LATEST).exists()
    beat = heartbeat.read(heartbeat.path_of(out / ".checkpoints", PACK))
    assert heartbeat.state(beat).state == heartbeat.ENDED and "Preempted" in beat["ended"]
    second = cli(spec, out, "--keep-checkpoint")
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0 and "resumed from checkpoint" in err, err
    assert_same_records(uninterrupted[0], out)
    assert not heartbeat.path_of(out / ".checkpoints", PACK).exists()  # trained: removed
    weights = checkpoint.load_latest(folder, LIMIT)["model"]
    for name, tensor in uninterrupted[1].items():
        assert torch.equal(tensor, weights[name]), name


@pytest.mark.slow
def test_a_job_of_two_packs_preempted_in_the_second_costs_the_first_nothing(
        uninterrupted, tmp_path):
    """`initmem train A B` trains A, then B, in one process. Preempted in B, it exits for
    a retry with A's final checkpoint kept, so the retry rewrites A's records (deleted
    here; the workflow keeps a failed job's outputs since issue 47, but a user may delete
    a damaged record) from it, without training A again."""
    other = Pack(RECIPE, (Run(RECIPE, 1.0, 2),))
    specs, out = [tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "out"
    PACK.dump(specs[0])
    other.dump(specs[1])
    proc = cli(specs, out)
    wait_for_checkpoint(out / ".checkpoints" / other.key, proc)
    os.kill(proc.pid, signal.SIGUSR1)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED_EXIT, err
    assert f"pack {PACK.key} of 2 runs" in err and f"pack {other.key} of 1 runs" in err
    for run in PACK.runs:
        (out / run.run_dir / "summary.parquet").unlink()
    retry = cli(specs, out)
    _, err = retry.communicate(timeout=300)
    assert retry.returncode == 0 and err.count("resumed from checkpoint") == 2, err
    assert_same_records(uninterrupted[0], out)
    assert (out / other.runs[0].run_dir / "summary.parquet").exists()
    assert not (out / ".checkpoints").exists()  # no empty folder left


def test_same_spec_twice_gives_bitwise_equal_records(splits, uninterrupted, tmp_path):
    PackTrainer(PACK, splits, tmp_path, CPU, progress=False).run()
    assert_same_records(uninterrupted[0], tmp_path)
    _, summary = read_records(tmp_path / PACK.runs[0].run_dir)
    assert summary["determinism"].iloc[0].startswith("cpu: deterministic")
    assert summary["data_verification"].iloc[0] == "synthetic"


@pytest.mark.slow
def test_large_cpu_packs_train_as_sub_packs_and_rewrite_deleted_records(tmp_path):
    """On CPU a pack over 256 images per step trains as consecutive sub-packs (measured
    faster); after a failed job Snakemake deletes its records, and a rerun rewrites them
    from the kept checkpoints without training again."""
    recipe = Recipe(**{**RECIPE.__dict__, "b": 128, "train_subset": 256, "epochs": 1})
    pack = Pack(recipe, tuple(Run(recipe, s, 0) for s in (0.5, 1.0, 2.0)))
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    pack.dump(spec)
    first = cli(spec, out, "--keep-checkpoint")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert "as 2 consecutive sub-packs of at most 2 runs" in err
    before = [read_records(out / run.run_dir)[1] for run in pack.runs]
    for run in pack.runs:
        (out / run.run_dir / "summary.parquet").unlink()
    second = cli(spec, out)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0 and err.count("resumed from checkpoint") == 2, err
    for run, old in zip(pack.runs, before, strict=True):
        new = read_records(out / run.run_dir)[1]
        pd.testing.assert_frame_equal(old.drop(columns=list(PROVENANCE_COLUMNS)),
                                      new.drop(columns=list(PROVENANCE_COLUMNS)),
                                      check_exact=True)
        # resumed from the final checkpoint, past the last epoch: the records only
        assert old["resumed_from_epoch"].isna().all()
        assert new["resumed_from_epoch"].tolist() == [recipe.epochs + 1]
    assert not (out / ".checkpoints").exists()  # no empty folder left


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """The diverging pack trained without interruption: its diverged run leaves after
    epoch 1, the other three go on as a pack of 3."""
    out = tmp_path_factory.mktemp("compacted")
    splits = data.load_splits(stopping.DIVERGING_RECIPE, None)
    return out, PackTrainer(stopping.DIVERGING, splits, out, CPU, progress=False).run().weights


def assert_same_weights(expected: list[dict], got: list[dict]) -> None:
    for run_expected, run_got in zip(expected, got, strict=True):
        for name, tensor in run_expected.items():  # the diverged run's are not finite
            torch.testing.assert_close(run_got[name], tensor, rtol=0, atol=0, equal_nan=True)


def test_resume_after_a_compaction_is_bitwise_equal(compacted, tmp_path):
    """Stopped in epoch 2, after the diverged run left: the checkpoint holds the pack of 3
    and the departed run's weights (within the pack's checkpoint limit); the resumed pack
    ends as the uninterrupted one."""
    splits = data.load_splits(stopping.DIVERGING_RECIPE, None)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stop_at = stopping.DIVERGING_RECIPE.steps_per_epoch + 3
    trainer = PackTrainer(stopping.DIVERGING, splits, out, CPU, checkpoint_dir=ckpt,
                          checkpoint_every_s=0, progress=False)
    save = trainer._save

    def save_then_stop():  # the checkpoint of a pack and a departed run: within the limit
        save()
        assert (ckpt / checkpoint.LATEST).stat().st_size <= trainer.checkpoint_limit()
        if trainer.loop.k >= stop_at:
            raise Preempted(f"stopped at update {trainer.loop.k}")

    trainer._save = save_then_stop
    with pytest.raises(Preempted):
        trainer.run()
    resumed = PackTrainer(stopping.DIVERGING, splits, out, CPU, checkpoint_dir=ckpt,
                          progress=False)
    assert (resumed.loop.k, resumed.model.n, resumed.loop.members) == (stop_at, 3, [0, 1, 3])
    assert_same_weights(compacted[1], resumed.run().weights)
    stopping.assert_same_records(compacted[0], out, stopping.DIVERGING)


@pytest.mark.slow
def test_sigkill_before_and_after_a_compaction_loses_nothing(compacted, tmp_path):
    """Killed in epoch 1 (a pack of 4), then twice after the diverged run left (a pack of
    3); the final checkpoint (--keep-checkpoint) holds every run's final weights."""
    pack, steps = stopping.DIVERGING, stopping.DIVERGING_RECIPE.steps_per_epoch
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    pack.dump(spec)
    folder = out / ".checkpoints" / pack.key
    rng = random.Random(1)
    for past_update in (3, steps + 2, 2 * steps + 5):
        proc = cli(spec, out, "--keep-checkpoint")
        wait_for_checkpoint(folder, proc, past_update)
        time.sleep(rng.uniform(0.0, 0.05))
        assert proc.poll() is None, "the pack finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        members = checkpoint.load_latest(folder, LIMIT)["members"]
        assert len(members) == (4 if past_update < steps else 3)
    proc = cli(spec, out, "--keep-checkpoint")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "resumed from checkpoint" in err, err
    stopping.assert_same_records(compacted[0], out, pack)
    assert_same_weights(compacted[1],
                        saved_run_weights(checkpoint.load_latest(folder, LIMIT)))


def test_only_unfinished_runs_train_unless_a_checkpoint_holds_them(tmp_path):
    """A pack whose runs partly have summaries trains the others alone; a part with a
    checkpoint resumes whole (its checkpoint holds every run); a finished one trains none."""
    out, root = tmp_path / "out", tmp_path / "ckpt"
    three = Pack(RECIPE, (*PACK.runs, Run(RECIPE, 1.0, 2)))
    finished = three.runs[1]
    (out / finished.run_dir).mkdir(parents=True)
    (out / finished.run_dir / "summary.parquet").touch()
    todo = command.unfinished_parts([three], out, root)
    assert [part.runs for part in todo] == [(three.runs[0], three.runs[2])]
    (root / three.key).mkdir(parents=True)
    (root / three.key / checkpoint.LATEST).touch()
    assert command.unfinished_parts([three], out, root) == [three]
    done = Pack(RECIPE, (finished,))
    assert command.unfinished_parts([done], out, root) == []


class RunsCode:
    """Pickled, it names os.system: loading it runs a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def pickled_checkpoint(payload: object) -> bytes:
    """A checkpoint in the pickle format of earlier versions, its SHA-256 line correct."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return hashlib.sha256(buffer.getvalue()).hexdigest().encode() + b"\n" + buffer.getvalue()


def deep_json(path: Path) -> None:
    path.write_bytes(sealed_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n"
                                  + tensors_bytes({})))


def sparse_10_gb(path: Path) -> None:  # no disk used
    path.touch()
    os.truncate(path, 10**10)


@contextmanager
def deadline(seconds: int):
    """TimeoutError instead of a hang (SIGALRM interrupts a blocking open or read)."""
    def hung(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("craft", "reason"), [
    (lambda path: path.write_bytes(pickled_checkpoint(RunsCode(path.parent / "ran"))),
     "a checkpoint in the pickle format of earlier initmem versions, which can run code"),
    (os.mkfifo, "a FIFO, not a regular file"),
    (lambda path: path.symlink_to("/dev/zero"), "a symbolic link"),
    (sparse_10_gb, "10000000000 bytes, more than a checkpoint of this pack can hold"),
    (deep_json, "does not load (InputError: its state: JSON nested deeper than 64 levels"),
], ids=["pickle-runs-code", "fifo", "link-to-dev-zero", "10-gb", "deep-json"])
def test_a_hostile_checkpoint_ends_in_one_line_and_runs_nothing(tmp_path, capsys, craft,
                                                                 reason):
    """A crafted latest.pt: exit status 2, one line naming the file and why, within
    seconds, no record written and the command in the pickle not run."""
    spec, out = tmp_path / "pack.json", tmp_path / "out"
    PACK.dump(spec)
    ckpt = out / ".checkpoints" / PACK.key
    ckpt.mkdir(parents=True)
    craft(ckpt / checkpoint.LATEST)
    with deadline(60):
        code = command_line(["train", str(spec), str(out), "--device", "cpu",
                             "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{ckpt / checkpoint.LATEST}: {reason}" in err, err
    assert not (ckpt / "ran").exists() and not (out / PACK.runs[0].run_dir).exists()


def test_the_pickle_format_resumes_when_the_user_trusts_it(splits, tmp_path):
    """A checkpoint of the earlier format, which the user made: --trust-checkpoint loads
    it, and the next save writes the current format."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    stopped_after(7, splits, out, ckpt)
    for name in (checkpoint.LATEST, checkpoint.PREVIOUS):
        state = checkpoint.read(ckpt / name, LIMIT)
        (ckpt / name).write_bytes(pickled_checkpoint(state))
    with pytest.raises(checkpoint.PickledCheckpoint, match="rerun with --trust-checkpoint"):
        PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False)
    trusted = PackTrainer(PACK, splits, out, CPU, checkpoint_dir=ckpt, progress=False,
                          trust_checkpoint=True)
    assert trusted.loop.k == 7
    trusted._save()
    assert (ckpt / checkpoint.LATEST).read_bytes().startswith(checkpoint.MAGIC + b"\n")


def test_compressed_tensor_records_are_refused(tmp_path):
    """torch.save stores its records as they are; a deflated one could expand far beyond
    the file's size, so it is refused before torch reads it."""
    checkpoint.save(tmp_path, {"w": torch.zeros(1000)})
    head, digest, state, blob = (tmp_path / checkpoint.LATEST).read_bytes().split(b"\n", 3)
    with zipfile.ZipFile(io.BytesIO(blob)) as stored:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as deflated:
            for record in stored.infolist():
                deflated.writestr(record.filename, stored.read(record))
    (tmp_path / checkpoint.LATEST).write_bytes(sealed_bytes(state + b"\n" + buffer.getvalue()))
    with pytest.raises(checkpoint.CheckpointError, match="a compressed tensor record"):
        checkpoint.read(tmp_path / checkpoint.LATEST, LIMIT)
