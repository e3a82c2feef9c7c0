"""Gather run records into the two tables every analysis reads.

runs.parquet: one row per EXPECTED run of the config, in config order: its spec columns
(from the config) and outcomes (from its summary.parquet). A run without records has
status "missing" and null outcomes, so a partial result never looks complete.
epochs.parquet: every history row of the expected runs, joined with its run's spec
columns and record_source. Records of an older schema read with the columns they lack
(records.files.upgraded): bn_var_ratio is NaN before schema 3.

Records come from the run folders (<records>/<run_dir>/) or from a runs archive
(initmem.archive); both give the same tables. Records of runs the config does not expect
are ignored; a record whose spec disagrees with the config is an error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from initmem.plan.grid import (
    archived,
    asked_runs,
    expand_runs,
    experiment_config,
    load_config,
    validate_config,
)
from initmem.plan.spec import Run, spec_columns, spec_table
from initmem.records.archive import archive_runs, read_archive, read_listed, read_manifest
from initmem.records.files import (
    HISTORY_COLUMNS,
    OUTCOME_COLUMNS,
    RecordError,
    read_folder_records,
    summary_columns,
    typed,
    upgraded,
)
from initmem.vocabulary import MISSING

# Outcomes of missing runs are null, so their integer and boolean columns are nullable.
NULLABLE = {"int64": "Int64", "bool": "boolean"}


def runs_columns() -> dict[str, str]:
    """The runs table's columns: a summary's, its outcomes nullable (a missing run)."""
    return {c: NULLABLE.get(t, t) if c in OUTCOME_COLUMNS else t
            for c, t in summary_columns().items()}


def aggregate(runs: list[Run], summaries: pa.Table,
              histories: pa.Table) -> tuple[pd.DataFrame, pa.Table]:
    """(runs table, epochs table) of the expected runs from their records."""
    specs = spec_table(runs)
    outcomes = _outcomes(specs, typed_summaries(summaries))
    table = specs.merge(outcomes, on="run_id", how="left", validate="one_to_one")
    table["status"] = table["status"].fillna(MISSING)
    table = table[list(runs_columns())].astype(runs_columns())
    return table, _epochs(table, histories)


def typed_summaries(summaries: pa.Table) -> pd.DataFrame:
    """Summary records as a frame with the record dtypes; RecordError names a column
    they lack or a value not of its column's type (records.files.typed)."""
    columns = summary_columns()
    return typed(upgraded(summaries, columns).to_pandas(), columns, "summary records")


def _outcomes(specs: pd.DataFrame, summaries: pd.DataFrame) -> pd.DataFrame:
    """The outcome columns of the expected runs' summaries, after checking their specs."""
    summaries = summaries[summaries["run_id"].isin(specs["run_id"])].reset_index(drop=True)
    dupes = summaries["run_id"][summaries["run_id"].duplicated()]
    if len(dupes):
        raise RecordError(f"two summaries for run {dupes.iloc[0]}")
    stale = spec_mismatches(specs, summaries)
    if stale:
        raise RecordError(f"{stale[0]}; delete the stale record or fix the config")
    return summaries[["run_id", *OUTCOME_COLUMNS]]


def spec_mismatches(specs: pd.DataFrame, summaries: pd.DataFrame) -> list[str]:
    """One line per summary whose spec differs from its expected run's: a record at a
    run's path but made with another spec (say another cosine_alpha, which the path does
    not show) must not pass for that run. `summaries` holds expected runs only."""
    expected = specs.set_index("run_id").loc[summaries["run_id"]].reset_index()
    stale = pd.Series(False, index=expected.index)
    lines = {}
    for col in expected.columns:
        a, b = expected[col], summaries[col]  # a record keeps its spec's values exactly
        same = ((a == b) | (a.isna() & b.isna())).fillna(False).astype(bool)
        for i in np.flatnonzero(~same.to_numpy() & ~stale.to_numpy()):
            lines[i] = (f"record of run {expected['run_id'][i]} has {col}={b[i]} but the "
                        f"config says {a[i]}")
        stale |= ~same
    return [lines[i] for i in sorted(lines)]


def _epochs(table: pd.DataFrame, histories: pa.Table) -> pa.Table:
    """History rows of expected runs with their spec columns, in run and epoch order."""
    spec_cols = [c for c in spec_columns() if c != "run_id"] + ["record_source"]
    specs = pa.Table.from_pandas(table[["run_id", *spec_cols]], preserve_index=False)
    histories = upgraded(histories, HISTORY_COLUMNS).select(list(HISTORY_COLUMNS))
    row = pc.index_in(histories["run_id"], value_set=specs["run_id"])
    keep = pc.is_valid(row)
    histories, row = histories.filter(keep), row.filter(keep)
    for col in spec_cols:
        histories = histories.append_column(col, specs[col].take(row))
    return histories


def write_tables(runs_table: pd.DataFrame, epochs: pa.Table, runs_out: str | Path,
                 epochs_out: str | Path) -> None:
    """Write the runs table and the epochs table, making their folders."""
    for path in (runs_out, epochs_out):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    runs_table.to_parquet(runs_out, index=False)
    pq.write_table(epochs, epochs_out, compression="zstd")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem aggregate`."""
    parser.add_argument("--config", type=Path, required=True, help="the experiment config")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", type=Path, help="run folders root (results/runs)")
    source.add_argument("--archive", type=Path, help="a runs archive (initmem archive pack)")
    parser.add_argument("--runs", type=Path, required=True, help="runs.parquet to write")
    parser.add_argument("--epochs", type=Path, required=True, help="epochs.parquet to write")
    parser.add_argument("--expected", type=Path,
                        help="a staged study's asked-for run ids (results/looks/runs.txt): "
                             "the only runs expected; the config's others were never needed")


def main(args: argparse.Namespace) -> int:
    """`initmem aggregate`: the runs and epochs tables of a config's expected runs."""
    config = load_config(args.config)
    runs = archive_runs(config, args.archive) if args.archive else expand_runs(config)
    if args.expected:
        runs = asked_runs(runs, read_listed(args.expected), str(args.expected))
    if args.archive:
        summaries, histories = _archive_records(config, args.archive)
    else:
        summaries, histories = read_folder_records(args.records, runs)
    table, epochs = aggregate(runs, summaries, histories)
    write_tables(table, epochs, args.runs, args.epochs)
    print(_report(table))
    return 0


def _archive_records(config: dict[str, Any], archive: Path) -> tuple[pa.Table, pa.Table]:
    # compared as both would be read from the archive (`archive config` marks its own)
    if experiment_config(archived(read_manifest(archive)["config"])) != \
            experiment_config(archived(config)):
        print(f"warning: {archive} was made from another config; the runs it lacks "
              "count as missing. Its own config: python -m initmem archive config "
              f"{archive} --out archived.yaml", file=sys.stderr)
    return read_archive(archive)


def tables_from_archive(config_path: Path | None, archive: Path
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs and epochs tables of an archive, in memory (as `initmem aggregate` writes),
    for the runs of `config_path` (None: the config the archive was made from)."""
    config = (validate_config(archived(read_manifest(archive)["config"])) if config_path is None
              else load_config(config_path))
    table, epochs = aggregate(archive_runs(config, archive), *_archive_records(config, archive))
    return table, epochs.to_pandas()


def tables_from_records(config: dict[str, Any], records: Path
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs and epochs tables of a config's run folders under `records`, in memory."""
    runs = expand_runs(config)
    table, epochs = aggregate(runs, *read_folder_records(records, runs))
    return table, epochs.to_pandas()


def _report(table: pd.DataFrame) -> str:
    counts: dict[str, Any] = table["status"].value_counts().to_dict()
    return f"{len(table)} expected runs: " + ", ".join(f"{n} {s}" for s, n in counts.items())
