"""Tables 1-7 of the paper as LaTeX, from the aggregated runs table (Table 1: the config).

Each table has a builder that selects its runs by their spec columns, computes its cells
(initmem.cells: value, seed std and provenance) and hands them to its Jinja template in
src/initmem/templates/ (delimiters \\VAR{...}, \\BLOCK{...}, \\#{...}; undefined names
are errors). Rows and columns are the paper's; a cell without runs shows a red ?? and
partial or diverged cells carry markers explained in the table's footnote. Any generated
(synthetic) record in the runs table puts a red SYNTHETIC mark on every table.

The rendered LaTeX needs the packages booktabs, xcolor and graphicx.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import pandas as pd
import yaml

from . import table_rows
from .cells import Cell, legend
from .errors import InputError

TABLES = (1, 2, 3, 4, 5, 6, 7)
TEMPLATES = Path(__file__).parent / "templates"
SYNTHETIC_MARK = r"\textcolor{red}{\textbf{SYNTHETIC DATA --- NOT RESULTS}}"


class PartialResultsError(InputError):
    """A table was asked for in strict mode while some of its runs are missing."""


@dataclass
class Table:
    """What a template renders: its context and the cells behind it."""

    number: int
    context: dict[str, object]
    cells: list[Cell] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # every rendered cell

    @property
    def missing(self) -> list[str]:
        return sorted({r for c in self.cells for r in c.missing})


def environment() -> jinja2.Environment:
    """Jinja with LaTeX-safe delimiters; an undefined name raises."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        block_start_string=r"\BLOCK{", block_end_string="}",
        variable_start_string=r"\VAR{", variable_end_string="}",
        comment_start_string=r"\#{", comment_end_string="}",
        line_comment_prefix="%#", trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False, undefined=jinja2.StrictUndefined)


def build(number: int, runs: pd.DataFrame, config: dict | None = None) -> Table:
    """The table's context and cells (Table 1 needs the config, the others the runs)."""
    if number not in TABLES:
        raise InputError(f"table {number!r} is not allowed; tables are {TABLES}")
    if number == 1:
        if config is None:
            raise InputError("table 1 is rendered from the config: pass --config")
        return Table(1, table_rows.optimizer_settings(config))
    context, cells, texts = table_rows.BUILDERS[number](runs)
    return Table(number, context, cells, texts)


def render(table: Table, synthetic: bool) -> str:
    context = {**table.context, "number": table.number, "synthetic": synthetic,
               "synthetic_mark": SYNTHETIC_MARK, "notes": legend(table.cells, table.texts)}
    return environment().get_template(f"table{table.number}.tex.j2").render(**context)


def is_synthetic(runs: pd.DataFrame) -> bool:
    return bool(runs["record_source"].astype("string").eq("generated").any())


def cells_frame(number: int, runs: pd.DataFrame) -> pd.DataFrame:
    """The table's cells as a tidy frame (one row per number; for the scorecard)."""
    return pd.DataFrame([c.tidy() for c in build(number, runs).cells])


def write_table(number: int, runs_path: str | Path | None, epochs_path: str | Path | None,
                config_path: str | Path | None, out_path: str | Path, *,
                strict: bool = False) -> Path:
    """Render table `number` to `out_path`. strict=True: missing runs are an error that
    names them, instead of marked cells. The epochs table is not needed by Tables 1-7
    (accepted so that every analysis stage has one signature)."""
    del epochs_path
    runs = None if runs_path is None else pd.read_parquet(runs_path)
    if runs is None and number != 1:
        raise InputError(f"table {number} is computed from the runs: pass --runs")
    config = None
    if config_path is not None:
        with open(config_path) as fh:
            config = yaml.safe_load(fh)
    table = build(number, runs, config)
    if strict and table.missing:
        shown = ", ".join(table.missing[:20])
        more = f" and {len(table.missing) - 20} more" if len(table.missing) > 20 else ""
        raise PartialResultsError(f"table {number}: {len(table.missing)} runs are missing: "
                                  f"{shown}{more}")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(table, runs is not None and is_synthetic(runs)))
    return out


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("number", type=int, choices=TABLES, help="the paper's table number")
    parser.add_argument("--runs", help="results/aggregate/runs.parquet (tables 2-7)")
    parser.add_argument("--epochs", help="results/aggregate/epochs.parquet (not read)")
    parser.add_argument("--config", help="config.yaml (required for table 1)")
    parser.add_argument("--out", required=True, help="output .tex file")
    parser.add_argument("--strict", action="store_true",
                        help="fail, naming them, when runs behind the table are missing")


def run(args: argparse.Namespace) -> int:
    write_table(args.number, args.runs, args.epochs, args.config, args.out,
                strict=args.strict)
    return 0
