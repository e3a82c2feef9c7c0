"""The raw-runs archive: every run record of a config in one file, and back.

Format: an uncompressed tar of four members,
    manifest.json     format, schema_version, run counts, the experiment config, the
                      SHA-256 of each other member's bytes, and `manifest_sha256`: the
                      SHA-256 of the manifest's canonical JSON without that field
    summary.parquet   every run's summary row, exactly the rows of its summary.parquet
    history.parquet   every run's history rows, exactly the rows of its history.parquet
    environment.json  the environment it was packed in: every installed package and its
                      version, Python, platform (records.environment); archives packed
                      before it have the other three
Each Parquet member is also sealed with its content digest (initmem.records), so a
damaged byte of the archive is an error naming it. Checksums catch damage, not editing
(anyone can seal an edited archive again), so every read also checks each value's range
(records.files.Range), and unpack makes each run's folder from its spec, inside the
output folder (records.files.record_folder): an archive is data (docs/records.md, What
is trusted).
Why not a tar.gz of the 16,650 per-run files: one Parquet file per table compresses the
columns across runs (zstd), so the archive is a fraction of the size, and reading it is
two reads instead of 16,650 file opens, so tables and figures rebuild from it in seconds.
Nothing is lost: `unpack` writes the per-run record files back.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from initmem import __version__, untrusted
from initmem.errors import InputError
from initmem.plan.grid import archived, asked_runs, expand_runs, experiment_config, load_config
from initmem.plan.inputs import parse_json
from initmem.plan.spec import Run
from initmem.records import environment
from initmem.records.files import (
    HISTORY_COLUMNS,
    HISTORY_RANGES,
    OUTCOME_RANGES,
    SCHEMA_VERSION,
    RecordError,
    Where,
    atomic_write_bytes,
    check_declared_size,
    check_schema_version,
    checked,
    history_rows,
    read_folder_records,
    record_folder,
    sealed,
    summary_columns,
    typed,
    upgraded,
    verified,
    write_records,
)

FORMAT = "initmem-runs-archive"
# Compressed bytes a record row takes at the least: results/laptop/v2/runs.tar's history
# takes 29 a row, its summary 676 (each row's numbers differ); a member's size bounds its
# rows by this before they are read, so a small archive cannot declare millions.
MIN_ROW_BYTES = 8


def pack(config: dict[str, Any], records_root: str | Path, out: str | Path,
         asked: str | None = None) -> dict[str, Any]:
    """Write the archive of the config's runs that have records; returns its manifest.
    asked: a staged study's asked-for run ids (grid.asked_runs), its only expected runs,
    kept in the archive (member ASKED) so that its readers expect those alone."""
    runs = expand_runs(config)
    if asked is not None:
        runs = asked_runs(runs, asked, "--expected")
    summaries, histories = read_folder_records(records_root, runs)
    tables = {"summary.parquet": _parquet_bytes(summaries),
              "history.parquet": _parquet_bytes(histories),
              environment.MEMBER: json.dumps(environment.current(), indent=1).encode()}
    if asked is not None:
        tables[ASKED] = "".join(f"{run.run_id}\n" for run in runs).encode()
    manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION,
                "initmem_version": __version__, "runs": summaries.num_rows,
                "expected_runs": len(runs), "config": experiment_config(config),
                "sha256": {name: _sha256(data) for name, data in tables.items()}}
    manifest["manifest_sha256"] = _manifest_digest(manifest)
    members = {"manifest.json": json.dumps(manifest, indent=2).encode(), **tables}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, lambda fh: _write_tar(fh, members))
    return manifest


def _write_tar(fh: Any, members: dict[str, bytes]) -> None:
    with tarfile.open(fileobj=fh, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(sealed(table), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_digest(manifest: dict[str, Any]) -> str:
    rest = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return _sha256(json.dumps(rest, sort_keys=True).encode())


def read_archive(path: str | Path) -> tuple[pa.Table, pa.Table]:
    """(summaries, histories) of an archive, an older schema's with the later columns
    (upgraded); RecordError names what is wrong with it: a damaged member, or
    the first value out of its column's type or range (files.checked)."""
    members = {"summary.parquet": (summary_columns(), OUTCOME_RANGES),
               "history.parquet": (HISTORY_COLUMNS, HISTORY_RANGES)}
    manifest, *blobs = _read(path, *members)
    tables: list[pa.Table] = []
    for (name, (columns, ranges)), data in zip(members.items(), blobs, strict=True):
        if _sha256(data) != manifest["sha256"].get(name):
            raise RecordError(f"{path}: member {name} is damaged (its bytes do not match "
                              "the manifest's checksum); restore the archive from a good copy")
        # rows bounded before reading by the member's bytes (the manifest's count is the
        # archive's word, not a bound), the history's also by the summaries' epochs
        max_rows, whose = len(data) // MIN_ROW_BYTES, f"{MIN_ROW_BYTES} bytes a row"
        if tables and history_rows(tables[0]) < max_rows:
            max_rows, whose = history_rows(tables[0]), "the summaries' epochs"
        table = verified(_parquet(data, f"{path}:{name}", max_rows, whose), f"{path}:{name}")
        checked(table, columns, ranges, _row_of(f"{path}:{name}", table))
        if not tables:  # the summaries, whose epochs bound the history's rows
            _check_unique(table, f"{path}:{name}")
        tables.append(upgraded(table, columns))
    return tables[0], tables[1]


def _parquet(data: bytes, where: str, max_rows: int, whose: str) -> pa.Table:
    """A Parquet member's table, its declared size checked first; RecordError when it
    does not read (a member sealed again after editing gets past its checksum)."""
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        check_declared_size(parquet.metadata, where, max_rows, whose)
        return parquet.read()
    except RecordError:
        raise
    except (pa.ArrowException, OSError, ValueError) as err:
        raise RecordError(f"{where}: unreadable ({' '.join(str(err).split())}); restore the "
                          "archive from a good copy") from None


def _check_unique(summaries: pa.Table, where: str) -> None:
    """RecordError naming a run id that two summary rows share (one run, one row)."""
    if "run_id" not in summaries.column_names:
        return
    counts = pc.value_counts(summaries.column("run_id")).to_pylist()
    twice = next((c for c in counts if c["counts"] > 1), None)
    if twice is not None:
        raise RecordError(f"{where}: run {twice['values']} has {twice['counts']} summary rows; "
                          "an archive holds one per run")


def _row_of(member: str, table: pa.Table) -> Where:
    """Where a row of an archive member is: the member and the row's run (the member
    alone when it has no such row: a column missing from an empty table)."""
    if "run_id" not in table.column_names:
        return member
    run_ids = table.column("run_id")
    return lambda row: f"{member} (run {run_ids[row].as_py()})" if row < len(run_ids) else member


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The archive's manifest, checked (format, schema version, its own checksum)."""
    return _read(path)[0]


def read_environment(path: str | Path) -> dict[str, Any] | None:
    """The environment the archive was packed in (records.environment), checked; None
    for an archive packed before initmem recorded it (its manifest lists no such member)."""
    sums = read_manifest(path)["sha256"]
    if environment.MEMBER not in sums:
        return None
    data = _read(path, environment.MEMBER)[1]
    where = f"{path}:{environment.MEMBER}"
    if _sha256(data) != sums[environment.MEMBER]:
        raise RecordError(f"{where} is damaged (its bytes do not match the manifest's "
                          "checksum); restore the archive from a good copy")
    return environment.checked(parse_json(data, where, environment.MAX_BYTES), where)


def read_asked(path: str | Path) -> str | None:
    """A staged study's asked-for run ids (pack's `asked`), checked; None for an archive
    of a fixed study, which expects every run of its config."""
    sums = read_manifest(path)["sha256"]
    if ASKED not in sums:
        return None
    data = _read(path, ASKED)[1]
    if _sha256(data) != sums[ASKED]:
        raise RecordError(f"{path}:{ASKED} is damaged (its bytes do not match the "
                          "manifest's checksum); restore the archive from a good copy")
    return _run_ids_text(data, f"{path}:{ASKED}")


def read_listed(path: str | Path) -> str:
    """The asked-for run ids the workflow wrote (results/looks/runs.txt): a regular file
    of ASCII text (a link, a FIFO or a larger file is refused, not followed)."""
    data = untrusted.read_bytes(path, MAX_BYTES[ASKED], "a list of run ids", RecordError)
    return _run_ids_text(data, str(path))


def _run_ids_text(data: bytes, where: str) -> str:
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise RecordError(f"{where}: not a list of run ids (not ASCII text)") from None


def archive_runs(config: dict[str, Any], path: str | Path) -> list[Run]:
    """The runs an archive is expected to hold for `config`: every run of the config, or
    of a staged study's archive the runs its looks asked for."""
    runs, asked = expand_runs(config), read_asked(path)
    return runs if asked is None else asked_runs(runs, asked, f"{path}:{ASKED}", strict=False)


def _read(path: str | Path, *names: str) -> tuple[Any, ...]:
    """The checked manifest, then the bytes of the named members."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            manifest = parse_json(_member(tar, path, "manifest.json", f"{path}: not a runs "
                                          "archive (it has no manifest.json)"),
                                  f"{path}:manifest.json", MAX_BYTES["manifest.json"])
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                found = manifest.get("format") if isinstance(manifest, dict) else None
                raise RecordError(f"{path}: not a runs archive (format {found!r}, expected "
                                  f"{FORMAT!r})")
            check_schema_version(manifest.get("schema_version"), path)
            if manifest.get("manifest_sha256") != _manifest_digest(manifest):
                raise RecordError(f"{path}: manifest.json is damaged (it does not match its "
                                  "checksum); restore the archive from a good copy")
            if not isinstance(manifest.get("sha256"), dict):
                raise RecordError(f"{path}: manifest.json's sha256 is not an object of "
                                  "member checksums")
            # tar reads a damaged header after the first as the archive's end: a member
            # it does not find behind a good manifest is damage more likely than absence
            return manifest, *(_member(tar, path, name, f"{path}: damaged or incomplete runs "
                                       f"archive: member {name} cannot be read (a damaged tar "
                                       "header hides the members after it); restore the "
                                       "archive from a good copy")
                               for name in names)
    except RecordError:
        raise
    except InputError as err:  # parse_json's
        raise RecordError(str(err)) from None
    except (tarfile.TarError, OSError, UnicodeDecodeError, pa.ArrowInvalid) as err:
        raise RecordError(f"{path}: unreadable runs archive ({err})") from None


# Members whose size is bounded before reading: the Parquet ones only by the archive's
# own size (their rows are bounded before they are parsed), the JSON ones far tighter
ASKED = "asked_runs.txt"  # a staged study's expected runs (pack's `asked`)
MAX_BYTES = {"manifest.json": 1024 * 1024, environment.MEMBER: environment.MAX_BYTES,
             ASKED: 64 * 1024 * 1024}


def _member(tar: tarfile.TarFile, path: str | Path, name: str, missing: str) -> bytes:
    """The bytes of a member; RecordError(missing) when tar does not find it, and one
    naming what it is when it is no regular file (a link would point tar elsewhere, a
    sparse one expand its holes), larger than MAX_BYTES allows, or larger than what the
    archive holds behind its header (tar would read to the end first)."""
    try:
        member = tar.getmember(name)
    except KeyError:
        raise RecordError(missing) from None
    if not member.isfile() or member.issparse():
        kind = ("a symbolic link" if member.issym() else "a hard link" if member.islnk()
                else "a folder" if member.isdir() else "a sparse file" if member.issparse()
                else "a device or FIFO")
        raise RecordError(f"{path}: member {name} is {kind}; archives hold regular files "
                          "only")
    held = os.fstat(tar.fileobj.fileno()).st_size - member.offset_data
    max_bytes = min(held, MAX_BYTES.get(name, held))
    if member.size > max_bytes:
        raise RecordError(f"{path}: member {name} declares {member.size} bytes, at most "
                          f"{max_bytes} allowed (the archive holds {held} behind its "
                          "header); refused before reading")
    return tar.extractfile(member).read()


def unpack(path: str | Path, out_root: str | Path) -> int:
    """Write every archived run's record files under out_root/<run_dir>/; returns the count.
    Every run's folder is checked first (files.record_folder: the run id its spec makes,
    inside out_root), so a bad one stops the command before anything is written."""
    summaries, histories = (t.to_pandas() for t in read_archive(path))
    rows = typed(summaries, summary_columns()).to_dict("records")
    folders = [record_folder(out_root, row, f"{path}:summary.parquet") for row in rows]
    by_run = dict(tuple(histories.groupby("run_id", sort=False)))
    for folder, summary in zip(folders, rows, strict=True):
        history = by_run.get(summary["run_id"], pd.DataFrame(columns=histories.columns))
        write_records(folder, history, summary)
    return len(rows)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem archive` (pack, unpack, config)."""
    sub = parser.add_subparsers(dest="action", required=True)
    make = sub.add_parser("pack", help="archive the records of a config's runs")
    make.add_argument("--config", type=Path, required=True)
    make.add_argument("--records", type=Path, required=True, help="run folders root")
    make.add_argument("--out", type=Path, required=True, help="archive file to write")
    make.add_argument("--expected", type=Path,
                      help="a staged study's asked-for run ids (results/looks/runs.txt)"
                           ": its only expected runs")
    back = sub.add_parser("unpack", help="write an archive's runs back as record files")
    back.add_argument("archive", type=Path)
    back.add_argument("--out", type=Path, required=True, help="run folders root")
    show = sub.add_parser("config", help="print the experiment config an archive was made "
                          "from (YAML, usable as --configfile)")
    show.add_argument("archive", type=Path)
    show.add_argument("--out", type=Path,
                      help="write it to this file (only once it is read: a bad archive "
                           "leaves no empty file, as a shell redirect would)")


def main(args: argparse.Namespace) -> int:
    """`initmem archive`: pack a config's records, unpack them, or print its config."""
    if args.action == "pack":
        manifest = pack(load_config(args.config), args.records, args.out,
                        None if args.expected is None else read_listed(args.expected))
        print(f"{args.out}: {manifest['runs']} of {manifest['expected_runs']} expected runs")
    elif args.action == "unpack":
        print(f"{unpack(args.archive, args.out)} runs written under {args.out}")
    else:
        text = yaml.safe_dump(archived(read_manifest(args.archive)["config"]),
                              sort_keys=False)
        if args.out is None:
            print(text, end="")
        else:  # atomically: a second `make report ARCHIVE=` never leaves half a config
            atomic_write_bytes(args.out, lambda fh: fh.write(text.encode()))
    return 0
