"""The raw-runs archive: every run record of a config in one file, and back.

Format: an uncompressed tar of three members,
    manifest.json     format, schema_version, run counts, the experiment config
    summary.parquet   every run's summary row, exactly the rows of its summary.parquet
    history.parquet   every run's history rows, exactly the rows of its history.parquet
Why not a tar.gz of the 16,650 per-run files: one Parquet file per table compresses the
columns across runs (zstd), so the archive is a fraction of the size, and reading it is
two reads instead of 16,650 file opens, so tables and figures rebuild from it in seconds.
Nothing is lost: `unpack` writes the per-run record files back.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from . import __version__
from .aggregate import read_folder_records
from .grid import expand_runs, experiment_config, load_config
from .records import SCHEMA_VERSION, RecordError, write_records

FORMAT = "initmem-runs-archive"


def pack(config: dict[str, Any], records_root: str | Path, out: str | Path) -> dict[str, Any]:
    """Write the archive of the config's runs that have records; returns its manifest."""
    runs = expand_runs(config)
    summaries, histories = read_folder_records(records_root, runs)
    manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION,
                "initmem_version": __version__, "runs": summaries.num_rows,
                "expected_runs": len(runs), "config": experiment_config(config)}
    members = {"manifest.json": json.dumps(manifest, indent=2).encode(),
               "summary.parquet": _parquet_bytes(summaries),
               "history.parquet": _parquet_bytes(histories)}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w") as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the archive from its readers
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return manifest


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def read_archive(path: str | Path) -> tuple[pa.Table, pa.Table]:
    """(summaries, histories) of an archive; RecordError names what is wrong with it."""
    return tuple(pq.read_table(pa.BufferReader(data))
                 for data in _read(path, "summary.parquet", "history.parquet")[1:])


def read_manifest(path: str | Path) -> dict[str, Any]:
    return _read(path)[0]


def _read(path: str | Path, *names: str) -> tuple[Any, ...]:
    """The checked manifest, then the bytes of the named members."""
    try:
        with tarfile.open(path, mode="r:") as tar:
            manifest = json.loads(_member(tar, path, "manifest.json"))
            if manifest.get("format") != FORMAT:
                raise RecordError(f"{path}: not a runs archive (format "
                                  f"{manifest.get('format')!r}, expected {FORMAT!r})")
            if manifest.get("schema_version") != SCHEMA_VERSION:
                raise RecordError(f"{path}: records of schema_version "
                                  f"{manifest.get('schema_version')}; this initmem reads "
                                  f"{SCHEMA_VERSION}")
            return manifest, *(_member(tar, path, name) for name in names)
    except (tarfile.TarError, OSError, json.JSONDecodeError, pa.ArrowInvalid) as err:
        raise RecordError(f"{path}: unreadable runs archive ({err})") from None


def _member(tar: tarfile.TarFile, path: str | Path, name: str) -> bytes:
    try:
        return tar.extractfile(name).read()
    except KeyError:
        raise RecordError(f"{path}: runs archive lacks {name}") from None


def unpack(path: str | Path, out_root: str | Path) -> int:
    """Write every archived run's record files under out_root/<run_dir>/; returns the count."""
    summaries, histories = (t.to_pandas() for t in read_archive(path))
    by_run = dict(tuple(histories.groupby("run_id", sort=False)))
    for summary in summaries.to_dict("records"):
        run_id = summary["run_id"]
        history = by_run.get(run_id, pd.DataFrame(columns=histories.columns))
        write_records(Path(out_root) / run_id.replace(":", "/"), history, summary)
    return len(summaries)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    make = sub.add_parser("pack", help="archive the records of a config's runs")
    make.add_argument("--config", type=Path, required=True)
    make.add_argument("--records", type=Path, required=True, help="run folders root")
    make.add_argument("--out", type=Path, required=True, help="archive file to write")
    back = sub.add_parser("unpack", help="write an archive's runs back as record files")
    back.add_argument("archive", type=Path)
    back.add_argument("--out", type=Path, required=True, help="run folders root")
    show = sub.add_parser("config", help="print the experiment config an archive was made "
                          "from (YAML, usable as --configfile)")
    show.add_argument("archive", type=Path)


def run(args: argparse.Namespace) -> int:
    if args.action == "pack":
        manifest = pack(load_config(args.config), args.records, args.out)
        print(f"{args.out}: {manifest['runs']} of {manifest['expected_runs']} expected runs")
    elif args.action == "unpack":
        print(f"{unpack(args.archive, args.out)} runs written under {args.out}")
    else:
        print(yaml.safe_dump(read_manifest(args.archive)["config"], sort_keys=False), end="")
    return 0
