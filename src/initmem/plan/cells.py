"""The planned runs as a table, and cells: the runs a claim's value (or a table's entry)
reads, chosen by their spec columns.

A runs table (the planned runs here, the aggregated runs in initmem.records) has a row per
run: its spec columns (plan.spec.spec_columns) and, once trained, its outcomes. A cell is
a selection of its rows: `select` by equal values (sigma_w by its canonical key),
`select_cell` as a claims file writes it (values, lists, {min, max} ranges, the final
clocks, an optimizer property). Planning and judging share these, so a staged study's
looks train exactly the runs its claims will read.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd

from initmem.plan.grid import expand_runs
from initmem.plan.optimizers import PROPERTIES, optimizers_where
from initmem.plan.schedule import CLOCKS, final_clocks
from initmem.plan.spec import Recipe, Run, spec_table
from initmem.vocabulary import sigma_w_key


def recipe_keys() -> list[str]:
    """Every recipe field: grouping by these gives one group per configuration."""
    return [f.name for f in dataclasses.fields(Recipe)]


def select(frame: pd.DataFrame, **filters: object) -> pd.DataFrame:
    """Rows whose columns equal the given values (a list or tuple means "any of"; a
    sigma_w by its canonical key); an unknown column is an error naming it."""
    mask = pd.Series(True, index=frame.index)
    for column, wanted in filters.items():
        if column not in frame.columns:
            raise KeyError(f"select: no column {column!r}; columns are {list(frame.columns)}")
        values = list(wanted) if isinstance(wanted, list | tuple) else [wanted]
        if column == "sigma_w":
            values = [sigma_w_key(v) for v in values]
        mask &= frame[column].isin(values).fillna(False).astype(bool)
    return frame[mask]


def select_cell(runs: pd.DataFrame, spec: dict[str, Any]) -> pd.DataFrame:
    """Runs whose columns match: a scalar, a list (any of), or {min, max} (inclusive);
    `clock` filters the same way on the runs' final clocks; an optimizer property
    (`adaptive: true`) selects the optimizers whose declaration has it."""
    filters = {k: v for k, v in spec.items() if k != "clock" and k not in PROPERTIES}
    filters |= spec.get("clock", {})
    frame = runs
    for prop in PROPERTIES:
        if prop in spec:
            frame = select(frame, optimizer=optimizers_where(prop, spec[prop]))
    for column, wanted in filters.items():
        if isinstance(wanted, dict):
            values = frame[column].astype(float)
            keep = values.ge(wanted.get("min", -math.inf)) & values.le(wanted.get("max", math.inf))
            frame = frame[keep.fillna(False).to_numpy()]
        else:
            frame = select(frame, **{column: wanted})
    return frame


def planned_runs(config: dict[str, Any]) -> pd.DataFrame:
    """The config's expected runs as a runs table: specs, the clocks they will reach and
    their updates, every outcome still to come (status "planned")."""
    return planned_table(expand_runs(config))


def planned_table(runs: list[Run]) -> pd.DataFrame:
    """These runs as planned_runs tables them."""
    table = spec_table(runs)
    for name in CLOCKS:
        table[name] = [final_clocks(r.recipe)[name] for r in runs]
    table["updates"] = [r.recipe.total_steps for r in runs]
    table["status"] = "planned"
    return table
