"""The HTML report: its pages (tables, run status, marks), its Chromium check, and the
report of a tiny config built and opened as a reader would."""

from __future__ import annotations

import html
import json
import math
import shutil
from html.parser import HTMLParser

import pandas as pd
import pytest
from workflow_helpers import ROOT, TEST_CONFIG, job_counts, snakemake

from initmem import cli, paper
from initmem.paper import browser, report
from initmem.plan import artifacts
from initmem.records import status as sweep

FIGURES = [f"{f.name}.png" for f in artifacts.FIGURES.values()]
TABLES = [f"{t.name}.html" for t in artifacts.TABLES.values()]
EXPECTED = [*FIGURES, *TABLES, "status.html", "scorecard.html", "claims.html", "paper.pdf"]
# Kept for CI to upload: what the browser saw.
SCREENSHOT = ROOT / "results" / "ci" / "report.png"


def runs_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": ["a", "b", "c", "d"], "family": ["main", "main", "main", "depth"],
        "status": ["completed", "diverged", None, "early_stopped"],
        "record_source": ["trained", "generated", None, "trained"]})


def test_marks_name_demo_archive_missing_and_synthetic_runs():
    counts = report.status_counts(runs_frame())
    assert counts == {"expected": 4, "missing": 1, "generated": 1, "completed": 1,
                      "early_stopped": 1, "diverged": 1}
    marks = paper.provenance_marks(counts, "config/demo.yaml", "runs.tar")
    assert [m.split(":")[0] for m in marks] == ["DEMO", "FROM AN ARCHIVE", "INCOMPLETE",
                                                "SYNTHETIC DATA — NOT RESULTS"]
    assert "1 of 4 expected runs have no record" in marks[2]
    assert "runs.tar" in marks[1]


def test_the_pdf_carries_the_same_marks(tmp_path):
    runs_frame().to_parquet(tmp_path / "runs.parquet")
    paper.write_status(tmp_path / "runs.parquet", tmp_path / "status.tex",
                       "config/demo.yaml", "my_runs.tar")
    tex = (tmp_path / "status.tex").read_text()
    assert "\\initmembanner{DEMO: made from config/demo.yaml" in tex
    assert "unpacked from my\\_runs.tar" in tex  # TeX-safe
    assert "\\initmembanner{INCOMPLETE: 1 of 4 expected runs" in tex


def test_a_complete_trained_study_has_no_marks():
    counts = {"expected": 3, "missing": 0, "generated": 0}
    assert paper.provenance_marks(counts, "config/laptop.yaml", None) == []


def test_status_page_names_the_config_counts_and_missing_runs():
    runs = runs_frame()
    text = report.status_page(runs, "config/x.yaml", ["INCOMPLETE: 1 of 4"], "seed_sets: {}")
    assert "config/x.yaml" in text and 'class="mark">INCOMPLETE: 1 of 4' in text
    assert "<pre>seed_sets: {}</pre>" in text
    assert "<td class=\"key\">diverged</td><td>1</td>" in text
    assert "Runs without a record" in text and "<li>c</li>" in text


def test_a_live_sweeps_status_page_shows_initmem_status(tmp_path):
    """From records (not an archive) the page adds `initmem status` of the sweep's config:
    the same function, so the same counts, trainers and device-hours."""
    runs = tmp_path / "runs.parquet"
    runs_frame().to_parquet(runs)
    out, marks = tmp_path / "status.html", tmp_path / "marks.json"
    assert cli.main(["report", "status", "--runs", str(runs), "--config-name", "config/test.yaml",
                     "--records", str(tmp_path / "records"), "--sweep-config",
                     str(TEST_CONFIG), "--out", str(out), "--marks", str(marks)]) == 0
    text = out.read_text()
    expected = sweep.render(sweep.sweep_status(TEST_CONFIG, tmp_path / "records"))
    assert "Sweep status" in text and "queued" in text and "device-hours" in text
    assert html.escape(expected.splitlines()[1]) in text  # the counts' header row


class Rows(HTMLParser):
    """The text of each <tr>'s cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    parser = Rows()
    parser.feed(html)
    return parser.rows


def cell(b, optimizer, sigma_w, metric, value, **counts):
    row = {"table": 2, "b": b, "optimizer": optimizer, "config": "resnet9",
           "sigma_w": sigma_w, "lr0": math.nan, "l2": math.nan, "metric": metric,
           "unit": "frac", "value": value, "std": 0.01, "n_seeds": 2, "n_runs": 2,
           "n_missing": 0, "n_diverged": 0, "never_reached": False}
    return {**row, **counts}


def test_table_cells_come_back_as_the_tables_rows_and_columns():
    cells = pd.DataFrame([
        cell(16, "sgd", 0.1, "val_acc_best", 0.5),
        cell(16, "sgd", 0.1, "tau_interp", math.nan, n_seeds=0, never_reached=True),
        cell(16, "adam", 0.1, "val_acc_best", 0.7, n_missing=1),
        cell(128, "sgd", 0.1, "val_acc_best", math.nan, n_seeds=0, n_runs=0)])
    rows = table_rows(report.cells_table(cells, {"sgd": "SGD", "adam": "Adam"}))
    assert rows[0][-2:] == ["Val acc at τ_best", "τ_interp (epoch)"]  # in the table's order
    assert rows[3:] == [["16", "SGD", "ResNet-9", "0.500 ± 0.010", "—"],
                        ["Adam", "ResNet-9", "0.700 ± 0.010−1", ""],  # −1: a missing run
                        ["128", "SGD", "ResNet-9", "??", ""]]


def test_table1_page_is_the_configs_optimizers_in_plain_text(tmp_path):
    out = tmp_path / "table1.html"
    assert cli.main(["report", "table", "1", "--config", str(TEST_CONFIG), "--out",
                     str(out)]) == 0
    text = out.read_text()
    assert "<td>SGD</td>" in text and "<td>Adam</td>" in text
    assert "$" not in text and "\\" not in text
    assert "<td>beta_1=0.9, beta_2=0.999, epsilon=1e-07, weight_decay=0</td>" in text  # declared


def test_a_table_page_without_its_input_is_one_line(tmp_path, capsys):
    assert cli.main(["report", "table", "3", "--config", str(TEST_CONFIG), "--out",
                     str(tmp_path / "t.html")]) == 2
    assert cli.main(["report", "table", "3", "--cells", str(tmp_path / "none.csv"),
                     "--config", str(TEST_CONFIG), "--out", str(tmp_path / "t.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].endswith("table 3 is drawn from its cells: pass --cells tables/table3.csv")
    assert err[1].endswith("none.csv: missing")


def test_csv_page_shows_the_marks_and_the_rows(tmp_path):
    (tmp_path / "marks.json").write_text(json.dumps(["DEMO: toy"]))
    pd.DataFrame({"claim": ["x"], "verdict": ["holds"]}).to_csv(tmp_path / "c.csv",
                                                                 index=False)
    assert cli.main(["report", "csv", str(tmp_path / "c.csv"), "--title", "Claims",
                     "--marks", str(tmp_path / "marks.json"), "--out",
                     str(tmp_path / "c.html")]) == 0
    text = (tmp_path / "c.html").read_text()
    assert 'class="mark">DEMO: toy' in text and "<td>holds</td>" in text


def test_console_errors_are_found_in_chromiums_log():
    log = ('[1:1:1201/1:INFO:CONSOLE:1] "hi", source: file:///r.html (1)\n'
           '[1:1:1201/1:INFO:CONSOLE:1] "Uncaught ReferenceError: f is not defined", '
           "source: file:///r.html (1)\n"
           '[1:1:1201/1:ERROR:CONSOLE:3] "failed", source: file:///r.html (3)\n'
           "[1:1:1201/1:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n")
    errors = browser.script_errors(log)
    assert len(errors) == 2 and "ReferenceError" in errors[0] and '"failed"' in errors[1]


def fake_dom(drawn: str, results: dict) -> str:
    return (f'<html><body><div id="app">{drawn}</div>'
            f'<script id="results">var results = {json.dumps(results)};</script>'
            '<script id="categories">var categories = {"1 Reproduction": {}};</script>'
            "</body></html>")


def test_dom_check_names_what_a_reader_would_miss():
    results = {"results/a.png": {"name": "a.png", "caption": "<p>A.</p>"},
               "results/b.png": {"name": "b.png", "caption": ""}}
    assert browser.dom_problems(fake_dom("1 Reproduction", results), ["a.png"]) == []
    problems = browser.dom_problems(fake_dom("", results), ["a.png", "b.png", "c.png"])
    assert problems == ["category '1 Reproduction' is not in the menu", "b.png: no caption",
                        "c.png: not in the report"]


def test_report_target_lists_every_page_and_trains_once(tmp_path):
    done = snakemake(tmp_path, TEST_CONFIG, "report_files", "-n", "--quiet", "rules")
    assert done.returncode == 0, done.stdout + done.stderr
    counts = job_counts(done.stdout)
    assert {rule: counts.get(rule) for rule in (
        "write_report_status", "render_table_page", "render_settings_table_page",
        "render_csv_page", "draw_figure", "draw_toy_figure", "build_paper")} == {
        "write_report_status": 1, "render_table_page": 6, "render_settings_table_page": 1,
        "render_csv_page": 2, "draw_figure": 8, "draw_toy_figure": 1, "build_paper": 1}


@pytest.mark.slow
@pytest.mark.latex
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk is not installed")
@pytest.mark.skipif(not any(map(shutil.which, browser.BROWSERS)),
                    reason="chromium is not installed (apt-get install chromium)")
def test_tiny_report_opens_in_chromium_with_every_figure_and_table(tmp_path):
    built = snakemake(tmp_path, TEST_CONFIG, "report_files")
    assert built.returncode == 0, built.stdout + built.stderr
    html = tmp_path / "results" / "report" / "report.html"
    written = snakemake(tmp_path, TEST_CONFIG, "--report", str(html), "report_files")
    assert written.returncode == 0, written.stdout + written.stderr
    problems = browser.check(html, SCREENSHOT, EXPECTED)
    assert problems == []
    assert SCREENSHOT.stat().st_size > 10_000
    status = (tmp_path / "results" / "report" / "status.html").read_text()
    assert "config/test.yaml" in status and "Sweep status" in status


def test_the_front_page_figure_is_inline_and_renders_through_docutils(tmp_path, monkeypatch):
    """workflow.rst includes results/report/front.rst: an <img> whose data URI is the PNG
    itself (a report opened on another machine still shows it), in lines docutils takes."""
    import base64
    import re

    from docutils.core import publish_parts

    png = ROOT / "results" / "laptop" / "fig1.png"
    out = tmp_path / "results" / "report" / "front.rst"
    assert cli.main(["report", "front", str(png), "--out", str(out)]) == 0
    assert max(len(line) for line in out.read_text().splitlines()) < 10_000
    monkeypatch.chdir(tmp_path)
    front = (ROOT / "workflow" / "report" / "workflow.rst").read_text().split("{% if")[0]
    html = publish_parts(front, writer="html",
                         settings_overrides={"halt_level": 2})["html_body"]
    data = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert base64.b64decode(re.sub(r"\s", "", data)) == png.read_bytes()
