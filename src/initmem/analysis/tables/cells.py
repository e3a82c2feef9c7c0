"""Table cells: a statistic over the runs behind it, its provenance counts, and its LaTeX.

A cell knows how many runs it expected, how many are missing (no record yet), how many
diverged and, for an event such as tau_interp, how many runs reached it, so the rendered
number can never look more complete than it is:

    ??            (red) no run with a record behind the cell
    ---           the event was never reached by any run
    x^{-k}        (red) k of the cell's runs are missing; the value is over the others
    x^{dk}        k runs diverged (their best checkpoint before divergence is included)
    x^{k/n}       the event was reached by k of the n runs; the value is over those k
    x^{\\dagger}  a single-seed entry (the paper's Table 4 convention)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from initmem.analysis import metrics
from initmem.vocabulary import CELL_KEY, DIVERGED
from initmem.vocabulary import missing as is_missing

NO_DATA = r"\textcolor{red}{\textbf{??}}"
NEVER = "---"
DAGGER = r"^{\dagger}"  # inside the cell's math

LEGEND = {
    "no_data": NO_DATA + ": no run with a record behind this cell",
    "never": NEVER + ": never reached by any run",
    "missing": r"\textsuperscript{\textcolor{red}{$-k$}}: $k$ of the cell's runs are missing;"
               r" the value is over the others",
    "diverged": r"\textsuperscript{d$k$}: $k$ runs diverged (their best checkpoint before"
                r" divergence is included)",
    "partial": r"\textsuperscript{$k/n$}: reached by $k$ of $n$ runs; the value is over"
               r" those $k$",
    "single": f"${DAGGER}$: a single seed",
}


@dataclass(frozen=True)
class Cell:
    """One number of a table and the runs behind it. `key` identifies the cell (table, b,
    optimizer, config, sigma_w, lr0, l2, metric); values are in the table's unit."""

    key: dict[str, object]
    unit: str  # pct | frac | epoch | pp
    mean: float
    std: float
    n: int  # values the statistic is over
    n_runs: int  # runs with a record
    missing: tuple[str, ...] = field(default=())  # run ids without a record
    diverged: tuple[str, ...] = field(default=())
    event: bool = False  # tau-like: n < n_runs means some runs never reached it

    def tidy(self) -> dict[str, object]:  # its keys: TIDY_COLUMNS
        """The cell as a row of table.csv: its key, value, std and provenance counts."""
        return {**self.key, "unit": self.unit, "value": self.mean, "std": self.std,
                "n_seeds": self.n, "n_runs": self.n_runs, "n_missing": len(self.missing),
                "n_diverged": len(self.diverged),
                "never_reached": self.event and self.n_runs > 0 and self.n == 0}


# table.csv's columns, also of a table without cells (a config that plans none of its rows)
TIDY_COLUMNS = (*CELL_KEY, "unit", "value", "std", "n_seeds", "n_runs", "n_missing",
                "n_diverged", "never_reached")


def provenance(frame: pd.DataFrame) -> dict[str, object]:
    """Run counts of a selection of the runs table (rows of expected runs)."""
    status = frame["status"].to_numpy(dtype=object)
    ids = frame["run_id"].to_numpy(dtype=object)
    missing = is_missing(frame).to_numpy()
    return {"n_runs": int(len(status) - missing.sum()), "missing": tuple(ids[missing]),
            "diverged": tuple(ids[status == DIVERGED])}


def measure_cell(frame: pd.DataFrame, column: str, key: dict[str, object], unit: str,
                 scale: float = 1.0, event: bool = False) -> Cell:
    """Mean and seed std of `column` (times `scale`) over the runs with a value."""
    values = frame[column].dropna().astype(float) * scale
    n = len(values)
    mean = float(values.mean()) if n else math.nan
    std = float(values.std(ddof=metrics.SEED_STD_DDOF)) if n > 1 else math.nan
    return Cell(key, unit, mean, std, n, event=event, **provenance(frame))


def derived(frame: pd.DataFrame, value: float, key: dict[str, object], unit: str) -> Cell:
    """A number computed from several cells (a spread, a difference): no seed std, the
    provenance of every run behind it."""
    prov = provenance(frame)
    n = prov["n_runs"] if math.isfinite(value) else 0
    return Cell(key, unit, value, math.nan, n, **prov)


def fmt(cell: Cell, digits: int = 1, *, sign: bool = False, show_std: bool = True,
        pm: str = r"\pm ", bold: bool = False, dagger: bool = False,
        ensuremath: bool = False) -> str:
    """The cell as LaTeX: `$m \\pm s$` (or \\ensuremath{...}, usable in text and math)
    plus the markers of its provenance."""
    if cell.n_runs == 0 or (not cell.event and cell.n == 0):
        text = NO_DATA
    elif cell.n == 0:
        text = NEVER
    else:
        text = _number(cell.mean, digits, sign)
        if show_std and cell.n > 1 and math.isfinite(cell.std):
            text += f"{pm}{cell.std:.{digits}f}"
        if bold:
            text = rf"\mathbf{{{text}}}"
        text += DAGGER if dagger else ""
        text = rf"\ensuremath{{{text}}}" if ensuremath else f"${text}$"
    return text + markers(cell)


def _number(x: float, digits: int, sign: bool) -> str:
    x = 0.0 if round(x, digits) == 0 else x  # no "-0.0"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def markers(cell: Cell) -> str:
    """The cell's provenance markers (missing, diverged, k/n reached) as one LaTeX superscript."""
    marks = []
    if cell.missing:
        marks.append(rf"\textcolor{{red}}{{$-{len(cell.missing)}$}}")
    if cell.diverged:
        marks.append(f"d{len(cell.diverged)}")
    if cell.event and 0 < cell.n < cell.n_runs:
        marks.append(f"${cell.n}/{cell.n_runs}$")
    return rf"\textsuperscript{{{','.join(marks)}}}" if marks else ""


def legend(cells: list[Cell], texts: list[str]) -> list[str]:
    """The legend lines for the markers that `texts` (the rendered cells) use, and the
    table's total of missing and diverged runs."""
    joined = "\n".join(texts)
    used = [name for name, probe in (("no_data", NO_DATA), ("never", NEVER),
                                     ("single", DAGGER)) if probe in joined]
    if any(c.missing for c in cells):
        used.append("missing")
    if any(c.diverged for c in cells):
        used.append("diverged")
    if any(c.event and 0 < c.n < c.n_runs for c in cells):
        used.append("partial")
    lines = [LEGEND[name] for name in used]
    n_missing = len({r for c in cells for r in c.missing})
    n_diverged = len({r for c in cells for r in c.diverged})
    if n_missing:
        lines.insert(0, rf"\textcolor{{red}}{{\textbf{{{n_missing} runs behind this table"
                        r" are missing: partial results}}")
    if n_diverged:
        lines.append(f"{n_diverged} runs behind this table diverged")
    return lines
