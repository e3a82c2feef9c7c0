"""Run records: one tidy per-epoch history and one summary row per run, as Parquet.

Schema (version 1; bump SCHEMA_VERSION on any change of names, meaning or dtype):

history.parquet, one row per run and epoch (epoch = 1, 2, ...; as Keras logs them):
    run_id, epoch,
    train_loss, train_acc      running mean over the epoch's minibatches, training mode
    val_loss, val_acc,         inference mode (BatchNorm moving statistics)
    test_loss, test_acc
    kernel_fro_norm            ||W||_F over conv and dense kernels, end of epoch
    lr                         rate of the epoch's last update
    T_SGD, T_L2, T_adapt       clocks (1/b) sum eta_k^2, lambda sum eta_k, sum eta_k,
                               cumulative to the end of the epoch (lambda = l2 + weight_decay)
  Accuracies are fractions in [0, 1]. Losses are Keras' logged losses: mean
  cross-entropy plus the kernel L2 penalty where the recipe has one.

summary.parquet, one row per run: every spec field (see spec.Run.as_row), then
    status                     completed | early_stopped | diverged
    epochs_run, tau_best, tau_interp (null: never reached train acc >= 0.995)
    test_acc_best, val_acc_best, train_acc_best, val_loss_best   (at tau_best)
    val_acc_interp (null without tau_interp), val_acc_last, test_acc_last, train_acc_last
    repair_gap = val_acc_best - val_acc_interp (null without tau_interp)
    kernel_fro_norm_init, kernel_fro_norm_best, kernel_fro_norm_last
    T_SGD, T_L2, T_adapt       final clocks
    diverged, diverged_epoch (null unless diverged)
    wall_time_s, device, determinism (the kernel settings in force; how the step ran:
                               eager or CUDA graph, memory layout),
    torch_version, python_version, initmem_version
    record_source              trained | generated (synthetic records, never results)
    schema_version

Files are written atomically (temporary file, fsync, rename), history first: a run is
complete exactly when its summary.parquet exists and reads back with this schema.
"""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import InputError
from .spec import Run

SCHEMA_VERSION = 1
INTERP_THRESHOLD = 0.995

HISTORY_COLUMNS: dict[str, str] = {
    "run_id": "string", "epoch": "int64",
    "train_loss": "float64", "train_acc": "float64",
    "val_loss": "float64", "val_acc": "float64",
    "test_loss": "float64", "test_acc": "float64",
    "kernel_fro_norm": "float64", "lr": "float64",
    "T_SGD": "float64", "T_L2": "float64", "T_adapt": "float64",
}

OUTCOME_COLUMNS: dict[str, str] = {
    "status": "string", "epochs_run": "int64", "tau_best": "Int64", "tau_interp": "Int64",
    "test_acc_best": "float64", "val_acc_best": "float64", "train_acc_best": "float64",
    "val_loss_best": "float64", "val_acc_interp": "float64", "val_acc_last": "float64",
    "test_acc_last": "float64", "train_acc_last": "float64", "repair_gap": "float64",
    "kernel_fro_norm_init": "float64", "kernel_fro_norm_best": "float64",
    "kernel_fro_norm_last": "float64",
    "T_SGD": "float64", "T_L2": "float64", "T_adapt": "float64",
    "diverged": "bool", "diverged_epoch": "Int64",
    "wall_time_s": "float64", "device": "string", "determinism": "string",
    "torch_version": "string",
    "python_version": "string", "initmem_version": "string",
    "record_source": "string", "schema_version": "int64",
}


class RecordError(InputError):
    """A record file is missing, truncated, or does not follow the schema."""


def summarize(run: Run, history: pd.DataFrame, *, kernel_fro_norm_init: float,
              diverged_epoch: int | None, early_stopped: bool, wall_time_s: float,
              device: str, determinism: str = "",
              record_source: str = "trained") -> dict[str, Any]:
    """The summary row of one run from its (finite) per-epoch history."""
    h = history.sort_values("epoch").reset_index(drop=True)
    empty = h.empty
    best = None if empty else h.loc[h["val_loss"].idxmin()]
    interp = h[h["train_acc"] >= INTERP_THRESHOLD]
    first_interp = None if interp.empty else interp.iloc[0]
    last = None if empty else h.iloc[-1]

    def at(row: pd.Series | None, col: str) -> float:
        return float("nan") if row is None else float(row[col])

    status = ("diverged" if diverged_epoch is not None
              else "early_stopped" if early_stopped else "completed")
    return {
        **run.as_row(),
        "status": status,
        "epochs_run": len(h),
        "tau_best": None if best is None else int(best["epoch"]),
        "tau_interp": None if first_interp is None else int(first_interp["epoch"]),
        "test_acc_best": at(best, "test_acc"), "val_acc_best": at(best, "val_acc"),
        "train_acc_best": at(best, "train_acc"), "val_loss_best": at(best, "val_loss"),
        "val_acc_interp": at(first_interp, "val_acc"),
        "val_acc_last": at(last, "val_acc"), "test_acc_last": at(last, "test_acc"),
        "train_acc_last": at(last, "train_acc"),
        "repair_gap": at(best, "val_acc") - at(first_interp, "val_acc"),
        "kernel_fro_norm_init": kernel_fro_norm_init,
        "kernel_fro_norm_best": at(best, "kernel_fro_norm"),
        "kernel_fro_norm_last": at(last, "kernel_fro_norm"),
        "T_SGD": at(last, "T_SGD"), "T_L2": at(last, "T_L2"), "T_adapt": at(last, "T_adapt"),
        "diverged": diverged_epoch is not None, "diverged_epoch": diverged_epoch,
        "wall_time_s": wall_time_s, "device": device, "determinism": determinism,
        **library_versions(),
        "record_source": record_source, "schema_version": SCHEMA_VERSION,
    }


def library_versions() -> dict[str, str]:
    import torch

    from . import __version__

    return {"torch_version": torch.__version__, "python_version": platform.python_version(),
            "initmem_version": __version__}


def history_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return _typed(pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)), HISTORY_COLUMNS)


def summary_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return _typed(pd.DataFrame(rows), summary_columns())


_SPEC_DTYPES = {"str": "string", "int": "Int64", "float": "float64", "bool": "bool"}


def summary_columns() -> dict[str, str]:
    """Spec columns (derived from spec.Recipe, so they cannot drift) then outcomes."""
    import dataclasses

    from .spec import Recipe

    spec_cols = {"run_id": "string"}
    for f in dataclasses.fields(Recipe):
        spec_cols[f.name] = _SPEC_DTYPES[str(f.type).split(" | ")[0]]
    return {**spec_cols, "sigma_w": "float64", "seed": "int64", **OUTCOME_COLUMNS}


def _typed(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise RecordError(f"record lacks columns {missing}")
    frame = frame[list(columns)]
    return frame.astype({c: t for c, t in columns.items()})


def write_records(out_dir: str | Path, history: pd.DataFrame, summary: dict[str, Any]) -> None:
    """Write one run's history, then its summary (whose presence marks completion)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(history_frame(history.to_dict("records")), out / "history.parquet")
    atomic_write_parquet(summary_frame([summary]), out / "summary.parquet")


def atomic_write_parquet(frame: pd.DataFrame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            frame.to_parquet(fh, index=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; records are read by the whole group
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_records(run_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(history, summary) of one run; RecordError names the file if either is bad."""
    run_dir = Path(run_dir)
    history = _read(run_dir / "history.parquet", HISTORY_COLUMNS)
    summary = _read(run_dir / "summary.parquet", summary_columns())
    version = int(summary["schema_version"].iloc[0])
    if version != SCHEMA_VERSION:
        raise RecordError(f"{run_dir / 'summary.parquet'}: schema_version {version}, "
                          f"this initmem reads {SCHEMA_VERSION}")
    return history, summary


def _read(path: Path, columns: dict[str, str]) -> pd.DataFrame:
    if not path.exists():
        raise RecordError(f"{path}: missing")
    try:
        frame = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several types for truncated files
        raise RecordError(f"{path}: unreadable ({err})") from None
    try:
        return _typed(frame, columns)
    except (RecordError, ValueError, TypeError) as err:
        raise RecordError(f"{path}: {err}") from None
