"""Archives and record folders crafted against the code, as a hostile user would: made from
a good archive, edited, and sealed again with the project's own checksum functions, so
every checksum is right. Each ends in one line naming the file (or member) and the reason,
exit 2, with nothing written anywhere."""

import io
import json
import math
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakes import write_fake_run
from workflow_helpers import TEST_CONFIG

from initmem import cli
from initmem.plan import grid
from initmem.records import aggregate, archive, files, heartbeat

TABLES = ("summary.parquet", "history.parquet")


@pytest.fixture
def good(tmp_path) -> Path:
    """A good archive of every run of the test config (fake records, one epoch each)."""
    for run in grid.expand_runs(grid.load_config(TEST_CONFIG)):
        write_fake_run(tmp_path / "runs", run)
    archive.pack(grid.load_config(TEST_CONFIG), tmp_path / "runs", tmp_path / "good.tar")
    return tmp_path / "good.tar"


def resealed(source: Path, out: Path, edit: Callable[[dict[str, pd.DataFrame]], None]) -> Path:
    """The archive with its tables edited by `edit` (name -> frame, in place), each table
    sealed again and the manifest's checksums made right, as archive.pack does."""
    with tarfile.open(source) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    frames = {name: pq.read_table(pa.BufferReader(members[name])).to_pandas() for name in TABLES}
    edit(frames)
    manifest = json.loads(members["manifest.json"])
    for name, frame in frames.items():
        members[name] = archive._parquet_bytes(pa.Table.from_pandas(frame, preserve_index=False))
        manifest["sha256"][name] = archive._sha256(members[name])
    manifest["manifest_sha256"] = archive._manifest_digest(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    with open(out, "wb") as fh:
        archive._write_tar(fh, members)
    return out


def snapshot(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


def refused(argv: list[str], capsys, *fragments: str, exit_code: int = 2) -> str:
    """Run the command; it must exit `exit_code` with one line holding every fragment."""
    assert cli.main(argv) == exit_code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def set_run_id(frames: dict[str, pd.DataFrame], run_id: str) -> None:
    """The first run renamed in both tables (its summary's and its history's rows)."""
    old = frames["summary.parquet"].loc[0, "run_id"]
    for frame in frames.values():
        frame.loc[frame["run_id"] == old, "run_id"] = run_id


# Output folders two levels under tmp_path, so that even code that followed these ids
# would write inside tmp_path (where the snapshot sees it), never elsewhere on the machine.
@pytest.mark.parametrize("run_id", ["..:..:escaped", "TMP/escaped:b32:x", "main:..:..:x"])
def test_a_run_id_that_leaves_the_folder_writes_nothing(tmp_path, good, capsys, run_id):
    run_id = run_id.replace("TMP", str(tmp_path))  # an absolute path
    bad = resealed(good, tmp_path / "bad.tar", lambda f: set_run_id(f, run_id))
    before = snapshot(tmp_path)
    for argv in (["archive", "unpack", str(bad), "--out", str(tmp_path / "a" / "out")],
                 ["tensorboard", str(bad), str(tmp_path / "a" / "tb")]):
        refused(argv, capsys, f"{bad}:summary.parquet: run_id {run_id!r} is not the one its "
                "spec makes")
    assert snapshot(tmp_path) == before


def test_a_spec_that_makes_a_path_out_of_the_folder_is_refused(tmp_path, good, capsys):
    def edit(frames):
        frames["summary.parquet"].loc[0, "family"] = "../../escaped"
        set_run_id(frames, frames["summary.parquet"].loc[0, "run_id"].replace(
            "main:", "..:..:escaped:"))
    bad = resealed(good, tmp_path / "bad.tar", edit)
    before = snapshot(tmp_path)
    refused(["archive", "unpack", str(bad), "--out", str(tmp_path / "a" / "out")], capsys,
            f"{bad}:summary.parquet: run", "has no valid spec (family='../../escaped' is not "
            "allowed")
    assert snapshot(tmp_path) == before


def test_a_link_in_the_output_folder_that_leads_out_is_not_followed(tmp_path, good, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "main")
    refused(["archive", "unpack", str(good), "--out", str(tmp_path / "out")], capsys,
            f"{good}:summary.parquet: run main:", "outside", "inside the output folder only")
    assert not any((tmp_path / "elsewhere").iterdir())


def edit_value(member: str, column: str, value: object) -> Callable:
    def edit(frames):
        frames[member].loc[0, column] = value
    return edit


# (member, column, value, what the line says is allowed)
OUT_OF_RANGE = [
    ("summary.parquet", "tau_best", -5, "tau_best=-5 is out of range; allowed: a finite "
     "number in [1, epochs_run], or NaN"),
    ("summary.parquet", "tau_best", 7, "tau_best=7 is out of range"),
    ("summary.parquet", "epochs_run", -1, "epochs_run=-1 is out of range; allowed: a finite "
     "number >= 0"),
    ("summary.parquet", "test_acc_best", math.nan, "test_acc_best=nan is out of range; "
     "allowed: a finite number in [0, 1], or NaN where tau_best is null"),
    ("summary.parquet", "test_acc_best", math.inf, "test_acc_best=inf is out of range"),
    ("summary.parquet", "val_acc_best", 1e308, "val_acc_best=1e+308 is out of range"),
    ("summary.parquet", "kernel_fro_norm_last", -math.inf, "kernel_fro_norm_last=-inf"),
    ("history.parquet", "test_acc", 1e308, "test_acc=1e+308 is out of range"),
    ("history.parquet", "val_loss", math.nan, "val_loss=nan is out of range; allowed: a "
     "finite number >= 0"),
    ("history.parquet", "epoch", 0, "epoch=0 is out of range"),
    ("summary.parquet", "resumed_from_epoch", 0, "resumed_from_epoch=0 is out of range; "
     "allowed: a finite number in [1, epochs + 1], or NaN"),
    ("summary.parquet", "resumed_from_epoch", 10**6, "resumed_from_epoch=1e+06 is out of "
     "range"),
]


@pytest.mark.parametrize(("member", "column", "value", "says"), OUT_OF_RANGE)
def test_an_archived_value_out_of_range_is_named_never_tabled(tmp_path, good, capsys, member,
                                                              column, value, says):
    bad = resealed(good, tmp_path / "bad.tar", edit_value(member, column, value))
    before = snapshot(tmp_path)
    config = str(TEST_CONFIG)
    refused(["aggregate", "--config", config, "--archive", str(bad), "--runs",
             str(tmp_path / "runs.parquet"), "--epochs", str(tmp_path / "epochs.parquet")],
            capsys, f"{bad}:{member} (run main:", says)
    refused(["archive", "unpack", str(bad), "--out", str(tmp_path / "out")], capsys, says)
    assert snapshot(tmp_path) == before
    assert cli.main(["verify", "--config", config, "--archive", str(bad)]) == 1
    assert says in capsys.readouterr().out


def test_a_value_out_of_range_in_a_run_folder_is_named(tmp_path, capsys):
    runs = grid.expand_runs(grid.load_config(TEST_CONFIG))
    for run in runs:
        write_fake_run(tmp_path / "runs", run)
    path = tmp_path / "runs" / runs[1].run_dir / "summary.parquet"
    _, summary = files.read_records(path.parent)
    summary.loc[0, "tau_best"] = -5
    files.atomic_write_parquet(summary, path)  # sealed: its checksum is right
    says = f"{path}: tau_best=-5 is out of range"
    refused(["aggregate", "--config", str(TEST_CONFIG), "--records", str(tmp_path / "runs"),
             "--runs", str(tmp_path / "r.parquet"), "--epochs", str(tmp_path / "e.parquet")],
            capsys, says)
    assert not (tmp_path / "r.parquet").exists()
    assert cli.main(["verify", "--config", str(TEST_CONFIG), "--records",
                     str(tmp_path / "runs")]) == 1
    assert f"damaged  {runs[1].run_id}: {says}" in capsys.readouterr().out


def test_a_string_in_a_float_column_is_named(tmp_path, good, capsys):
    def edit(frames):
        summary = frames["summary.parquet"]
        summary["test_acc_best"] = summary["test_acc_best"].astype(str)
        summary.loc[1, "test_acc_best"] = "0.9; see notes"
    bad = resealed(good, tmp_path / "bad.tar", edit)
    refused(["aggregate", "--config", str(TEST_CONFIG), "--archive", str(bad), "--runs",
             str(tmp_path / "r.parquet"), "--epochs", str(tmp_path / "e.parquet")], capsys,
            f"{bad}:summary.parquet (run main:", "column test_acc_best holds '0.9; see notes', "
            "not a float64 value")


def test_summaries_with_a_string_in_a_float_column_are_named_not_a_traceback(good):
    summaries, _ = archive.read_archive(good)
    frame = summaries.to_pandas()
    frame["val_loss_best"] = ["x"] * len(frame)
    with pytest.raises(files.RecordError, match="summary records: column val_loss_best "
                       "holds 'x', not a float64 value"):
        aggregate.typed_summaries(pa.Table.from_pandas(frame, preserve_index=False))


def linked_archive(path: Path, member: tarfile.TarInfo) -> None:
    """A tar whose manifest is good (and lists no members) and whose summary.parquet
    is `member`."""
    manifest = {"format": archive.FORMAT, "schema_version": files.SCHEMA_VERSION,
                "sha256": {}}
    manifest["manifest_sha256"] = archive._manifest_digest(manifest)
    data = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.addfile(member)


@pytest.mark.parametrize(("kind", "says"), [
    (tarfile.SYMTYPE, "a symbolic link"), (tarfile.LNKTYPE, "a hard link"),
    (tarfile.DIRTYPE, "a folder"), (tarfile.FIFOTYPE, "a device or FIFO")])
def test_a_member_that_is_no_regular_file_says_what_it_is(tmp_path, capsys, kind, says):
    member = tarfile.TarInfo("summary.parquet")
    member.type, member.linkname = kind, "/etc/passwd" if kind == tarfile.SYMTYPE else ""
    linked_archive(tmp_path / "bad.tar", member)
    before = snapshot(tmp_path)
    refused(["archive", "unpack", str(tmp_path / "bad.tar"), "--out", str(tmp_path / "out")],
            capsys, f"{tmp_path / 'bad.tar'}: member summary.parquet is {says}; archives "
            "hold regular files only")
    assert snapshot(tmp_path) == before


BEAT = {"pid": 7, "host": "h", "pack": "x", "start": 1.0, "beat": 2.0, "epoch": 1,
        "epochs": 3, "slurm_job_id": "12", "slurm_node": "n1", "epoch_s": None}


@pytest.mark.parametrize("field, value", [
    *(("pid", pid) for pid in ["../../etc/passwd", -1, 0, 1.5, True, None]),
    ("host", ["h"]), ("beat", "soon"), ("epoch", 1.5), ("slurm_node", ["n1", "n2"]),
    ("slurm_job_id", 12), ("slurm_restarts", "1"), ("ended", {"why": 1}), ("pack", None)])
def test_a_heartbeat_of_fields_no_trainer_writes_reads_as_none(tmp_path, field, value):
    """status signals the pid, reads /proc/<pid>/ and formats the rest: a beat of other
    types (a shared folder may hold anyone's file) is no trainer's."""
    path = tmp_path / f"x{heartbeat.SUFFIX}"
    path.write_text(json.dumps(BEAT))
    assert heartbeat.read(path) == BEAT
    path.write_text(json.dumps({**BEAT, field: value}))
    assert heartbeat.read(path) is None


def test_a_sparse_member_is_refused_before_its_holes_are_read(tmp_path, capsys):
    """A 10 KB tar whose member declares 3 GiB of holes took 35 s and 6.4 GB to refuse."""
    member = tarfile.TarInfo("summary.parquet")
    member.pax_headers = {"GNU.sparse.map": "0,0", "GNU.sparse.size": str(3 * 2**30)}
    path = tmp_path / "sparse.tar"
    manifest = {"format": archive.FORMAT, "schema_version": files.SCHEMA_VERSION,
                "sha256": {}}
    manifest["manifest_sha256"] = archive._manifest_digest(manifest)
    data = json.dumps(manifest).encode()
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.addfile(member, io.BytesIO(b""))
    assert path.stat().st_size < 20_000
    refused(["archive", "unpack", str(path), "--out", str(tmp_path / "out")], capsys,
            "member summary.parquet is a sparse file")


def test_rows_are_bounded_by_the_members_bytes_not_the_manifests_count(tmp_path, good,
                                                                       capsys):
    """2 million copies of one summary row (a 1.36 MB archive) with the manifest's count
    raised to match took 2.4 GB to read; its bytes allow far fewer rows."""
    def copies(frames):
        frames["summary.parquet"] = frames["summary.parquet"].iloc[[0] * 100_000]

    crafted = resealed(good, tmp_path / "copies.tar", copies)
    refused(["archive", "unpack", str(crafted), "--out", str(tmp_path / "out")], capsys,
            "summary.parquet: declares 100000 rows, at most",
            f"({archive.MIN_ROW_BYTES} bytes a row); refused before reading")


def test_a_run_id_archived_twice_is_damage(tmp_path, good, capsys):
    def twice(frames):
        frames["summary.parquet"] = frames["summary.parquet"].iloc[[0, 0, 1]]

    crafted = resealed(good, tmp_path / "twice.tar", twice)
    run_id = archive.read_archive(good)[0].column("run_id")[0].as_py()
    refused(["archive", "unpack", str(crafted), "--out", str(tmp_path / "out")], capsys,
            f"summary.parquet: run {run_id} has 2 summary rows; an archive holds one per run")


def test_an_empty_table_that_lacks_a_column_is_refused_in_one_line(tmp_path, good, capsys):
    """Found by the schema-drawn fuzzing: an empty history member without a column named
    its row 0's run, a row it does not have (IndexError)."""
    def edit(frames):
        frames["history.parquet"] = frames["history.parquet"].drop(columns="T_adapt").head(0)
    bad = resealed(good, tmp_path / "bad.tar", edit)
    refused(["archive", "unpack", str(bad), "--out", str(tmp_path / "out")], capsys,
            f"{bad}:history.parquet: record lacks columns ['T_adapt']")
