"""Tiny hand-made runs/epochs tables in the aggregate's format, for the analysis tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from initmem.analysis import scorecard, tables
from initmem.plan import artifacts
from initmem.records.files import HISTORY_COLUMNS, OUTCOME_COLUMNS, summary_columns

PUBLISHED = Path(__file__).parents[1] / "paper" / "published"

NULLABLE = {"int64": "Int64", "bool": "boolean"}
RUN_DEFAULTS = {
    "family": "main", "arch": "resnet9", "optimizer": "sgd", "b": 128, "epochs": 300,
    "lr0": 1e-3, "schedule": "cosine", "cosine_alpha": 0.01,
    "hyperparameters": None, "l2": 0.0, "augment": False, "patience": None, "width": 1.0,
    "dataset": "cifar10", "train_subset": None, "eval_subset": None, "best_test_subset": None,
    "sigma_w": 0.1,
    "seed": 0, "status": "completed", "record_source": "trained", "diverged": False,
}


def runs_table(rows: list[dict]) -> pd.DataFrame:
    """A runs table: each row is RUN_DEFAULTS updated by the given fields (outcomes not
    given are null); run ids are unique and readable."""
    columns = {c: NULLABLE.get(t, t) if c in OUTCOME_COLUMNS else t
               for c, t in summary_columns().items()}
    full = []
    for i, row in enumerate(rows):
        r = {**RUN_DEFAULTS, **row}
        r.setdefault("run_id", f"{r['family']}:{r['arch']}:{r['optimizer']}:lr{r['lr0']:g}:"
                               f"l2{r['l2']:g}:b{r['b']}:sw{r['sigma_w']:.2f}-s{r['seed']}-{i}")
        full.append(r)
    return pd.DataFrame(full).reindex(columns=list(columns)).astype(columns)


def epochs_table(rows: list[dict]) -> pd.DataFrame:
    """An epochs table: history columns plus the run's spec columns (RUN_DEFAULTS)."""
    spec = [c for c in summary_columns() if c not in OUTCOME_COLUMNS and c != "run_id"]
    full = [{**RUN_DEFAULTS, "run_id": "r", **row} for row in rows]
    frame = pd.DataFrame(full).reindex(columns=[*HISTORY_COLUMNS, *spec, "record_source"])
    return frame.astype({c: t for c, t in HISTORY_COLUMNS.items()
                         if c in ("run_id", "epoch")})


def small_config(epochs_divisor: int = 15) -> dict:
    """The repository's config.yaml with 1 seed, 5 sigma_w values and few epochs (300 ->
    20, 200 -> 13, 5,000 -> 333), validated: every family, in minutes of CPU less."""
    from pathlib import Path

    import yaml

    from initmem.plan import grid

    config = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())
    for family in config["families"].values():
        family["recipe"]["epochs"] //= epochs_divisor
        family["seeds"] = "seed42"
        family.pop("seed_overrides", None)
    config["sigma_sets"]["main"] = [0.1, 0.5, 1.0, 1.8, 2.5]
    return grid.validate_config(config)


def scorecard_of(runs: pd.DataFrame, config: Path, folder: Path) -> pd.DataFrame:
    """The scorecard of a runs table, through Tables 2-7 written from it as the workflow does."""
    runs.to_parquet(folder / "runs.parquet")
    for n in (n for n, t in artifacts.TABLES.items() if t.reads_runs):
        tables.write_table(n, folder / "runs.parquet", config, folder / "tables" / f"table{n}.tex")
    return scorecard.score(runs, scorecard.read_published(PUBLISHED),
                           scorecard.read_cells(folder / "tables"))
