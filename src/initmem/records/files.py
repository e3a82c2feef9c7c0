"""Run records: one tidy per-epoch history and one summary row per run, as Parquet.

Schema (version 5; bump SCHEMA_VERSION on any change of names, meaning or dtype):

history.parquet, one row per run and epoch (epoch = 1, 2, ...; as Keras logs them):
    run_id, epoch,
    train_loss, train_acc      running mean over the epoch's minibatches, training mode
    val_loss, val_acc,         inference mode (BatchNorm moving statistics)
    test_loss, test_acc
    kernel_fro_norm            ||W||_F over conv and dense kernels, end of epoch
    bn_var_ratio               end of epoch, over the BatchNorm layers: mean moving variance
                               / mean variance of the epoch's last training batch (means
                               over channels), the layer's ratio farthest from 1 in log
                               terms; near 1 the moving statistics have converged, so
                               inference-mode accuracy is meaningful. NaN without BatchNorm
    lr                         rate of the epoch's last update
    T_SGD, T_L2, T_adapt       clocks (1/b) sum eta_k^2, lambda sum eta_k, sum eta_k,
                               cumulative to the end of the epoch (lambda = Recipe.shrinkage)
  Accuracies are fractions in [0, 1]. Losses are Keras' logged losses: mean
  cross-entropy plus the kernel L2 penalty where the recipe has one.

summary.parquet, one row per run: every spec field (see spec.Run.as_row), then
    status                     completed | early_stopped | diverged
    epochs_run, tau_best, tau_interp (null: never reached train acc >= 0.995)
    test_acc_best, val_acc_best, train_acc_best, val_loss_best   (at tau_best; where the
                               recipe sets best_test_subset, test_acc_best is the weights
                               at tau_best tested once on that many test images, not the
                               history's test_acc of that epoch)
    val_acc_interp (null without tau_interp), val_acc_last, test_acc_last, train_acc_last
    repair_gap = val_acc_best - val_acc_interp (null without tau_interp)
    kernel_fro_norm_init, kernel_fro_norm_best, kernel_fro_norm_last
    bn_var_ratio_best          bn_var_ratio at tau_best
    T_SGD, T_L2, T_adapt       final clocks
    diverged, diverged_epoch (null unless diverged)
    wall_time_s, device, determinism (the kernel settings in force; how the step ran:
                               eager or CUDA graph, memory layout),
    host                       the host whose trainer finished the run
    slurm_job_id               that trainer's SLURM job (null outside SLURM)
    resumed_from_epoch         the epoch at which that trainer resumed the run's pack from
                               a checkpoint (epochs + 1: from its final one, only writing
                               the records); null when one process trained it from the
                               start
    torch_version, python_version, initmem_version
    code_version               `git describe --always --dirty` of the checkout that
                               wrote the record ("unknown" outside a git checkout)
    data_verification          how the training data was verified: md5 (the official
                               release), manifest (the offline copy, by the SHA-256 sums
                               its builder wrote), unverified (allowed by
                               allow_unverified), synthetic; null in records older than
                               the column and in generated ones (as host, slurm_job_id
                               and resumed_from_epoch, new in schema 4)
    record_source              trained | generated (synthetic records, never results)
    schema_version

Schema 2 records (before bn_var_ratio), 3 (before host, slurm_job_id and
resumed_from_epoch) and 4 (before the optimizer's momentum and decays joined its
hyperparameters) still read (`upgraded`): a column of LATER_COLUMNS that a record lacks
reads as NaN, not measured, or null, not recorded (as a recipe field of spec.LATER_FIELDS
reads as its default), and the former recipe fields momentum, weight_decay and
muon_adam_weight_decay read as the hyperparameters they are now (spec.FORMER_FIELDS; the
run ids they named stay the same).

Every file carries, in its Parquet key-value metadata under `initmem.sha256`, the SHA-256
of its content (column names, nulls and values; `content_digest`), and every read checks
it: Parquet's own structure catches most damage but not a flipped byte inside a value.
A checksum catches damage, not editing (whoever edits a record can seal it again), so
every read also checks each number against its column's Range (HISTORY_RANGES,
OUTCOME_RANGES, beside the columns) and names the first out of range or of another type.
Files are written atomically (temporary file, fsync, rename), history first: a run is
complete exactly when its summary.parquet exists and reads back, checksum intact, with
this schema. Before a file's data is read, its metadata must declare no more rows than
expected (a summary: one per run; a history: the summaries' epochs) of ROW_BYTES each:
a few megabytes of Parquet can declare hundreds of millions of rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from initmem import __version__
from initmem.errors import InputError, naming
from initmem.plan.schema import schema
from initmem.plan.spec import (
    FORMER_FIELDS,
    LATER_FIELDS,
    Recipe,
    Run,
    spec_columns,
    upgraded_hyperparameters,
)
from initmem.untrusted import inside, read_bytes
from initmem.vocabulary import COMPLETED, DIVERGED, EARLY_STOPPED, INTERP_THRESHOLD, TRAINED

SCHEMA_VERSION = 5
OLDEST_SCHEMA_VERSION = 2  # the oldest that reads: it lacks LATER_COLUMNS only
DIGEST_KEY = b"initmem.sha256"
# Uncompressed bytes a record row may take in a Parquet file: a summary row of
# results/laptop/v2/runs.tar takes 276 (15,169 for 55 rows), its strings the most.
ROW_BYTES = 16 * 1024
FILE_BYTES = 1024 * 1024  # a record file's bytes besides its rows' (schema, metadata)

HISTORY_COLUMNS: dict[str, str] = {
    "run_id": "string", "epoch": "int64",
    "train_loss": "float64", "train_acc": "float64",
    "val_loss": "float64", "val_acc": "float64",
    "test_loss": "float64", "test_acc": "float64",
    "kernel_fro_norm": "float64", "bn_var_ratio": "float64", "lr": "float64",
    "T_SGD": "float64", "T_L2": "float64", "T_adapt": "float64",
}

OUTCOME_COLUMNS: dict[str, str] = {
    "status": "string", "epochs_run": "int64", "tau_best": "Int64", "tau_interp": "Int64",
    "test_acc_best": "float64", "val_acc_best": "float64", "train_acc_best": "float64",
    "val_loss_best": "float64", "val_acc_interp": "float64", "val_acc_last": "float64",
    "test_acc_last": "float64", "train_acc_last": "float64", "repair_gap": "float64",
    "kernel_fro_norm_init": "float64", "kernel_fro_norm_best": "float64",
    "kernel_fro_norm_last": "float64", "bn_var_ratio_best": "float64",
    "T_SGD": "float64", "T_L2": "float64", "T_adapt": "float64",
    "diverged": "bool", "diverged_epoch": "Int64",
    "wall_time_s": "float64", "device": "string", "determinism": "string",
    "host": "string", "slurm_job_id": "string", "resumed_from_epoch": "Int64",
    "torch_version": "string",
    "python_version": "string", "initmem_version": "string", "code_version": "string",
    "data_verification": "string", "record_source": "string", "schema_version": "int64",
}
# Columns newer than some records, with what such a record reads there: NaN for a
# measurement schema 2 did not make, null for a data check it did not record and for the
# provenance schema 3 did not record.
LATER_COLUMNS = {"bn_var_ratio": math.nan, "bn_var_ratio_best": math.nan,
                 "data_verification": None, "host": None, "slurm_job_id": None,
                 "resumed_from_epoch": None}
# Which process made a record, where, when and from which code: what two trainings of
# the same run with the same numbers differ in (tests and bench compare records without).
PROVENANCE_COLUMNS = ("wall_time_s", "host", "slurm_job_id", "resumed_from_epoch",
                      "code_version")


@dataclass(frozen=True)
class Range:
    """The values a numeric record column allows: low <= value <= high, finite, where
    `high` may name the column bounding it; `null` says whether NaN or null is allowed:
    never (False), always (True), or only where the named column is null (an outcome at
    an epoch the run never logged: a run that diverged in its first epoch has no
    tau_best, so nothing at tau_best)."""

    low: float
    high: float | str = math.inf
    null: bool | str = False
    infinite: bool = False  # +inf allowed: a measurement that overflowed or divided by 0
    beyond: int = 0  # added to the column `high` names

    def allowed(self) -> str:
        """The range in words, as an error message says what a column allows."""
        finite = "a number" if self.infinite else "a finite number"
        high = self.high if isinstance(self.high, str) else f"{self.high:g}"
        high += f" + {self.beyond}" if self.beyond else ""
        text = (f"{finite} >= {self.low:g}" if self.high == math.inf
                else f"{finite} in [{self.low:g}, {high}]")
        if isinstance(self.null, str):
            return f"{text}, or NaN where {self.null} is null"
        return f"{text}, or NaN" if self.null else text


ACCURACY, MEASURE = Range(0, 1), Range(0)
# ||W||_F is summed in float32: +inf where it overflowed (a diverging run's huge sigma_w)
NORM = Range(0, infinite=True)
AT_BEST = {"null": "tau_best"}  # outcomes at tau_best or the last epoch: none without one
# bn_var_ratio: NaN without BatchNorm (and before schema 3); +inf where a layer's batch
# variance was 0 (its inputs all zero): a measurement, not damage.
BN_RATIO = Range(0, null=True, infinite=True)
HISTORY_RANGES: dict[str, Range] = {
    "epoch": Range(1),
    **dict.fromkeys(("train_loss", "val_loss", "test_loss"), MEASURE),
    **dict.fromkeys(("train_acc", "val_acc", "test_acc"), ACCURACY),
    "kernel_fro_norm": NORM, "bn_var_ratio": BN_RATIO, "lr": MEASURE,
    **dict.fromkeys(("T_SGD", "T_L2", "T_adapt"), MEASURE),
}
OUTCOME_RANGES: dict[str, Range] = {
    "epochs_run": Range(0),
    "tau_best": Range(1, "epochs_run", null=True),
    "tau_interp": Range(1, "epochs_run", null=True),
    **dict.fromkeys(("test_acc_best", "val_acc_best", "train_acc_best", "val_acc_last",
                     "test_acc_last", "train_acc_last"), Range(0, 1, **AT_BEST)),
    "val_loss_best": Range(0, **AT_BEST),
    "val_acc_interp": Range(0, 1, null="tau_interp"),
    "repair_gap": Range(-1, 1, null="tau_interp"),
    "kernel_fro_norm_init": NORM,
    **dict.fromkeys(("kernel_fro_norm_best", "kernel_fro_norm_last"),
                    Range(0, infinite=True, **AT_BEST)),
    **dict.fromkeys(("T_SGD", "T_L2", "T_adapt"), Range(0, **AT_BEST)),
    "bn_var_ratio_best": BN_RATIO,
    "diverged_epoch": Range(1, null=True),
    "wall_time_s": MEASURE,
    # a resume from the final checkpoint (records deleted after a failed job) is at
    # epochs + 1; one at the epoch a run diverged in is past its epochs_run
    "resumed_from_epoch": Range(1, "epochs", null=True, beyond=1),
}


class RecordError(InputError):
    """A record file is missing, truncated, or does not follow the schema."""


def summary_record(  # noqa: PLR0913 (keyword-only: a run's outcome and provenance)
        run: Run, history: pd.DataFrame, *, kernel_fro_norm_init: float,
        diverged_epoch: int | None, early_stopped: bool, wall_time_s: float, device: str,
        determinism: str = "", torch_version: str | None = None,
        data_verification: str | None = None, test_acc_best: float | None = None,
        record_source: str = TRAINED, host: str | None = None, slurm_job_id: str | None = None,
        resumed_from_epoch: int | None = None) -> dict[str, Any]:
    """The summary row of one run from its (finite) per-epoch history; `test_acc_best`,
    where given, is the weights at tau_best tested on Recipe.best_test_subset images."""
    h = history.sort_values("epoch")
    outcome = {name: values[0] for name, values in epoch_outcomes(
        {c: h[c].to_numpy(float)[None, :] for c in OUTCOME_SOURCES},
        np.array([len(h)])).items()}
    if test_acc_best is not None:
        outcome["test_acc_best"] = test_acc_best
    status = (DIVERGED if diverged_epoch is not None
              else EARLY_STOPPED if early_stopped else COMPLETED)
    return {
        **run.as_row(),
        "status": status,
        "epochs_run": len(h),
        **outcome,
        "kernel_fro_norm_init": kernel_fro_norm_init,
        "diverged": diverged_epoch is not None, "diverged_epoch": diverged_epoch,
        "wall_time_s": wall_time_s, "device": device, "determinism": determinism,
        "host": host, "slurm_job_id": slurm_job_id, "resumed_from_epoch": resumed_from_epoch,
        "torch_version": torch_version, **versions(),
        "data_verification": data_verification, "record_source": record_source,
        "schema_version": SCHEMA_VERSION,
    }


# The history columns a summary's outcomes are read from (epoch_outcomes)
OUTCOME_SOURCES = ("epoch", "train_acc", "val_acc", "val_loss", "test_acc",
                   "kernel_fro_norm", "bn_var_ratio", "T_SGD", "T_L2", "T_adapt")


def epoch_outcomes(h: Mapping[str, np.ndarray], epochs_run: np.ndarray) -> dict[str, Any]:
    """The outcomes a summary reads off its history, for many runs at once: `h[column]`
    is a (runs, epochs) array of each OUTCOME_SOURCES column, of which each run's first
    `epochs_run` are its epochs. tau_best is the epoch of the lowest val loss (the first
    of equals), tau_interp the first whose train accuracy reaches INTERP_THRESHOLD; the
    one home of those rules (the trainer's and the synthetic records' summaries)."""
    runs = np.arange(len(epochs_run))
    if not h["val_loss"].shape[1]:  # no epoch at all: one that no run reaches
        h = {c: np.full((len(runs), 1), np.nan) for c in OUTCOME_SOURCES}
    valid = np.arange(h["val_loss"].shape[1])[None, :] < np.asarray(epochs_run)[:, None]
    lowest = np.where(valid & ~np.isnan(h["val_loss"]), h["val_loss"], np.inf)
    best = _first(valid & (lowest == lowest.min(axis=1, initial=np.inf, keepdims=True)))
    interp = _first(valid & (h["train_acc"] >= INTERP_THRESHOLD))
    last = np.asarray(epochs_run) - 1

    def at(column: str, index: np.ndarray) -> np.ndarray:
        return np.where(index >= 0, h[column][runs, np.maximum(index, 0)], np.nan)

    def epoch(index: np.ndarray) -> list[int | None]:
        return [None if i < 0 else int(e) for i, e in zip(index, at("epoch", index),
                                                           strict=True)]

    return {"tau_best": epoch(best), "tau_interp": epoch(interp),
            "test_acc_best": at("test_acc", best), "val_acc_best": at("val_acc", best),
            "train_acc_best": at("train_acc", best), "val_loss_best": at("val_loss", best),
            "val_acc_interp": at("val_acc", interp), "val_acc_last": at("val_acc", last),
            "test_acc_last": at("test_acc", last), "train_acc_last": at("train_acc", last),
            "repair_gap": at("val_acc", best) - at("val_acc", interp),
            "kernel_fro_norm_best": at("kernel_fro_norm", best),
            "kernel_fro_norm_last": at("kernel_fro_norm", last),
            "bn_var_ratio_best": at("bn_var_ratio", best),
            **{c: at(c, last) for c in ("T_SGD", "T_L2", "T_adapt")}}


def _first(mask: np.ndarray) -> np.ndarray:
    """Per row of a (runs, epochs) mask, the index of its first True; -1 for none."""
    return np.where(mask.any(axis=1), mask.argmax(axis=1), -1)


def versions() -> dict[str, str]:
    """The software behind a record, but the training library's (the trainer adds it)."""
    return {"python_version": platform.python_version(), "initmem_version": __version__,
            "code_version": code_version()}


@cache
def code_version() -> str:
    """The commit of the checkout this initmem runs from (`git describe --always
    --dirty`): which code made a record, beyond the package version."""
    try:
        out = subprocess.run(["git", "-C", str(Path(__file__).parent), "describe", "--always",
                              "--dirty", "--abbrev=12"], capture_output=True, text=True,
                             timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def history_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """History rows (one per epoch) as a frame of the record's history columns and dtypes."""
    return typed(pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)), HISTORY_COLUMNS)


def summary_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Summary rows (one per run) as a frame of the record's summary columns and dtypes."""
    return typed(pd.DataFrame(rows), summary_columns())


def summary_columns() -> dict[str, str]:
    """A summary record's columns: the spec's (plan.spec.spec_columns) then outcomes."""
    return {**spec_columns(), **OUTCOME_COLUMNS}


# Where the rows of a frame read from records came from, for errors: the file (or
# archive member), or a function of the row giving its file (and run).
Where = str | Callable[[int], str]


def _at(where: Where, row: int) -> str:
    return where(row) if callable(where) else where


def typed(frame: pd.DataFrame, columns: dict[str, str], where: Where = "record"
          ) -> pd.DataFrame:
    """The frame's `columns` with their record dtypes; RecordError names a column it
    lacks, or the first value that is not of its column's type (a string in a float
    column)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise RecordError(f"{_at(where, 0)}: record lacks columns {missing}")
    frame = frame[list(columns)]
    try:  # only the columns not of their dtype yet: astype costs per column
        return frame.astype({c: t for c, t in columns.items() if frame[c].dtype != t})
    except (ValueError, TypeError):
        raise RecordError(_mistyped(frame, columns, where)) from None


def _mistyped(frame: pd.DataFrame, columns: dict[str, str], where: Where) -> str:
    """The first value of `frame` that does not convert to its column's dtype, named."""
    for name, dtype in columns.items():
        for i, value in enumerate(frame[name]):
            try:
                pd.Series([value]).astype(dtype)
            except (ValueError, TypeError):
                return f"{_at(where, i)}: column {name} holds {value!r}, not a {dtype} value"
    return f"{_at(where, 0)}: columns not of the record dtypes {columns}"


def check_ranges(frame: pd.DataFrame, ranges: dict[str, Range], where: Where) -> None:
    """RecordError naming the first value of a typed record frame outside its column's
    Range: the file, the column, the value and what is allowed."""
    def floats(name: str) -> np.ndarray:  # Int64's null reads as NaN
        return frame[name].to_numpy("float64", na_value=np.nan)

    for name, allowed in ranges.items():
        values = floats(name)
        high = (floats(allowed.high) + allowed.beyond if isinstance(allowed.high, str)
                else allowed.high)
        with np.errstate(invalid="ignore"):
            inside = (values >= allowed.low) & (values <= high)
        if not allowed.infinite:
            inside &= np.isfinite(values)
        may_be_null = allowed.null
        if isinstance(may_be_null, str):
            may_be_null = np.isnan(floats(may_be_null))
        bad = np.flatnonzero(~(inside | (np.isnan(values) & may_be_null)))
        if bad.size:
            i = int(bad[0])
            raise RecordError(f"{_at(where, i)}: {name}={values[i]:.6g} is out of range; "
                              f"allowed: {allowed.allowed()}")


def checked(table: pa.Table, columns: dict[str, str], ranges: dict[str, Range],
            where: Where) -> pa.Table:
    """The table, once its values (with the later columns an older record lacks) are of
    their record dtypes and within their Ranges; RecordError names the first that is not."""
    check_ranges(typed(upgraded(table, columns).to_pandas(), columns, where),
                 ranges, where)
    return table


def rows_of(files: list[Path], counts: list[int]) -> Where:
    """Where of a table concatenated from record files of `counts` rows: row i's file."""
    ends = np.cumsum(counts)
    return lambda row: str(files[int(np.searchsorted(ends, row, side="right"))])


def write_records(out_dir: str | Path, history: pd.DataFrame, summary: dict[str, Any],
                  replace: bool = True) -> bool:
    """Write one run's history, then its summary (whose presence marks completion); with
    replace=False a finished run (its summary exists, or appears before ours is placed)
    is left as it is. Whether this call wrote the summary."""
    out = Path(out_dir)
    if not replace and (out / "summary.parquet").exists():
        return False
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(history_frame(history.to_dict("records")), out / "history.parquet")
    return atomic_write_parquet(summary_frame([summary]), out / "summary.parquet", replace)


def content_digest(table: pa.Table) -> str:
    """SHA-256 of a table's column names, null positions, values and key-value metadata
    (pandas' dtypes; not the digest itself): what a reader gets, whatever the file's
    encoding, chunking or string type."""
    digest = hashlib.sha256()
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != DIGEST_KEY}
    for key in sorted(metadata):
        digest.update(key + b"\x1f" + metadata[key] + b"\x1e")
    for name, column in zip(table.column_names, table.columns, strict=True):
        valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
        values = column.to_numpy(zero_copy_only=False)[valid]
        digest.update(name.encode() + b"\x1f" + np.packbits(valid).tobytes() + b"\x1f")
        if values.dtype == object:  # strings
            digest.update("\x1e".join(map(str, values)).encode())
        else:
            digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()


def sealed(table: pa.Table) -> pa.Table:
    """The table with its content digest in its key-value metadata."""
    metadata = {**(table.schema.metadata or {}), DIGEST_KEY: content_digest(table).encode()}
    return table.replace_schema_metadata(metadata)


def read_sealed(path: Path, max_rows: int, expected: str) -> pa.Table:
    """A record file of at most `max_rows` rows (`expected` says whose) whose checksum
    matches its content; RecordError names the file and the fix otherwise."""
    try:  # ParquetFile.read is ~3x faster than read_table on thousands of small files
        # a run folder may be shared: no link followed, no FIFO opened, the size bounded
        raw = read_bytes(path, max_rows * ROW_BYTES + FILE_BYTES, "a record file", RecordError)
        parquet = pq.ParquetFile(pa.BufferReader(raw))
        check_declared_size(parquet.metadata, path, max_rows, expected)
        table = parquet.read(use_threads=False)
    except FileNotFoundError:
        raise RecordError(f"{path}: missing; {REDO}") from None
    except RecordError:
        raise
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: unreadable ({err}); {REDO}") from None
    return verified(table, path)


def check_declared_size(metadata: pq.FileMetaData, where: object, max_rows: int,
                        expected: str) -> None:
    """RecordError unless a Parquet file's metadata declares at most `max_rows` rows
    (`expected`: whose count bounds them) and ROW_BYTES of uncompressed data per row."""
    # Row-group fields only: pyarrow's column-chunk accessor lets a C++ exception from a
    # damaged chunk escape (ColumnChunk is not `except +`) and that aborts the process.
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    rows = max(metadata.num_rows, sum(g.num_rows for g in groups))
    size = sum(g.total_byte_size for g in groups)  # its column chunks' uncompressed sizes
    if rows > max_rows:
        raise RecordError(f"{where}: declares {rows} rows, at most {max_rows} expected "
                          f"({expected}); refused before reading")
    if size > max(rows, 1) * ROW_BYTES:
        raise RecordError(f"{where}: declares {size} bytes for {rows} rows, more than "
                          f"{ROW_BYTES} a row; refused before reading")


def history_rows(summaries: pa.Table) -> int:
    """The most history rows the runs of these summaries have: their recipes' epochs,
    each taken at most at the config schema's maximum."""
    cap = schema()["$defs"]["field"]["epochs"]["maximum"]
    epochs = summaries.column("epochs").to_pylist() if "epochs" in summaries.column_names else []
    return sum(min(e, cap) if isinstance(e, int) and e >= 0 else cap for e in epochs)


def read_run_files(folder: Path) -> tuple[pa.Table, pa.Table]:
    """(history, summary) of one run folder, checksums verified, its history no longer
    than its summary's epochs."""
    summary = read_sealed(folder / "summary.parquet", 1, "a run's summary is one row")
    history = read_sealed(folder / "history.parquet", history_rows(summary),
                          "its summary's epochs")
    return history, summary


# Snakemake keeps an up-to-date aggregate when an input record disappears, so the rerun
# forces the aggregate, which brings the run's training job back in (training that run
# alone: initmem train skips the pack's finished runs).
REDO = ("delete its run folder and rerun the workflow with --forcerun aggregate_runs to "
        "retrain the run, or restore it from a runs archive (initmem archive unpack)")


def verified(table: pa.Table, where: object) -> pa.Table:
    """The table if its stored digest matches its content (RecordError otherwise)."""
    stored = (table.schema.metadata or {}).get(DIGEST_KEY)
    if stored is None:
        raise RecordError(f"{where}: no initmem checksum (written by another tool or by an "
                          f"initmem before record schema {OLDEST_SCHEMA_VERSION}); {REDO}")
    try:
        actual = content_digest(table)
    except (pa.ArrowException, ValueError, UnicodeDecodeError) as err:
        raise RecordError(f"{where}: unreadable ({err}); {REDO}") from None
    if stored.decode(errors="replace") != actual:
        raise RecordError(f"{where}: damaged (its content does not match its checksum); "
                          f"{REDO}")
    return table


def atomic_write_parquet(frame: pd.DataFrame, path: Path, replace: bool = True) -> bool:
    """Write the frame as Parquet, sealed with its digest, by atomic_write_bytes."""
    table = sealed(pa.Table.from_pandas(frame, preserve_index=False))
    return atomic_write_bytes(path, lambda fh: pq.write_table(table, fh), replace)


def atomic_write_bytes(path: Path, write: Any, replace: bool = True) -> bool:
    """Write a file by `write(fh)` into a temporary file, fsync, then rename it into
    place (mode 0644): a crash leaves the old file or the new one, never a part. With
    replace=False it is linked into place, so a file already there (even one another
    process placed a moment before) stays; whether this call placed the file."""
    with naming(path):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with naming(path), os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
            # mkstemp makes 0600; records are read by the whole group (by descriptor: in a
            # shared folder the name could be another file by now)
            os.fchmod(fh.fileno(), 0o644)
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails where path exists: never replaces it
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_records(run_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(history, summary) of one run; RecordError names the file if either is bad."""
    run_dir = Path(run_dir)
    history, summary = read_run_files(run_dir)
    history = _frame(history, run_dir / "history.parquet", HISTORY_COLUMNS, HISTORY_RANGES)
    summary = _frame(summary, run_dir / "summary.parquet", summary_columns(), OUTCOME_RANGES)
    check_schema_version(int(summary["schema_version"].iloc[0]), run_dir / "summary.parquet")
    return history, summary


def run_of(row: Mapping[str, Any], where: str) -> Run:
    """The run a summary row records (spec.Run.as_row read back). RecordError when its
    spec fields make no valid run, or make another run_id than the row's: the run id
    names the run's folder, so only the one its spec makes is taken."""
    run_id = row.get("run_id")
    try:
        run = Run(recipe_of_row(row), _plain(row.get("sigma_w")), _plain(row.get("seed")))
    except (ValueError, TypeError) as err:  # SpecError is a ValueError
        raise RecordError(f"{where}: run {run_id!r} has no valid spec ({err})") from None
    if run.run_id != run_id:
        raise RecordError(f"{where}: run_id {run_id!r} is not the one its spec makes "
                          f"({run.run_id}); run ids name folders, so no other is taken")
    return run


def recipe_of_row(row: Mapping[str, Any]) -> Recipe:
    """The recipe of a record's (or a runs table's) row: its Recipe fields, nulls as None
    and numpy numbers as Python's (SpecError when they make no valid recipe)."""
    return Recipe(**{f.name: _plain(row.get(f.name)) for f in dataclasses.fields(Recipe)})


def _plain(value: Any) -> Any:
    """A frame's cell as the spec takes it: None for null or NaN, Python's numbers."""
    if value is None or pd.isna(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def record_folder(root: str | Path, row: Mapping[str, Any], where: str) -> Path:
    """root/<run_dir>/ of a summary row's run, checked: its run_id is its spec's
    (`run_of`) and the folder resolves inside root (no link under root leads out)."""
    root = Path(root)
    folder = root / run_of(row, where).run_dir
    if not inside(folder, root):
        raise RecordError(f"{where}: run {row['run_id']}'s folder {folder} leads outside "
                          f"{root} (a link); records are written inside the output folder "
                          "only")
    return folder


def check_schema_version(version: object, where: object) -> None:
    """RecordError unless records of this schema_version read."""
    if not isinstance(version, int) or not OLDEST_SCHEMA_VERSION <= version <= SCHEMA_VERSION:
        raise RecordError(f"{where}: records of schema_version {version}; this initmem reads "
                          f"{OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}")


_ARROW_TYPES = {"string": pa.string(), "Int64": pa.int64(), "float64": pa.float64(),
                "bool": pa.bool_()}


def upgraded(table: pa.Table, columns: dict[str, str]) -> pa.Table:
    """Records (of `columns`: history or summary) of an older schema as this one reads
    them: the former recipe fields moved into `hyperparameters` (spec.FORMER_FIELDS), and
    the columns they were written before: a recipe field of spec.LATER_FIELDS holds its
    default (the value they were made with), a column of LATER_COLUMNS NaN or null (not
    measured, not recorded)."""
    table = _former_fields_moved(table)
    later = {**LATER_FIELDS, **LATER_COLUMNS}
    for name in [c for c in columns if c in later and c not in table.column_names]:
        column = pa.array([later[name]] * len(table), _ARROW_TYPES[columns[name]])
        table = table.append_column(name, column)
    return table


def _former_fields_moved(table: pa.Table) -> pa.Table:
    """Summary records of before schema 5: their hyperparameters with the former fields'
    values moved in (spec.upgraded_hyperparameters), the former columns dropped."""
    former = [name for name in FORMER_FIELDS if name in table.column_names]
    if not former:
        return table
    kept = [c for c in ("run_id", "optimizer", "hyperparameters") if c in table.column_names]
    text = pa.array([_upgraded(row) for row in table.select([*former, *kept]).to_pylist()],
                    pa.string())
    table = table.drop_columns([c for c in (*former, "hyperparameters") if c in table.column_names])
    return table.append_column("hyperparameters", text)


def _upgraded(row: dict[str, Any]) -> str | None:
    try:
        return upgraded_hyperparameters(row)
    except InputError as err:
        raise RecordError(f"run {row.get('run_id')!r} (a record of schema 4 or older): its "
                          f"momentum and decays make no valid hyperparameters: {err}") from None


def _frame(table: pa.Table, path: Path, columns: dict[str, str],
           ranges: dict[str, Range]) -> pd.DataFrame:
    frame = typed(upgraded(table, columns).to_pandas(), columns, str(path))
    check_ranges(frame, ranges, str(path))
    return frame


RECORD_FILES = ("history.parquet", "summary.parquet")  # as read_run_files returns them


def read_folder_records(root: str | Path, runs: list[Run]) -> tuple[pa.Table, pa.Table]:
    """(summaries, histories) of the runs that have records under root, in run order.
    A run has records when its summary.parquet exists (written last, atomically); every
    file's checksum is verified, and damaged files are listed together in one error; then
    every value's type and range (`checked`), the first bad one named with its file."""
    root = Path(root)
    summaries, histories, damaged, folders = [], [], [], []
    for run in runs:
        folder = root / run.run_dir
        if not (folder / "summary.parquet").exists():
            continue
        try:
            tables = read_run_files(folder)
        except RecordError as err:
            damaged.append(str(err))
            continue
        summaries.append(tables[1])
        histories.append(tables[0])
        folders.append(folder)
    if damaged:
        shown = "\n  ".join(damaged[:20])
        more = f"\n  and {len(damaged) - 20} more" if len(damaged) > 20 else ""
        raise RecordError(f"{len(damaged)} run(s) have damaged records:\n  {shown}{more}")
    out = []
    for name, tables, columns, ranges in (
            ("summary.parquet", summaries, summary_columns(), OUTCOME_RANGES),
            ("history.parquet", histories, HISTORY_COLUMNS, HISTORY_RANGES)):
        where = rows_of([folder / name for folder in folders], [t.num_rows for t in tables])
        out.append(checked(concat(tables, columns), columns, ranges, where))
    return out[0], out[1]


def concat(tables: list[pa.Table], columns: dict[str, str]) -> pa.Table:
    """One table from many record files (schema of the record dtypes when there are none)."""
    if not tables:
        return pa.Table.from_pandas(pd.DataFrame(columns=list(columns)).astype(columns),
                                    preserve_index=False)
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise RecordError(f"record files disagree on their schema: {err}") from None
