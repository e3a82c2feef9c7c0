"""Every reader a stranger's file reaches, fuzzed (tests/test_fuzz.py in make test, a longer
budget in bench/fuzz.py).

Each reader takes a path and reads it as the pipeline does: a runs archive (tar,
manifest, summary and history Parquet, environment), a run folder's record files, a
heartbeat or pack lock, a checkpoint (header and state line), a config and a pack spec
(YAML or JSON). Its inputs come from structure-aware strategies (files built as initmem
writes them, from drawn values, sealed with the right checksums so that the reader gets
past them) and from mutations of real files (bytes flipped, cut, inserted, repeated).
The property: each input either reads, or is refused with the project's error
(InputError and its kinds: RecordError, CheckpointError), within LIMIT_S seconds and
LIMIT_BYTES of memory more than the reader's process had. Each case runs in a forked
child under that memory limit (RLIMIT_AS) and is killed when late, so a hang, a
MemoryError or a C++ abort is one case's finding, not the end of the test.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import select
import signal
import tarfile
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch
import yaml
from fakes import write_fake_run
from hypothesis import strategies as st
from workflow_helpers import TEST_CONFIG

from initmem.errors import InputError
from initmem.plan import grid
from initmem.plan.spec import Pack
from initmem.records import archive, environment, heartbeat
from initmem.records.files import read_records
from initmem.training import checkpoint

LIMIT_S = 5.0
LIMIT_BYTES = 1024**3
READ, REFUSED = "read", "refused"  # and findings: crash, hang, died


@dataclass(frozen=True)
class Outcome:
    kind: str  # READ, REFUSED, or a finding: crash (another exception), hang, died
    detail: str = ""


def in_child(read: Callable[[Path], Any], path: Path, limit_s: float = LIMIT_S) -> Outcome:
    """`read(path)` in a forked child limited to LIMIT_BYTES more memory, killed after
    `limit_s`: read, refused (InputError), or the finding."""
    out, into = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test
        os.close(out)
        code = 0
        try:
            with open(f"/proc/{os.getpid()}/statm") as fh:
                mapped = int(fh.read().split()[0]) * resource.getpagesize()
            resource.setrlimit(resource.RLIMIT_AS, (mapped + LIMIT_BYTES, mapped + LIMIT_BYTES))
            os.write(into, json.dumps(_outcome(read, path).__dict__).encode()[:60_000])
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(into)
    try:
        ready, _, _ = select.select([out], [], [], limit_s)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return Outcome("hang", f"no answer within {limit_s} s")
        data = b"".join(iter(lambda: os.read(out, 65536), b""))
    finally:
        os.close(out)
        _, status = os.waitpid(pid, 0)
    if not data:
        return Outcome("died", f"wait status {status}")
    return Outcome(**json.loads(data))


def _outcome(read: Callable[[Path], Any], path: Path) -> Outcome:
    try:
        read(path)
    except InputError as err:
        return Outcome(REFUSED, str(err))
    except Exception:  # any other, MemoryError included, is a finding
        return Outcome("crash", traceback.format_exc(limit=-3))
    return Outcome(READ)


# --- mutations of real files -------------------------------------------------------------

@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """One of `seeds` with up to four edits: a byte flipped, a span cut, bytes inserted,
    a span repeated, the file truncated."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        edit = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]))
        if edit == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif edit == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif edit == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))] * draw(st.integers(2, 50))
        else:
            del data[at:]
    return bytes(data)


# --- JSON values --------------------------------------------------------------------------

SCALARS = (st.none() | st.booleans() | st.integers(-(2**80), 2**80)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


def json_bytes(value: Any) -> bytes:
    return json.dumps(value).encode()


# --- heartbeats and locks ----------------------------------------------------------------

def beat_values() -> st.SearchStrategy[dict[str, Any]]:
    """A heartbeat's fields, each either of its kind or anything."""
    fields = {**heartbeat.FIELDS, **heartbeat.OPTIONAL_FIELDS}
    typed = {"int": st.integers(-(2**70), 2**70),
             "num": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70),
             "str": st.text(max_size=30)}
    kind = {name: "str" if t is str else "int" if t is int else "num"
            for name, t in fields.items()}
    return st.fixed_dictionaries({}, optional={name: typed[kind[name]] | SCALARS
                                               for name in fields})


def heartbeat_inputs() -> st.SearchStrategy[bytes]:
    good = json_bytes({"pid": 7, "host": "h", "pack": "x", "start": 1.0, "beat": 2.0,
                       "epoch": 1, "epochs": 3, "epoch_s": 1.5, "ended": None})
    return (beat_values().map(json_bytes) | VALUES.map(json_bytes)
            | mutated([good]) | st.binary(max_size=200))


def read_heartbeat(path: Path) -> None:
    beat = heartbeat.read(path)  # None or a beat status can judge and format
    if beat is not None:
        heartbeat.stall_after_s(beat)
        heartbeat._by_age(beat, 3.0)
        heartbeat.holder(beat)
    heartbeat.read(path, {"pid": int, "host": str})  # as the lock's holder is read


# --- checkpoints --------------------------------------------------------------------------

CHECKPOINT_LIMIT = 1024**2


def sealed_checkpoint(state: bytes, tensors: bytes) -> bytes:
    """A checkpoint file of this state line and tensor section, its checksum right."""
    body = state + b"\n" + tensors
    return checkpoint.MAGIC + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


@cache
def checkpoint_seeds() -> list[bytes]:
    payload = {"epoch": 2, "rows": [{"loss": 0.5}], "w": torch.ones(3), "by_step": {1: 2.0}}
    whole = checkpoint.encode(payload)
    state, _, tensors = whole.split(b"\n", 2)[2].partition(b"\n")
    return [whole, state, tensors]


def checkpoint_inputs() -> st.SearchStrategy[bytes]:
    whole, state, tensors = checkpoint_seeds()
    # sealed, so that the state line and the tensors are read past the checksum
    return (mutated([whole])
            | st.tuples(VALUES.map(json_bytes) | mutated([state]), st.just(tensors))
              .map(lambda parts: sealed_checkpoint(*parts))
            | mutated([tensors]).map(lambda blob: sealed_checkpoint(state, blob))
            | st.binary(max_size=200))


def read_checkpoint(path: Path) -> None:
    checkpoint.read(path, CHECKPOINT_LIMIT)


# --- configs and pack specs ----------------------------------------------------------------

def yaml_inputs(seed: bytes) -> st.SearchStrategy[bytes]:
    return (mutated([seed]) | VALUES.map(lambda v: yaml.safe_dump(v).encode())
            | VALUES.map(json_bytes) | st.text(max_size=300).map(str.encode))


def config_inputs() -> st.SearchStrategy[bytes]:
    return yaml_inputs(TEST_CONFIG.read_bytes())


def read_config(path: Path) -> None:
    grid.expand_runs(grid.load_config(path))


@cache
def spec_seed() -> bytes:
    pack = next(iter(grid.make_packs(grid.load_config(TEST_CONFIG)).values()))
    return (json.dumps(pack.to_dict(), indent=2) + "\n").encode()


def spec_inputs() -> st.SearchStrategy[bytes]:
    return yaml_inputs(spec_seed())


def read_spec(path: Path) -> None:
    Pack.load(path)


# --- runs archives and record files --------------------------------------------------------

@cache
def archive_seed() -> dict[str, bytes]:
    """The members of a good archive of the test config's fake runs, packed as a staged
    study's (its asked-for runs listed: all of them), so that that member is fuzzed too."""
    with tempfile.TemporaryDirectory() as folder:
        config = grid.load_config(TEST_CONFIG)
        runs = grid.expand_runs(config)
        for run in runs:
            write_fake_run(Path(folder) / "runs", run)
        archive.pack(config, Path(folder) / "runs", Path(folder) / "runs.tar",
                     asked="".join(f"{run.run_id}\n" for run in runs))
        with tarfile.open(Path(folder) / "runs.tar") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def tar_of(members: dict[str, bytes]) -> bytes:
    """A runs archive of these members, the manifest's checksums made right (so each
    member is read past them) unless the manifest is not an object."""
    members = dict(members)
    try:
        manifest = json.loads(members["manifest.json"])
    except (ValueError, KeyError):
        manifest = None
    if isinstance(manifest, dict):
        manifest["sha256"] = {n: archive._sha256(d) for n, d in members.items()
                              if n != "manifest.json"}
        manifest["manifest_sha256"] = archive._manifest_digest(manifest)
        members["manifest.json"] = json.dumps(manifest).encode()
    fh = io.BytesIO()
    archive._write_tar(fh, members)
    return fh.getvalue()


# A Parquet column's type -> its values; a drawn table's columns take one of these types
COLUMN_VALUES = {pa.int64(): st.integers(-(2**63), 2**63 - 1),
                 pa.float64(): st.floats(allow_nan=True, allow_infinity=True),
                 pa.string(): st.text(max_size=20), pa.bool_(): st.booleans()}


@st.composite
def drawn_table(draw: st.DrawFn, seed: bytes) -> bytes:
    """A record table generated from a real member's schema: each column kept (1 in 8
    dropped) as its own type or another one, 0-4 rows of values drawn for that type, of
    the real column's values half the time (so rows still name real runs), nulls among
    them; sealed as initmem seals one."""
    real = pq.read_table(pa.BufferReader(seed))
    rows = draw(st.integers(0, 4))
    columns = {}
    for field in real.schema:
        if draw(st.integers(0, 7)) == 0:
            continue
        kind = (field.type if field.type in COLUMN_VALUES and draw(st.booleans())
                else draw(st.sampled_from(list(COLUMN_VALUES))))
        values = COLUMN_VALUES[kind]
        if kind == field.type and draw(st.booleans()):
            values = st.sampled_from(real.column(field.name).to_pylist())
        columns[field.name] = pa.array(
            draw(st.lists(st.none() | values, min_size=rows, max_size=rows)), type=kind)
    return archive._parquet_bytes(pa.table(columns))


@st.composite
def archive_members(draw: st.DrawFn) -> dict[str, bytes]:
    """A good archive's members with one or two of them replaced: mutated bytes, a
    manifest whose fields are drawn, or a record table generated from its schema."""
    members = dict(archive_seed())
    for name in draw(st.lists(st.sampled_from(sorted(members)), min_size=1, max_size=2,
                              unique=True)):
        if name == "manifest.json" and draw(st.booleans()):
            manifest = json.loads(members[name])
            key = draw(st.sampled_from(sorted(manifest)))
            manifest[key] = draw(VALUES)
            members[name] = json_bytes(manifest)
        elif name.endswith(".parquet") and draw(st.booleans()):
            members[name] = draw(drawn_table(members[name]))
        else:
            members[name] = draw(mutated([members[name]]))
    return members


def archive_inputs() -> st.SearchStrategy[bytes]:
    seed = tar_of(archive_seed())
    return archive_members().map(tar_of) | mutated([seed]) | st.binary(max_size=600)


def read_whole_archive(path: Path) -> None:
    summaries, histories = archive.read_archive(path)
    summaries.to_pandas(), histories.to_pandas()
    environment.describe(archive.read_environment(path))
    archive.read_manifest(path)
    archive.archive_runs(grid.load_config(TEST_CONFIG), path)


def record_inputs(name: str) -> st.SearchStrategy[bytes]:
    seed = archive_seed()[name]
    one_run = _one_row(pq.read_table(pa.BufferReader(seed)), name)
    return mutated([seed, one_run]) | drawn_table(one_run)


def _one_row(table: pa.Table, name: str) -> bytes:
    """The first run's rows of a member, sealed as a run folder's record file."""
    rows = table.filter(pa.compute.equal(table.column("run_id"), table.column("run_id")[0]))
    return archive._parquet_bytes(rows.replace_schema_metadata(None))


@cache
def run_folder_files() -> dict[str, bytes]:
    return {name: _one_row(pq.read_table(pa.BufferReader(archive_seed()[name])), name)
            for name in ("summary.parquet", "history.parquet")}


def read_run_folder(path: Path) -> None:
    """`path` is a run's summary.parquet or history.parquet beside the other, good one."""
    for name, data in run_folder_files().items():
        if not (path.parent / name).exists():
            (path.parent / name).write_bytes(data)
    read_records(path.parent)


@dataclass(frozen=True)
class Reader:
    """A reader of one kind of file: its inputs, the file name it reads, how it reads."""

    inputs: Callable[[], st.SearchStrategy[bytes]]
    name: str
    read: Callable[[Path], None]


READERS = {
    "archive": Reader(archive_inputs, "runs.tar", read_whole_archive),
    "summary": Reader(lambda: record_inputs("summary.parquet"), "summary.parquet",
                      read_run_folder),
    "history": Reader(lambda: record_inputs("history.parquet"), "history.parquet",
                      read_run_folder),
    "heartbeat": Reader(heartbeat_inputs, f"x{heartbeat.SUFFIX}", read_heartbeat),
    "checkpoint": Reader(checkpoint_inputs, checkpoint.LATEST, read_checkpoint),
    "config": Reader(config_inputs, "config.yaml", read_config),
    "spec": Reader(spec_inputs, "pack.json", read_spec),
}


def check(reader: Reader, data: bytes) -> Outcome:
    """The outcome of `reader` reading `data` from a fresh folder (in a child)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / reader.name
        path.write_bytes(data)
        return in_child(reader.read, path)
