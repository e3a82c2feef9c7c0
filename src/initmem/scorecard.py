"""Reproduction scorecard: every published number of Tables 2-7 and the prose against ours.

Published numbers: paper/published/*.csv, one tidy CSV per table (text.csv: the prose),
one row per printed number, columns
    table, b, optimizer, config, sigma_w, lr0, l2   the cell (empty: not an axis there;
        config is the architecture or configuration: resnet9, r9_avgpool, resnet56,
        resnet110, bn_aug, ln_aug, bn_noaug, long_sgd, best_recipe)
    metric, unit      unit: pct (%), frac (fraction), pp (points), epoch, clock
    value, std        as printed (std empty where none is given; value empty: "---")
    n_seeds, note     seeds as the paper states; "never reached", "single seed", ...
    macro             text.csv only: the initmem.macros quote that reproduces it
Reproduced numbers come from the same code as our tables (initmem.table_rows) and
macros (initmem.macros), so a cell here is exactly the cell printed there.

Verdict of a cell, with delta = reproduced - published:
    agrees     |delta| <= tolerance = max(2 x published seed std, floor), where floor is
               1 pp for pct/pp, 0.01 for frac, max(1, 10% of the value) for epochs and
               5% of the value for clocks; a published "---" (never reached) agrees when
               ours never reached it either
    disagrees  otherwise
    missing    no reproduced value: none of the cell's runs has a record
A reproduced value over partly missing runs is judged but flagged `partial`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import macros, tables
from .errors import InputError

KEYS = ["table", "b", "optimizer", "config", "sigma_w", "lr0", "l2", "metric"]
FLOORS = {"pct": 1.0, "pp": 1.0, "frac": 0.01}
VERDICTS = ("agrees", "disagrees", "missing")


def read_published(folder: str | Path) -> pd.DataFrame:
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


def reproduced(runs: pd.DataFrame, tables_needed: set[str]) -> pd.DataFrame:
    """Our cells of the tables in `tables_needed`, with normalised keys."""
    parts = [tables.cells_frame(int(t), runs) for t in sorted(tables_needed) if t != "text"]
    cells = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=KEYS)
    for key in KEYS:
        cells[key] = cells[key].map(_norm)
    return cells.drop_duplicates(KEYS)


def tolerance(unit: str, published: float, std: float) -> float:
    floor = {"epoch": max(1.0, 0.1 * abs(published)),
             "clock": 0.05 * abs(published)}.get(unit, FLOORS.get(unit, 0.0))
    return max(2 * std, floor) if math.isfinite(std) else floor


def verdict(published: float, never: bool, value: float, never_ours: bool,
            tol: float) -> str:
    if never:
        return "agrees" if never_ours else ("missing" if math.isnan(value) else "disagrees")
    if math.isnan(value):
        return "disagrees" if never_ours else "missing"
    return "agrees" if abs(value - published) <= tol else "disagrees"


def score(runs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """One row per published number: ours, delta, delta in seed stds, verdict."""
    pub = published.copy()
    for key in KEYS:
        pub[key] = pub[key].map(_norm)
    ours = reproduced(runs, set(pub["table"]))
    card = pub.merge(ours[[*KEYS, "value", "std", "n_seeds", "n_missing", "never_reached"]],
                     on=KEYS, how="left", suffixes=("_published", ""))
    quotes = macros.compute(runs)
    is_text = card["table"].eq("text")
    unknown = sorted(set(card.loc[is_text, "macro"]) - set(quotes.index))
    if unknown:
        raise InputError(f"published text.csv names macros {unknown}; initmem.macros has "
                         f"{', '.join(quotes.index)}")
    for col in ("value", "n_missing"):
        card.loc[is_text, col] = card.loc[is_text, "macro"].map(quotes[col])
    card["never_reached"] = card["never_reached"].astype("boolean").fillna(False)
    card["value"] = pd.to_numeric(card["value"])
    card["delta"] = card["value"] - card["value_published"]
    std = card["std_published"]
    card["delta_std_units"] = (card["delta"] / std).where(std > 0)
    card["tolerance"] = [tolerance(u, p, s) for u, p, s in
                         zip(card["unit"], card["value_published"], std, strict=True)]
    card["verdict"] = [verdict(p, "never reached" in note, v, bool(n), t) for p, note, v, n, t in
                       zip(card["value_published"], card["note"], card["value"].fillna(np.nan),
                           card["never_reached"], card["tolerance"], strict=True)]
    card["partial"] = card["n_missing"].fillna(0).gt(0)
    return card.rename(columns={"value_published": "published", "std_published":
                                "published_std", "n_seeds_published": "published_n_seeds",
                                "value": "reproduced", "std": "reproduced_std",
                                "n_seeds": "reproduced_n_seeds"})


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Counts of agrees / disagrees / missing (and partial) per table."""
    counts = pd.crosstab(card["table"], card["verdict"]).reindex(columns=list(VERDICTS),
                                                                   fill_value=0)
    counts["partial"] = card.groupby("table")["partial"].sum()
    counts["cells"] = card.groupby("table").size()
    order = sorted(counts.index, key=lambda t: (t == "text", t))
    return counts.loc[order].reset_index()


def render_tex(card: pd.DataFrame, synthetic: bool) -> str:
    rows = summary(card)
    names = {t: ("Prose" if t == "text" else f"Table~\\ref{{tab:table{t}}}")
             for t in rows["table"]}
    totals = {c: int(rows[c].sum()) for c in [*VERDICTS, "partial", "cells"]}
    return tables.environment().get_template("scorecard.tex.j2").render(
        rows=rows.to_dict("records"), names=names, totals=totals, synthetic=synthetic,
        synthetic_mark=tables.SYNTHETIC_MARK)


def write_scorecard(runs_path: str | Path, published_dir: str | Path,
                    out_csv: str | Path, out_tex: str | Path) -> pd.DataFrame:
    runs = pd.read_parquet(runs_path)
    card = score(runs, read_published(published_dir))
    for path in (out_csv, out_tex):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    card.to_csv(out_csv, index=False)
    Path(out_tex).write_text(render_tex(card, tables.is_synthetic(runs)))
    return card


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, help="results/aggregate/runs.parquet")
    parser.add_argument("--published", required=True, help="folder of the paper's numbers "
                        "(paper/published)")
    parser.add_argument("--out-csv", required=True, help="every cell (scorecard.csv)")
    parser.add_argument("--out-tex", required=True, help="summary table (scorecard.tex)")


def run(args: argparse.Namespace) -> int:
    card = write_scorecard(args.runs, args.published, args.out_csv, args.out_tex)
    counts = card["verdict"].value_counts()
    print(", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + f" of {len(card)} cells")
    return 0
