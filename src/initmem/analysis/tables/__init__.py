"""Tables 1-7 of the paper as LaTeX, from the aggregated runs table (Table 1: the config).

Each table is declared in initmem.plan.artifacts (number, sigma_w, family roles,
builder, template, report section and caption). Its builder (`rows`) selects its runs by
their spec columns, computes its cells (`cells`: value, seed std and provenance) and hands
them to its Jinja template in src/initmem/analysis/templates/ (delimiters \\VAR{...},
\\BLOCK{...}, \\#{...}; undefined names are errors). Rows and columns are the paper's,
optimizers named by the config, rows only where the config plans runs (a table that plans
none says so instead of a tabular); a cell without runs shows a red ?? and partial or
diverged cells carry markers explained in the table's footnote. Any generated (synthetic)
record in the runs table puts a red SYNTHETIC mark on every table. Beside each table.tex,
table.csv holds its cells, one per row (what the scorecard compares, and the readable
table of the HTML report).

The rendered LaTeX needs the packages booktabs, xcolor and graphicx.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import pandas as pd

from initmem.analysis.tables.cells import TIDY_COLUMNS, Cell, legend
from initmem.errors import InputError
from initmem.markup import tex_escape
from initmem.plan import artifacts
from initmem.plan.grid import load_config
from initmem.vocabulary import SYNTHETIC_MARK, generated

TEMPLATES = Path(__file__).parent.parent / "templates"


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
        """The run ids missing behind any of its cells, sorted."""
        return sorted({r for c in self.cells for r in c.missing})


def environment() -> jinja2.Environment:
    """Jinja with LaTeX-safe delimiters and a `tex` escaping filter; an undefined name
    raises."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        block_start_string=r"\BLOCK{", block_end_string="}",
        variable_start_string=r"\VAR{", variable_end_string="}",
        comment_start_string=r"\#{", comment_end_string="}",
        line_comment_prefix="%#", trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False, undefined=jinja2.StrictUndefined)
    env.filters["tex"] = tex_escape
    return env


def build(number: int, runs: pd.DataFrame | None, config: dict) -> Table:
    """The table's context and cells from the runs table and the experiment config (Table 1
    from the config alone)."""
    declared = artifacts.table(number)
    context, cells, texts = declared.build()(runs, config, declared)
    return Table(number, context, cells, texts)


def render(table: Table, synthetic: bool) -> str:
    """The table as LaTeX: its template, the cells' footnote, and the SYNTHETIC mark if asked."""
    declared = artifacts.table(table.number)
    # a table of the runs with no cell: its config plans none of its rows
    context = {**table.context, "number": table.number, "synthetic": synthetic,
               "planned": bool(table.cells) or not declared.reads_runs,
               "synthetic_mark": SYNTHETIC_MARK, "notes": legend(table.cells, table.texts)}
    return environment().get_template(declared.template).render(**context)


def is_synthetic(runs: pd.DataFrame) -> bool:
    """Whether any record of the runs table is generated (synthetic)."""
    return bool(generated(runs).any())


def cells_frame(table: Table) -> pd.DataFrame:
    """The table's cells as a tidy frame, one row per number (CELL_KEY, value, std, counts)."""
    return pd.DataFrame([c.tidy() for c in table.cells], columns=list(TIDY_COLUMNS))


def write_table(number: int, runs_path: str | Path | None, config_path: str | Path,
                out_path: str | Path, *, strict: bool = False) -> Path:
    """Render table `number` to `out_path` (.tex) and its cells to the .csv beside it.
    strict=True: missing runs are an error that names them, instead of marked cells."""
    runs = None if runs_path is None else pd.read_parquet(runs_path)
    if runs is None and artifacts.table(number).reads_runs:
        raise InputError(f"table {number} is computed from the runs: pass --runs")
    table = build(number, runs, load_config(config_path))
    if strict and table.missing:
        shown = ", ".join(table.missing[:20])
        more = f" and {len(table.missing) - 20} more" if len(table.missing) > 20 else ""
        raise PartialResultsError(f"table {number}: {len(table.missing)} runs are missing: "
                                  f"{shown}{more}")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(table, runs is not None and is_synthetic(runs)))
    cells_frame(table).to_csv(out.with_suffix(".csv"), index=False)
    return out


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem table`."""
    parser.add_argument("number", type=int, choices=list(artifacts.TABLES),
                        help="the paper's table number")
    parser.add_argument("--runs", help="results/aggregate/runs.parquet (tables 2-7)")
    parser.add_argument("--config", required=True,
                        help="the experiment config (results/config.yaml): optimizer names")
    parser.add_argument("--out", required=True,
                        help="output .tex file; its cells go to the .csv beside it")
    parser.add_argument("--strict", action="store_true",
                        help="fail, naming them, when runs behind the table are missing")


def main(args: argparse.Namespace) -> int:
    """`initmem table`: render one of Tables 1-7 and write its cells beside it."""
    write_table(args.number, args.runs, args.config, args.out, strict=args.strict)
    return 0
