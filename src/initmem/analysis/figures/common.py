"""What every figure shares: its inputs, row selection, seed statistics and curve drawing.

Figures read only the aggregated tables (runs.parquet: one row per expected run, missing
ones included; epochs.parquet: every history row) and the config (how each optimizer is
named, coloured and grouped).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from initmem.analysis import metrics
from initmem.analysis.figures import style
from initmem.errors import InputError
from initmem.plan import roles as family_roles
from initmem.plan.cells import select
from initmem.plan.grid import load_config
from initmem.plan.optimizers import PALETTE, OptimizerDisplay, display, optimizer_display
from initmem.vocabulary import DIVERGED, generated, missing

PERCENTILES = (10, 90)  # the paper's bands: 10th-90th percentile over seeds


class FigureInputError(InputError):
    """A figure's input is absent or lacks what the figure needs; the message says which."""


@dataclass(frozen=True)
class FigureInputs:
    """What a figure reads: the runs and epochs tables it was given, the config, and the
    family roles it may read (its declaration's, when drawn by `figures.draw`)."""
    runs: pd.DataFrame | None
    epochs: pd.DataFrame | None
    config: dict[str, Any]
    roles: tuple[str, ...] = tuple(family_roles.ROLES)

    def families(self, *wanted: str) -> list[str]:
        """The config's families playing `wanted` roles, each of which it must declare."""
        return family_roles.families(self.config, *wanted, declared=self.roles,
                                     reader="this figure")

    def need_runs(self) -> pd.DataFrame:
        """The runs table; FigureInputError when the figure was not given one."""
        if self.runs is None:
            raise FigureInputError("this figure needs --runs (results/aggregate/runs.parquet)")
        return self.runs

    def need_epochs(self) -> pd.DataFrame:
        """The epochs table; FigureInputError when the figure was not given one."""
        if self.epochs is None:
            raise FigureInputError("this figure needs --epochs "
                                   "(results/aggregate/epochs.parquet)")
        return self.epochs

    def optimizers(self, names: Iterable[str]) -> list[OptimizerDisplay]:
        """The displays of `names`: the config's, in its order, then any other by name."""
        shown = optimizer_display(self.config)
        others = sorted(set(names) - set(shown))
        extra = {n: display(n, {}, PALETTE[(len(shown) + i) % len(PALETTE)])
                 for i, n in enumerate(others)}
        return [d for d in [*shown.values(), *extra.values()] if d.name in set(names)]

    def optimizer_label(self, name: str) -> str:
        """The label the figures give optimizer `name`."""
        return self.optimizers([name])[0].label

    @property
    def synthetic(self) -> bool:
        """True when any input row is a generated (fake) record."""
        return any(frame is not None and "record_source" in frame and generated(frame).any()
                   for frame in (self.runs, self.epochs))


def load_inputs(runs_path: str | Path | None, epochs_path: str | Path | None,
                config_path: str | Path | None, epoch_columns: list[str] | None = None,
                epoch_roles: tuple[str, ...] | None = None) -> FigureInputs:
    """Read what a figure needs; the epochs table only in the columns asked and of the
    families playing `epoch_roles`."""
    config = {} if config_path is None else load_config(config_path)
    filters = [("family", "in", family_roles.families(config, *epoch_roles))] \
        if epoch_roles else None
    return FigureInputs(_read(runs_path), _read(epochs_path, epoch_columns, filters), config)


def _read(path: str | Path | None, columns: list[str] | None = None,
          filters: list | None = None) -> pd.DataFrame | None:
    if path is None:
        return None
    if not Path(path).exists():
        raise FigureInputError(f"{path}: missing")
    try:
        return pd.read_parquet(path, columns=columns, filters=filters)
    except (KeyError, ValueError) as err:
        raise FigureInputError(f"{path}: {err}") from None




def on_sigmas(frame: pd.DataFrame, sigmas: Iterable[float]) -> pd.DataFrame:
    """Restrict to a sigma_w grid (e.g. the main grid's rows at the 5-point ablation grid)."""
    return select(frame, sigma_w=tuple(sigmas))


def sigma_grid(frame: pd.DataFrame) -> list[float]:
    """The sigma_w values of a table, sorted; rounded so that float noise does not split one."""
    return sorted({round(float(s), 6) for s in frame["sigma_w"]})


def drawn_counts(frames: Iterable[pd.DataFrame]) -> tuple[int, int, int]:
    """(missing, expected, diverged) runs in the union of the selections (each run
    counted once)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return 0, 0, 0
    union = pd.concat(frames).drop_duplicates("run_id")
    diverged = int((union["status"] == DIVERGED).sum())
    return int(missing(union).sum()), len(union), diverged


def seed_band(frame: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per sigma_w (the index): seed mean, 10th (lo) and 90th (hi) percentile, n values.

    sigma_w values without any value (all their runs missing) are left out.
    """
    data = frame[["sigma_w", value]].astype({value: float})
    band = metrics.percentile_band(data, value, ["sigma_w"], *PERCENTILES)
    return band[band["n"] > 0].set_index("sigma_w").sort_index()


def spread(frame: pd.DataFrame, value: str) -> float:
    """Max minus min over sigma_w of the seed mean (one configuration); NaN if no data."""
    result = metrics.spread(frame.assign(_all=0), keys=["_all"], value=value)
    return float(result["spread"].iloc[0]) if len(result) else float("nan")


@dataclass(frozen=True)
class Curve:
    """One line of a sigma_w sweep: its runs and how it looks."""

    label: str
    rows: pd.DataFrame
    color: str
    linestyle: str = "-"
    band: bool = True
    short: str = ""  # its name where space is scarce (Fig. 4's inset bars); "": label


def draw_curves(ax, curves: Iterable[Curve], value: str, scale: float = 1.0,
                empty: str = "no data") -> int:
    """Seed mean with 10-90 band per curve; returns how many curves had any data. A panel
    without any says `empty` (why, where the caller knows it)."""
    drawn = 0
    for curve in curves:
        band = seed_band(curve.rows, value)
        if band.empty:
            continue  # all its runs are missing: no line rather than a fake one
        x = band.index.to_numpy(dtype=float)
        ax.plot(x, band["mean"] * scale, color=curve.color, ls=curve.linestyle,
                marker="o", ms=2, label=curve.label)
        if curve.band:
            ax.fill_between(x, band["lo"] * scale, band["hi"] * scale, color=curve.color,
                            alpha=0.18, lw=0)
        drawn += 1
    if not drawn:
        no_data(ax, empty)
    return drawn


def no_data(ax, text: str = "no data") -> None:
    """Say why a panel is empty, with no y scale (matplotlib's default 0-1 would read as
    a value range of the quantity the axis names)."""
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            color=style.MISSING_COLOR, fontsize=8)


def sigma_axis(ax) -> None:
    """Label the x axis sigma_w."""
    ax.set_xlabel(r"$\sigma_w$")
