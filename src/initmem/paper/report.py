"""The pages of the HTML report (`snakemake --report`) that Snakemake cannot draw itself.

Snakemake shows PNG, PDF and HTML files; Tables 1-7, the scorecard and the claims are
LaTeX and CSV. This module writes them as small self-contained HTML pages (a table's cells
pivoted back into rows and columns), plus the run-status page: the config the report came
from, its run counts and its provenance marks, the PDF's (initmem.paper.provenance_marks:
DEMO, FROM AN ARCHIVE, INCOMPLETE, SYNTHETIC). The status rule writes the marks to
marks.json; every other page shows them at its top.

The workflow's report rules call it as
    initmem report status --runs RUNS --config-name config/demo.yaml [--archive A]
                          [--config results/config.yaml] --out status.html --marks marks.json
    initmem report table N --config results/config.yaml [--cells tables/tableN.csv]
                          --marks marks.json --out tableN.html
    initmem report csv FILE.csv --title TITLE --marks marks.json --out FILE.html
    initmem report front results/figures/fig1.png --out front.rst
    initmem report check report.html --screenshot shot.png --expect NAME ...
    initmem report locked results/report/.lock -- make report-unlocked
        # `make report`'s whole recipe under one lock: a second `make report` is refused
        # before it rewrites the archived config the first one's Snakemake calls read
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import html
import json
import math
import os
import re
import subprocess
from pathlib import Path

import pandas as pd

from initmem import checkout, untrusted
from initmem.analysis.tables import build
from initmem.errors import InputError
from initmem.markup import TEX_SPECIALS
from initmem.paper import browser, provenance_marks, run_counts
from initmem.plan import artifacts
from initmem.plan.architectures import ARCH_LABELS
from initmem.plan.grid import load_config
from initmem.plan.optimizers import optimizer_display
from initmem.records import environment
from initmem.records import status as sweep
from initmem.records.archive import read_environment
from initmem.vocabulary import (
    COMPLETED,
    CONFIG_LABELS,
    DIVERGED,
    EARLY_STOPPED,
    MISSING,
    missing,
)

# A cell's digits by unit, as the LaTeX tables print them.
DIGITS = {"frac": 3, "pct": 1, "pp": 1, "epoch": 1}
NO_RECORD, NEVER_REACHED = "??", "—"
KEY_LABELS = {"b": "b", "optimizer": "Optimizer", "config": "Network", "lr0": "η0",
              "l2": "λ_L2", "metric": "", "sigma_w": "σ_w"}
METRIC_LABELS = {"tau_interp": "τ_interp (epoch)", "tau_best": "τ_best (epoch)",
                 "val_acc_interp": "Val acc at τ_interp", "val_acc_best": "Val acc at τ_best",
                 "val_acc_last": "Val acc, last epoch", "repair_gap": "Δ_repair",
                 "test_acc": "Test acc (%)", "train_acc": "Train acc (%)",
                 "train_acc_mean": "Train acc, mean over σ_w (%)", "spread": "Spread (pp)",
                 "abs_delta": "|Δ| (pp)"}
LEGEND = (f"<p>Mean ± std over seeds. {NO_RECORD}: no run of this config has a record for the "
          f"cell; {NEVER_REACHED}: no run reached the event (interpolation); −k: k of the "
          "cell's runs have no record.</p>")
STYLE = """body{font-family:sans-serif;margin:1em;color:#222}
table{border-collapse:collapse;font-size:0.9em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.key,th.key{text-align:left}
.mark{border:2px solid #c00;background:#fdeaea;color:#c00;font-weight:bold;
padding:6px;margin:6px 0}.missing{color:#c00;font-weight:bold}"""


def status_counts(runs: pd.DataFrame) -> dict[str, int]:
    """run_counts (expected, missing, generated) plus each status a record can have."""
    return {**run_counts(runs),
            **{name: int(runs["status"].eq(name).sum()) for name in (COMPLETED, EARLY_STOPPED,
                                                                      DIVERGED)}}


def page(title: str, marks: list[str], body: str) -> str:
    """A self-contained page: the marks first, then the body."""
    banners = "".join(f'<p class="mark">{html.escape(m)}</p>' for m in marks)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
            f"</title><style>{STYLE}</style></head><body><h2>{html.escape(title)}</h2>"
            f"{banners}{body}</body></html>\n")


def status_page(runs: pd.DataFrame, config_name: str, marks: list[str],
                config_text: str = "", sweep_text: str = "", environment_text: str = "") -> str:
    """The run-status page; `sweep_text`: `initmem status` of a live sweep's records;
    `environment_text`: how this environment compares with an archive's
    (records.environment.describe), a warning box where they differ."""
    counts = status_counts(runs)
    rows = [("expected runs", counts["expected"]), ("completed", counts[COMPLETED]),
            ("early stopped", counts[EARLY_STOPPED]), ("diverged", counts[DIVERGED]),
            ("missing (no record)", counts["missing"]),
            ("generated (synthetic) records", counts["generated"])]
    summary = "".join(f'<tr><td class="key">{name}</td><td>{n}</td></tr>' for name, n in rows)
    status = runs["status"].where(~missing(runs), MISSING)
    by_family = pd.crosstab(runs["family"], status)
    absent = runs.loc[missing(runs), "run_id"].tolist()
    shown = "".join(f"<li>{html.escape(r)}</li>" for r in absent[:50])
    more = f"<p>and {len(absent) - 50} more</p>" if len(absent) > 50 else ""
    config = (f"<details><summary>The experiment config (what decides the runs)</summary>"
              f"<pre>{html.escape(config_text)}</pre></details>" if config_text else "")
    warned = ' class="mark"' if environment_text.startswith("warning") else ""
    environment_line = (f"<p{warned}>{html.escape(environment_text)}</p>"
                        if environment_text else "")
    body = (f"<p>Config: <code>{html.escape(config_name)}</code></p>{environment_line}"
            f"{config}"
            f"<table>{summary}</table><h3>By family</h3>{by_family.to_html()}"
            + (f"<h3>Sweep status (<code>initmem status</code>: trainers, device-hours)</h3>"
               f"<pre>{html.escape(sweep_text)}</pre>" if sweep_text else "")
            + (f"<h3>Runs without a record</h3><ul>{shown}</ul>{more}" if absent else ""))
    return page("Run status", marks, body)


def cell_text(row: pd.Series) -> str:
    """A cell as the LaTeX table prints it: mean ± seed std, ?? without records, — when
    no run reached the event, a red −k when k runs are missing."""
    if row["n_runs"] == 0 or (row["n_seeds"] == 0 and not row["never_reached"]):
        return f'<span class="missing">{NO_RECORD}</span>'
    if row["never_reached"]:
        return NEVER_REACHED
    digits = DIGITS.get(row["unit"], 1)
    text = f"{row['value']:.{digits}f}"
    if row["n_seeds"] > 1 and math.isfinite(row["std"]):
        text += f" ± {row['std']:.{digits}f}"
    if row["n_missing"]:
        text += f'<sup class="missing">−{int(row["n_missing"])}</sup>'
    return text


def key_text(value: object) -> str:
    """A key value as the page shows it: floats as %g, NaN as empty."""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:g}"
    return str(value)


def readable(labels: pd.DataFrame, optimizers: dict[str, str]) -> pd.DataFrame:
    """Names as the paper prints them: optimizer labels of the config, architectures and
    configurations, metrics with their units."""
    names = {"optimizer": optimizers, "config": {**ARCH_LABELS, **CONFIG_LABELS},
             "metric": METRIC_LABELS}
    labels = labels.apply(lambda col: col.map(lambda v: names.get(col.name, {}).get(v, v)))
    return labels.rename(columns=KEY_LABELS)


def cells_table(cells: pd.DataFrame, optimizers: dict[str, str]) -> str:
    """A table's tidy cells (one row per number) back as rows and columns, in the order
    the table lists them: rows are the key columns that vary (b, optimizer, config, lr0,
    l2), columns metric x sigma_w; optimizers named by their labels."""
    if cells.empty:
        return "<p>No cells.</p>"
    keys = [k for k in ("b", "optimizer", "config", "lr0", "l2") if cells[k].notna().any()]
    columns = [k for k in ("metric", "sigma_w") if cells[k].notna().any()]
    # the cells' own HTML goes in unescaped (to_html(escape=False)): the names as text
    labels = readable(cells[keys + columns].map(key_text), optimizers).map(html.escape)
    keys, columns = [KEY_LABELS[k] for k in keys], [KEY_LABELS[k] for k in columns]
    labels["text"] = cells.apply(cell_text, axis=1)
    rows = list(dict.fromkeys(labels[keys].itertuples(index=False, name=None)))
    cols = list(dict.fromkeys(labels[columns].itertuples(index=False, name=None)))
    metrics = list(dict.fromkeys(col[0] for col in cols))
    cols.sort(key=lambda col: metrics.index(col[0]))  # each metric's sigma_w side by side
    wide = labels.set_index(keys + columns)["text"].unstack(columns).reindex(
        index=pd.MultiIndex.from_tuples(rows, names=keys),
        columns=pd.MultiIndex.from_tuples(cols, names=columns))
    return wide.to_html(escape=False, na_rep="") + LEGEND


LATEX_PLAIN = [(r"\$", ""), (r"\\beta", "β"), (r"\\lambda", "λ"), (r"\\eta", "η"),
               (r"~", " "), (r"---", "—"), (r"\{=\}", "="), (r"_", ""), (r"\\[a-zA-Z]+", ""),
               (r"[{}]", "")]


# What tex_escape wrote: each back to its character, untouched by LATEX_PLAIN.
ESCAPED = re.compile("(" + "|".join(map(re.escape, sorted(TEX_SPECIALS.values(), key=len,
                                                           reverse=True))) + ")")
UNESCAPED = {tex: char for char, tex in TEX_SPECIALS.items()}


def plain(tex: str) -> str:
    """Table 1's few LaTeX snippets ($10^{-3}$, $\\beta_2 = 0.999$, ---) as text; escaped
    text (an archive's notes, a hyperparameter's name) as it was typed."""
    parts = ESCAPED.split(tex)  # odd positions: escapes
    for i in range(0, len(parts), 2):
        for pattern, text in LATEX_PLAIN:
            parts[i] = re.sub(pattern, text, parts[i])
    return "".join(UNESCAPED.get(part, part) if i % 2 else part
                   for i, part in enumerate(parts))


def settings_table(config: dict) -> str:
    """Table 1 from the config, as initmem.analysis.tables builds it."""
    context = build(1, None, config).context
    frame = pd.DataFrame(context["rows"])
    # the label is text already; Keras' names keep their underscores
    shown = ~frame.columns.isin(["label", "hyperparameters"])
    frame.loc[:, shown] = frame.loc[:, shown].map(plain)
    frame.columns = ["Optimizer", "η0", "Momentum", "Weight decay", "Notes",
                     "Hyperparameters (Keras' names)"]
    note = (f"<p>η0 = {plain(context['lr0'])} with cosine decay (α = {context['alpha']}) "
            f"over {context['epochs']} epochs; Adam-family β1 = {context['beta1']}, "
            f"β2 = {context['beta2']} (Keras defaults).</p>")
    return frame.to_html(index=False, escape=True) + note


def front_figure(png: Path) -> str:
    """The report's front-page figure as reStructuredText that workflow/report/workflow.rst
    includes: raw HTML with the PNG inline (Snakemake's `embeddedfigure` links the file
    instead, which a report opened elsewhere cannot show)."""
    if not png.exists():
        raise InputError(f"{png}: missing (the report's front-page figure)")
    # docutils refuses lines over 10,000 characters; a URL's newlines are dropped by the
    # browser (WHATWG URL parsing), so the data can be wrapped
    data = base64.encodebytes(png.read_bytes()).decode().replace("\n", "\n   ")
    return (".. raw:: html\n\n"
            '   <img alt="Figure 1 of these runs" style="width: 100%" '
            f'src="data:image/png;base64,\n   {data.rstrip()}">\n')


def read_csv(path: str | Path) -> pd.DataFrame:
    """A CSV the report shows; InputError when it is missing."""
    if not Path(path).exists():
        raise InputError(f"{path}: missing")
    return pd.read_csv(path, keep_default_na=True)


def write(out: str | Path, text: str) -> None:
    """Write a page, creating its folder."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)


def read_marks(path: str | Path | None) -> list[str]:
    """The provenance marks of marks.json; none without a path."""
    return json.loads(Path(path).read_text()) if path else []


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem report`: one subcommand per kind of page, `check`, `locked`."""
    sub = parser.add_subparsers(dest="action", required=True)
    status = sub.add_parser("status", help="the run-status page and the provenance marks")
    status.add_argument("--runs", type=Path, required=True)
    status.add_argument("--config-name", required=True, help="the config file it came from")
    status.add_argument("--archive", help="the runs archive it was rebuilt from, if any")
    status.add_argument("--config", type=Path, help="results/config.yaml, shown on the page")
    status.add_argument("--records", type=Path,
                        help="a live sweep's run records (not an archive): the page adds "
                             "`initmem status` of --sweep-config over them")
    status.add_argument("--sweep-config", type=Path, help="the config file the sweep trains")
    status.add_argument("--published", type=Path, default=checkout.PUBLISHED,
                        help="the paper's published tables (the sweep's projection)")
    status.add_argument("--out", type=Path, required=True)
    status.add_argument("--marks", type=Path, required=True, help="marks.json to write")
    table = sub.add_parser("table", help="one of Tables 1-7 as HTML")
    table.add_argument("number", type=int, choices=list(artifacts.TABLES))
    table.add_argument("--config", type=Path, required=True,
                       help="results/config.yaml: Table 1, the optimizers' names")
    table.add_argument("--cells", type=Path, help="tables/tableN.csv (Tables 2-7)")
    table.add_argument("--marks", type=Path)
    table.add_argument("--out", type=Path, required=True)
    csv = sub.add_parser("csv", help="a CSV (scorecard, claims) as an HTML table")
    csv.add_argument("csv", type=Path)
    csv.add_argument("--title", required=True)
    csv.add_argument("--marks", type=Path)
    csv.add_argument("--out", type=Path, required=True)
    front = sub.add_parser("front", help="the front page's figure, as reStructuredText")
    front.add_argument("figure", type=Path)
    front.add_argument("--out", type=Path, required=True)
    check = sub.add_parser("check", help="open a report in headless Chromium and check it")
    check.add_argument("report", type=Path)
    check.add_argument("--screenshot", type=Path, required=True)
    check.add_argument("--expect", nargs="+", default=[], help="file names it must list")
    locked = sub.add_parser("locked", help="run a command holding a lock file, refused "
                            "while another holds it (`make report`'s recipe)")
    locked.add_argument("lock", type=Path)
    locked.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARG ...")


def run_locked(lock: Path, command: list[str]) -> int:
    """`command`'s exit status, run while this process holds `lock` (flock, released when
    it ends, however it ends); InputError at once when another process holds it."""
    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        raise InputError(f"report locked {lock}: no command to run (-- COMMAND ARG ...)")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = untrusted.open_lock(lock)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(f"{lock}: held by another `make report` in this folder; wait for "
                         "it to end (two at once would mix their archives' configs)") from None
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        os.close(fd)


def main(args: argparse.Namespace) -> int:
    """`initmem report`: write one page, check the report, or run a command under a lock."""
    if args.action == "locked":
        return run_locked(args.lock, args.command)
    if args.action == "check":
        return browser.main(args)
    if args.action == "front":
        write(args.out, front_figure(args.figure))
        return 0
    if args.action == "status":
        runs = pd.read_parquet(args.runs)
        marks = provenance_marks(status_counts(runs), args.config_name, args.archive)
        write(args.marks, json.dumps(marks, indent=1) + "\n")
        config_text = args.config.read_text() if args.config else ""
        sweep_text = (sweep.render(sweep.sweep_status(args.sweep_config, args.records,
                                                      published=args.published))
                      if args.records else "")
        environment_text = (environment.describe(read_environment(args.archive))
                            if args.archive else "")
        write(args.out, status_page(runs, args.config_name, marks, config_text, sweep_text,
                                    environment_text))
    elif args.action == "table":
        of_runs = artifacts.table(args.number).reads_runs  # else: from the config alone
        if of_runs and args.cells is None:
            raise InputError(f"table {args.number} is drawn from its cells: pass --cells "
                             f"tables/table{args.number}.csv")
        config = load_config(args.config)
        labels = {name: shown.label for name, shown in optimizer_display(config).items()}
        body = cells_table(read_csv(args.cells), labels) if of_runs else settings_table(config)
        write(args.out, page(f"Table {args.number}", read_marks(args.marks), body))
    else:
        body = read_csv(args.csv).to_html(index=False, na_rep="", escape=True)
        write(args.out, page(args.title, read_marks(args.marks), body))
    return 0
