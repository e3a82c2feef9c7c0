"""Reproduction scorecard: every published number of Tables 2-7 and the prose against ours.

Published numbers: paper/published/*.csv, one tidy CSV per table (text.csv: the prose),
one row per printed number, columns
    table, b, optimizer, config, sigma_w, lr0, l2   the cell (empty: not an axis there;
        config is the architecture (initmem.plan.architectures) or configuration:
        resnet9, r9_avgpool, resnet56, resnet110, bn_aug, ln_aug, bn_noaug, long_sgd,
        best_recipe)
    metric, unit      unit: pct (%), frac (fraction), pp (points), epoch, clock
    value, std        as printed (std empty where none is given; value empty: "---")
    n_seeds, note     seeds as the paper states; "never reached", "single seed", ...
    macro             text.csv only: the initmem.macros quote that reproduces it
Reproduced numbers are the cells our tables wrote (results/tables/table{N}.csv, beside
each table.tex) and the macros (initmem.analysis.macros), so a cell here is exactly the
cell printed there.

Verdict of a cell, with delta = reproduced - published:
    agrees            |delta| <= tolerance = max(2 x published seed std, floor), where floor
                      is 1 pp for pct/pp, 0.01 for frac, max(1, 10% of the value) for epochs
                      and 5% of the value for clocks; a published "---" (never reached)
                      agrees when ours never reached it either
    disagrees         otherwise
    missing           runs of the config are behind the cell, but none has a record yet
    not in config     no run of this config is behind the cell (a cut-down config)
    not in the paper  a cell of ours for an optimizer or a network the paper did not run
                      (no published number to compare; listed so that an extension's
                      cells are seen)
A reproduced value over partly missing runs is judged but flagged `partial`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.analysis import macros, tables
from initmem.errors import InputError
from initmem.plan import artifacts
from initmem.plan.architectures import ARCHS
from initmem.plan.grid import load_config
from initmem.vocabulary import CELL_KEY, SYNTHETIC_MARK

KEYS = list(CELL_KEY)
FLOORS = {"pct": 1.0, "pp": 1.0, "frac": 0.01}
VERDICTS = ("agrees", "disagrees", "missing", "not in config", "not in the paper")
JUDGED = VERDICTS[:3]


def read_published(folder: str | Path) -> pd.DataFrame:
    """The paper's numbers as transcribed (every *.csv of the folder), value and std as numbers."""
    files = sorted(Path(folder).glob("*.csv"))
    if not files:
        raise InputError(f"--published {folder}: no *.csv files there; it must hold the "
                         "transcribed tables (paper/published)")
    frame = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files])
    for col in ("value", "std"):
        frame[col] = pd.to_numeric(frame[col].replace("", np.nan))
    return frame.reset_index(drop=True)


def _norm(value: object) -> str:
    """One spelling per key value: 1e-3 == 0.001, 16 == 16.0, None == ''."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return ""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def read_cells(tables_dir: str | Path) -> pd.DataFrame:
    """Our cells of Tables 2-7 as the tables wrote them (table{N}.csv), keys normalised."""
    files = [Path(tables_dir) / f"{t.name}.csv" for t in artifacts.TABLES.values()
             if t.reads_runs]
    absent = [str(f) for f in files if not f.exists()]
    if absent:
        raise InputError(f"--tables {tables_dir}: {', '.join(absent)} missing; render the "
                         "tables first (snakemake tables)")
    cells = pd.concat([pd.read_csv(f, dtype={k: str for k in KEYS}, keep_default_na=False,
                                   na_values={"value": [""], "std": [""]}) for f in files],
                      ignore_index=True)
    for key in KEYS:
        cells[key] = cells[key].map(_norm)
    for col in ("n_runs", "n_missing", "n_seeds"):
        cells[col] = pd.to_numeric(cells[col])
    cells["never_reached"] = cells["never_reached"].astype(str).eq("True")
    return cells.drop_duplicates(KEYS)


def tolerance(unit: str, published: float, std: float) -> float:
    """How far a reproduced number may lie from the published one and agree: max(2 x the
    published seed std, the unit's floor)."""
    floor = {"epoch": max(1.0, 0.1 * abs(published)),
             "clock": 0.05 * abs(published)}.get(unit, FLOORS.get(unit, 0.0))
    return max(2 * std, floor) if math.isfinite(std) else floor


def verdict(published: float, never: bool, value: float, never_ours: bool, tol: float,
            n_missing: float) -> str:
    """The verdict of one published number (see the module docstring)."""
    if math.isnan(value) and not never_ours:  # no records yet, or none the config plans
        return "missing" if n_missing > 0 else "not in config"
    if never:
        return "agrees" if never_ours else "disagrees"
    if math.isnan(value):
        return "disagrees"
    return "agrees" if abs(value - published) <= tol else "disagrees"


def score(runs: pd.DataFrame, published: pd.DataFrame, ours: pd.DataFrame,
          config: dict | None = None) -> pd.DataFrame:
    """One row per published number (ours, delta, delta in seed stds, verdict), then one
    per cell of ours for an optimizer or network the paper did not run ("not in the
    paper")."""
    pub = published.copy()
    for key in KEYS:
        pub[key] = pub[key].map(_norm)
    columns = ["value", "std", "n_seeds", "n_runs", "n_missing", "never_reached"]
    card = pub.merge(ours[[*KEYS, *columns]], on=KEYS, how="left",
                     suffixes=("_published", ""))
    quotes = macros.compute(runs, config=config)
    is_text = card["table"].eq("text")
    unknown = sorted(set(card.loc[is_text, "macro"]) - set(quotes.index))
    if unknown:
        raise InputError(f"published text.csv names macros {unknown}; initmem.analysis."
                         f"macros has {', '.join(quotes.index)}")
    for col in ("value", "n_missing"):
        card.loc[is_text, col] = card.loc[is_text, "macro"].map(quotes[col])
    card["never_reached"] = card["never_reached"].astype("boolean").fillna(False)
    card["value"] = pd.to_numeric(card["value"])
    card["delta"] = card["value"] - card["value_published"]
    std = card["std_published"]
    card["delta_std_units"] = (card["delta"] / std).where(std > 0)
    card["tolerance"] = [tolerance(u, p, s) for u, p, s in
                         zip(card["unit"], card["value_published"], std, strict=True)]
    card["verdict"] = [
        verdict(p, "never reached" in note, v, bool(n), t, m)
        for p, note, v, n, t, m in zip(
            card["value_published"], card["note"], card["value"].fillna(np.nan),
            card["never_reached"], card["tolerance"], card["n_missing"].fillna(0),
            strict=True)]
    card["partial"] = card["n_missing"].fillna(0).gt(0) & card["verdict"].isin(JUDGED[:2])
    planned = (ours["n_runs"] + ours["n_missing"]).gt(0)  # cells this config runs
    network = ours["config"].isin(ARCHS)  # a row of a declared network (Table 5)
    extension = ours[planned & (_not_in(ours, pub, "optimizer")
                                | network & _not_in(ours, pub, "config"))]
    extra = extension.assign(verdict="not in the paper", partial=False)
    card = pd.concat([card, extra[[c for c in extra.columns if c in card.columns
                                   or c == "verdict"]]], ignore_index=True)
    return card.rename(columns={"value_published": "published", "std_published":
                                "published_std", "n_seeds_published": "published_n_seeds",
                                "value": "reproduced", "std": "reproduced_std",
                                "n_seeds": "reproduced_n_seeds"})


def _not_in(ours: pd.DataFrame, published: pd.DataFrame, key: str) -> pd.Series:
    """Cells of ours whose `key` (an optimizer, or a network) the paper has no number
    for."""
    return ~ours[key].isin(set(published[key])) & ours[key].ne("")


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Counts of agrees / disagrees / missing (and partial) per table."""
    counts = pd.crosstab(card["table"], card["verdict"]).reindex(columns=list(VERDICTS),
                                                                   fill_value=0)
    counts["partial"] = card.groupby("table")["partial"].sum()
    counts["cells"] = card.groupby("table").size()
    order = sorted(counts.index, key=lambda t: (t == "text", t))
    return counts.loc[order].reset_index()


def render_tex(card: pd.DataFrame, synthetic: bool) -> str:
    """The scorecard's summary per table as LaTeX, marked when the runs are synthetic."""
    rows = summary(card)
    names = {t: ("Prose" if t == "text" else f"Table~\\ref{{tab:table{t}}}")
             for t in rows["table"]}
    totals = {c: int(rows[c].sum()) for c in [*VERDICTS, "partial", "cells"]}
    rows = rows.rename(columns={"not in config": "not_in_config",
                                "not in the paper": "not_in_paper"})
    totals["not_in_config"] = totals.pop("not in config")
    totals["not_in_paper"] = totals.pop("not in the paper")
    return tables.environment().get_template("scorecard.tex.j2").render(
        rows=rows.to_dict("records"), names=names, totals=totals, synthetic=synthetic,
        synthetic_mark=SYNTHETIC_MARK)


def write_scorecard(runs_path: str | Path, tables_dir: str | Path, published_dir: str | Path,
                    out_csv: str | Path, out_tex: str | Path,
                    config_path: str | Path | None = None) -> pd.DataFrame:
    """Score our tables' cells and the macros against the published numbers; write every cell
    (CSV) and the summary (LaTeX). The config says which family plays each role the
    macros read (without one: the family of each role's name)."""
    runs = pd.read_parquet(runs_path)
    config = load_config(config_path) if config_path is not None else None
    card = score(runs, read_published(published_dir), read_cells(tables_dir), config)
    for path in (out_csv, out_tex):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    card.to_csv(out_csv, index=False)
    Path(out_tex).write_text(render_tex(card, tables.is_synthetic(runs)))
    return card


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem scorecard`."""
    parser.add_argument("--runs", required=True, help="results/aggregate/runs.parquet")
    parser.add_argument("--tables", required=True,
                        help="folder of the rendered tables' cells (results/tables)")
    parser.add_argument("--published", required=True, help="folder of the paper's numbers "
                        "(paper/published)")
    parser.add_argument("--out-csv", required=True, help="every cell (scorecard.csv)")
    parser.add_argument("--out-tex", required=True, help="summary table (scorecard.tex)")
    parser.add_argument("--config", default=None, help="the runs' config: which family plays "
                        "each role the quoted numbers read (default: each role's own name)")


def tally(verdicts: pd.Series, order: tuple[str, ...], noun: str) -> str:
    """'3 agrees, 0 disagrees, ... of 7 cells': the counts of each verdict, in order."""
    counts = verdicts.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in order) + f" of {len(verdicts)} {noun}"


def main(args: argparse.Namespace) -> int:
    """`initmem scorecard`: write the scorecard and print how many cells have each verdict."""
    card = write_scorecard(args.runs, args.tables, args.published, args.out_csv, args.out_tex,
                           args.config)
    print(tally(card["verdict"], VERDICTS, "cells"))
    return 0
