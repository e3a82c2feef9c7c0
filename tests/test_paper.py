"""The paper builds from generated inputs, shows all of them, and marks what is absent."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from initmem import paper
from initmem.analysis import figures, tables
from initmem.errors import InputError
from initmem.plan import artifacts, grid
from initmem.records import synthetic

ROOT = Path(__file__).resolve().parents[1]
PAPER_DIR = ROOT / "paper"
FIGURES = list(artifacts.FIGURES)
TABLES = list(artifacts.TABLES)
INCOMPLETE_BANNER = r"INCOMPLETE:\s+\d+\s+of\s+\d+\s+expected\s+runs\s+have\s+no\s+record"
latex = pytest.mark.latex
needs_latexmk = pytest.mark.skipif(shutil.which("latexmk") is None,
                                   reason="latexmk is not installed")


def tiny_config() -> dict:
    """The repo's config with 2 seeds, 3 scales and 1/50 of the epochs: the same tables."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["seed_sets"] = {name: [0, 1] for name in config["seed_sets"]}
    config["sigma_sets"] = {name: [0.1, 1.0, 2.5] for name in config["sigma_sets"]}
    for family in config["families"].values():
        family["recipe"]["epochs"] = max(2, family["recipe"]["epochs"] // 50)
    return config


def write_aggregate(folder: Path) -> tuple[Path, Path, Path]:
    """runs/epochs tables of generated records (initmem.synthetic; else hand-made)."""
    folder.mkdir(parents=True)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump(tiny_config()))
    runs, epochs = synthetic.generate(grid.load_config(config_path), missing=0.05)
    synthetic.write_aggregate(runs, epochs, folder)
    return folder / "runs.parquet", folder / "epochs.parquet", config_path


def render_tables(runs: Path, config: Path, out: Path) -> None:
    for n in TABLES:
        tables.write_table(n, runs, config, out / f"table{n}.tex")


# The tests of one built results folder run on one worker, so that it is built once
# (a module fixture is built again on every xdist worker that asks for it: 47 s each).
one_results = pytest.mark.xdist_group("paper_results")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder as the workflow leaves it (without macros and scorecard)."""
    root = tmp_path_factory.mktemp("results")
    runs, epochs, config = write_aggregate(root / "aggregate")
    for n in FIGURES:
        figures.write_figure(n, runs, epochs, config, root / "figures" / f"fig{n}.pdf",
                             root / "figures" / f"fig{n}.png")
    render_tables(runs, config, root / "tables")
    paper.write_status(runs, root / "paper" / "status.tex")
    return root


def built(results: Path, out: Path) -> tuple[str, str]:
    """(text of the PDF or '' without pdftotext, LaTeX log) of a fresh build."""
    pdf = paper.build(PAPER_DIR, results, out, out.parent / "build")
    log = (out.parent / "build" / f"{out.stem}.log").read_text(errors="replace")
    if shutil.which("pdftotext") is None:
        return "", log
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    return text, log


@latex
@needs_latexmk
@one_results
def test_paper_shows_every_figure_and_table_and_marks_synthetic(results, tmp_path):
    text, log = built(results, tmp_path / "paper.pdf")
    for n in FIGURES:
        assert f"<use figures/fig{n}.pdf>" in log
        assert f"MISSING figures/fig{n}.pdf" not in log
    for n in TABLES:
        assert f"tables/table{n}.tex" in log and f"MISSING tables/table{n}" not in log
    assert "initmem: BANNER SYNTHETIC" in log
    assert "MISSING paper/status.tex" not in log
    if text:
        for n in FIGURES:
            assert f"Figure {n}:" in text
        for n in TABLES:
            assert f"Table {n}:" in text
        # the banners (the methods section names the marks too, so match their wording)
        assert "SYNTHETIC DATA" in text
        assert re.search(INCOMPLETE_BANNER, text)
        info = subprocess.run(["pdfinfo", str(tmp_path / "paper.pdf")], capture_output=True,
                              text=True, check=True).stdout
        assert re.search(r'^Title: +Reproducing "Do Deep Networks Forget Initialization\?"$',
                         info, re.MULTILINE)


@latex
@needs_latexmk
def test_absent_inputs_become_marked_placeholders(tmp_path):
    empty = tmp_path / "results"
    empty.mkdir()
    text, log = built(empty, tmp_path / "out" / "paper.pdf")
    for name in ([f"figures/fig{n}.pdf" for n in FIGURES]
                 + [f"tables/table{n}.tex" for n in TABLES]
                 + ["paper/status.tex", "paper/macros.tex", "scorecard/scorecard.tex"]):
        assert f"initmem: MISSING {name}" in log
        if text:
            assert f"MISSING: {name}" in text
    assert "SYNTHETIC" not in log
    if text:  # numbering stays the paper's even with placeholders
        assert "Figure 9:" in text and "Table 7:" in text
        assert "SYNTHETIC DATA" not in text
        assert not re.search(INCOMPLETE_BANNER, text)


@latex
@needs_latexmk
@one_results
def test_paper_build_is_byte_reproducible(results, tmp_path):
    first = paper.build(PAPER_DIR, results, tmp_path / "a.pdf", tmp_path / "a")
    second = paper.build(PAPER_DIR, results, tmp_path / "b.pdf", tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()


def test_status_counts_missing_and_generated_runs(tmp_path):
    runs = pd.DataFrame({"status": ["completed", "missing", None, "diverged"],
                         "record_source": ["generated", None, None, "trained"]})
    runs.to_parquet(tmp_path / "runs.parquet")
    counts = paper.write_status(tmp_path / "runs.parquet", tmp_path / "status.tex")
    assert counts == {"expected": 4, "missing": 2, "generated": 1}
    tex = (tmp_path / "status.tex").read_text()
    assert "\\def\\initmemRunsMissing{2}" in tex and "\\def\\initmemRunsGenerated{1}" in tex


def test_build_points_texinputs_at_results_without_recursion(tmp_path):
    env = paper.build_env(tmp_path)
    assert env["TEXINPUTS"] == f"{tmp_path.resolve()}:"  # '//' would crawl the run records
    assert env["FORCE_SOURCE_DATE"] == "1"


def test_build_without_latexmk_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(paper.shutil, "which", lambda _: None)
    with pytest.raises(InputError, match="latexmk is not installed"):
        paper.build(PAPER_DIR, tmp_path, tmp_path / "p.pdf")
