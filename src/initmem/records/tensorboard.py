"""TensorBoard event files of the runs' per-epoch histories: live while a pack trains
(`initmem train --tensorboard DIR`), or from finished records or an archive
(`initmem tensorboard RECORDS|ARCHIVE OUT`).

One TensorBoard run per run, in OUT/<run folder> (family/recipe/b/sigma_w-seed, as the
records), with every history column as a scalar at step = epoch, and the run's spec as
its HParams (filter and compare by sigma_w, optimizer, b...). Scalars are float32, the
records' float64 values rounded: TensorBoard's default (fast) loader shows no float64
scalars (measured with tensorboard 2.21: float64 runs listed, no tags). The event files
are derived: nothing in the pipeline reads them back; the records stay the source of
truth. A resumed pack appends a new event file and may log again the epoch it was
killed in (bitwise the same values).

Written with tensorboard's protos and record writer, not its `SummaryWriter`, which
imports TensorFlow when installed (seconds, in every training process).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from initmem.errors import InputError
from initmem.plan.spec import Pack, Recipe
from initmem.records.archive import read_archive
from initmem.records.files import (
    HISTORY_COLUMNS,
    read_records,
    record_folder,
    summary_columns,
    typed,
)

SCALARS = [c for c in HISTORY_COLUMNS if c not in ("run_id", "epoch")]
# A run's spec as its summary holds it (spec.Run.as_row), less run_id: the HParams.
SPEC_FIELDS = [*(f.name for f in dataclasses.fields(Recipe)), "sigma_w", "seed"]


def _tensorboard():
    """tensorboard's modules, or a one-line error naming the extra to install."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.hparams import summary_v2 as hparams_summary
        from tensorboard.plugins.scalar import summary_v2 as scalar_summary
        from tensorboard.summary.writer.record_writer import RecordWriter
    except ImportError:
        raise InputError("TensorBoard output needs the optional tensorboard package: "
                         "pip install -e '.[tensorboard]'") from None
    return event_pb2, summary_pb2, hparams_summary, scalar_summary, RecordWriter


def hparams(spec: dict[str, Any]) -> dict[str, bool | float | str]:
    """A run's spec fields as TensorBoard takes them: no nulls (a summary's are NA or NaN),
    numpy numbers as Python's."""
    out = {}
    for name in SPEC_FIELDS:
        value = spec.get(name)  # an older record lacks a later field
        if value is not None and not pd.isna(value):
            out[name] = value.item() if isinstance(value, np.generic) else value
    return out


class RunWriter:
    """The event file of one run in `folder` (its run_dir under the log folder): its
    HParams first, then its epochs as they come."""

    def __init__(self, folder: Path, spec: dict[str, Any]):
        """A new event file in `folder`, beginning with the run's `spec` as its HParams."""
        (self.event_pb2, self.summary_pb2, hparams_summary, self.scalar_summary,
         record_writer) = _tensorboard()
        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}"
        self.file = open(folder / name, "ab")  # noqa: SIM115 (closed by close())
        self.writer = record_writer(self.file)
        self._write(self.event_pb2.Event(file_version="brain.Event:2"))
        self._write(self.event_pb2.Event(summary=hparams_summary.hparams_pb(hparams(spec))))

    def epoch(self, row: dict[str, Any]) -> None:
        """Log one history row's scalars at step = its epoch, flushed at once."""
        summary = self.summary_pb2.Summary()
        for tag in SCALARS:
            summary.value.extend(self.scalar_summary.scalar_pb(tag, row[tag]).value)
        self._write(self.event_pb2.Event(step=int(row["epoch"]), summary=summary))
        self.file.flush()  # live: TensorBoard sees the epoch now

    def _write(self, event: Any) -> None:
        event.wall_time = time.time()
        self.writer.write(event.SerializeToString())

    def close(self) -> None:
        """Close the event file."""
        self.file.close()


class LiveWriter:
    """A trainer's observer (training.trainer.Observer): each run's epochs as they end."""

    def __init__(self, out: Path, pack: Pack):
        """One RunWriter per run of `pack`, in its run folder under `out`."""
        self.writers = {run.run_id: RunWriter(out / run.run_dir, run.as_row())
                        for run in pack.runs}

    def updated(self, epoch: int, k: int) -> None:
        """Nothing: TensorBoard gets whole epochs only."""
        pass

    def epoch_ended(self, epoch: int, rows: list[dict[str, Any]]) -> None:
        """Log each run's row of the epoch that ended."""
        for row in rows:
            self.writers[row["run_id"]].epoch(row)

    def close(self) -> None:
        """Close every run's event file."""
        for writer in self.writers.values():
            writer.close()


def read_source(source: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(summaries, histories) of a records folder or an archive, and the file (or archive
    member) of each summary."""
    if source.is_file():
        summaries, histories = read_archive(source)
        return (typed(summaries.to_pandas(), summary_columns()), histories.to_pandas(),
                [f"{source}:summary.parquet"] * summaries.num_rows)
    paths = sorted(source.rglob("summary.parquet"))
    pairs = [read_records(path.parent) for path in paths]
    if not pairs:
        raise InputError(f"{source}: no run records (summary.parquet) under it; give a "
                         "records folder (results/runs) or a runs archive")
    return (pd.concat([s for _, s in pairs], ignore_index=True),
            pd.concat([h for h, _ in pairs], ignore_index=True), [str(p) for p in paths])


def write_records(source: Path, out: Path) -> int:
    """Every run of the records or archive as a TensorBoard run; how many. Every run's
    folder is checked first (records.files.record_folder), so a bad one stops the
    command before anything is written."""
    summaries, histories, files = read_source(source)
    specs = summaries.to_dict("records")
    folders = [record_folder(out, spec, where) for spec, where in zip(specs, files, strict=True)]
    by_run = dict(tuple(histories.groupby("run_id", sort=False)))
    for folder, spec in zip(folders, specs, strict=True):
        writer = RunWriter(folder, spec)
        history = by_run.get(spec["run_id"])  # none: diverged in its first epoch
        for row in [] if history is None else history.to_dict("records"):
            writer.epoch(row)
        writer.close()
    return len(summaries)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem tensorboard`."""
    parser.add_argument("source", type=Path,
                        help="run records (results/runs) or a runs archive (.tar)")
    parser.add_argument("out", type=Path, help="TensorBoard log folder (tensorboard --logdir)")


def main(args: argparse.Namespace) -> int:
    """`initmem tensorboard`: write the event files of run records or an archive."""
    n = write_records(args.source, args.out)
    print(f"{n} runs written to {args.out}: tensorboard --logdir {args.out}")
    return 0
