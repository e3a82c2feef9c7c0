"""A stranger's strings reach the paper's LaTeX, the report's HTML and the claims' Markdown
as text: no \\input of a local file, no stored script, no link (issue 34, part B). The
hostile inputs are made here: a config with crafted optimizer strings, packed into a runs
archive with the project's own pack (so every checksum is right) and read back as
`make report ARCHIVE=` does."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml
from analysis_frames import runs_table
from workflow_helpers import TEST_CONFIG

from initmem import cli, paper
from initmem.analysis import claims, macros, tables
from initmem.markup import md_escape, tex_escape
from initmem.paper import report
from initmem.plan.grid import load_config, validate_config
from initmem.records.archive import pack

INPUT_HOST = r"SGD\input{/etc/hostname}"
CATCODE = r"{\catcode95=12 \input{/etc/passwd}}"
SCRIPT = "<img src=x onerror=alert(1)>"


def hostile_config(tmp_path: Path, **extra: object) -> Path:
    """config/test.yaml with crafted optimizer strings (and `extra` top-level keys), its
    sigma_w those of Tables 2-3 (so that they have rows to print the strings in)."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["sigma_sets"]["two"] = [0.1, 2.5]
    config["optimizers"]["sgd"].update(label=INPUT_HOST, tex_label=INPUT_HOST, notes=CATCODE)
    config["optimizers"]["adam"].update(label=SCRIPT, notes=SCRIPT)
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump({**config, **extra}))
    return path


def archived_config(tmp_path: Path) -> Path:
    """The hostile config packed into an archive (no runs: its config is what matters) that
    even claims `from_archive: false`, then read back by `initmem archive config`."""
    archive = tmp_path / "runs.tar"
    pack(load_config(hostile_config(tmp_path, from_archive=False)), tmp_path / "none",
         archive)
    out = tmp_path / "archived.yaml"
    assert cli.main(["archive", "config", str(archive), "--out", str(out)]) == 0
    return out


def no_command_reads_a_file(tex: str) -> None:
    assert r"\input" not in tex and r"\catcode" not in tex


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def live_tags(page: str) -> set[str]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


def test_tex_escape_leaves_no_command_group_or_argument():
    text = tex_escape("\\input{x} $a^^5c$ 50% #1 & _~ [opt] <b>\nnext")
    assert text == (r"\textbackslash{}input\{x\} \$a\textasciicircum{}\textasciicircum{}5c\$"
                    r" 50\% \#1 \& \_\textasciitilde{} {[}opt{]} \textless{}b\textgreater{}"
                    " next")


def test_md_escape_leaves_no_tag_link_code_or_cell_break():
    assert md_escape(f"{SCRIPT} [x](javascript:alert(1)) `c` a|b\nc") == (
        r"\<img src=x onerror=alert(1)\> \[x\](javascript:alert(1)) \`c\` a\|b c")


def test_an_archives_config_is_marked_whatever_it_says(tmp_path):
    assert yaml.safe_load(archived_config(tmp_path).read_text())["from_archive"] is True


def test_an_archives_optimizer_strings_print_as_text_in_every_table(tmp_path):
    config = archived_config(tmp_path)
    for number in (1, 2):
        out = tmp_path / f"table{number}.tex"
        args = ["table", str(number), "--config", str(config), "--out", str(out)]
        if number == 2:
            runs_table([{"optimizer": "sgd"}]).to_parquet(tmp_path / "runs.parquet")
            args += ["--runs", str(tmp_path / "runs.parquet")]
        assert cli.main(args) == 0
        tex = out.read_text()
        no_command_reads_a_file(tex)
        assert tex_escape(INPUT_HOST) in tex and tex_escape(SCRIPT) in tex
    assert tex_escape(CATCODE) in (tmp_path / "table1.tex").read_text()
    runs = runs_table([{"optimizer": "sgd"}])
    for number in range(3, 8):  # every other table, rendered directly
        no_command_reads_a_file(tables.render(tables.build(number, runs,
                                                           load_config(config)), False))


def test_a_typed_configs_tex_label_and_notes_stay_latex_and_its_label_text(tmp_path):
    config = load_config(hostile_config(tmp_path))
    table1 = tables.render(tables.build(1, None, config), False)
    assert CATCODE in table1  # notes: raw LaTeX by design, from the user's own config
    assert tex_escape(INPUT_HOST) + " &" in table1  # a label is always text
    table2 = tables.render(tables.build(2, runs_table([{"optimizer": "sgd"}]), config), False)
    assert f"& {INPUT_HOST} &" in table2  # tex_label: raw LaTeX by design


def test_the_report_pages_show_an_archives_strings_without_a_live_tag(tmp_path):
    config = archived_config(tmp_path)
    cells = pd.DataFrame([{"table": 2, "b": 16, "optimizer": "adam", "config": "resnet9",
                           "sigma_w": 0.1, "lr0": None, "l2": None, "metric": "val_acc_best",
                           "unit": "frac", "value": 0.5, "std": 0.01, "n_seeds": 2,
                           "n_runs": 2, "n_missing": 0, "n_diverged": 0,
                           "never_reached": False}])
    cells.to_csv(tmp_path / "table2.csv", index=False)
    for number in (1, 2):
        out = tmp_path / f"table{number}.html"
        assert cli.main(["report", "table", str(number), "--config", str(config),
                         "--cells", str(tmp_path / "table2.csv"), "--out", str(out)]) == 0
        page = out.read_text()
        assert "img" not in live_tags(page) and "&lt;img src=x" in page
    assert f"<td>{CATCODE}</td>" in (tmp_path / "table1.html").read_text()  # as typed


def test_an_archives_name_is_text_in_the_pdfs_marks_and_the_status_page(tmp_path):
    runs = runs_table([{}])
    runs.to_parquet(tmp_path / "runs.parquet")
    hostile = r"\input{/etc/passwd}" + SCRIPT + ".tar"
    paper.write_status(tmp_path / "runs.parquet", tmp_path / "status.tex", archive=hostile)
    no_command_reads_a_file((tmp_path / "status.tex").read_text())
    marks = paper.provenance_marks(report.status_counts(runs), archive=hostile)
    page = report.status_page(runs, "c.yaml", marks)
    assert "img" not in live_tags(page)


def test_a_records_source_is_text_in_the_macros():
    runs = runs_table([{"record_source": r"\input{/etc/passwd}"}])
    tex = macros.render(runs, None, load_config(TEST_CONFIG))
    no_command_reads_a_file(tex)
    assert r"\newcommand{\RecordSource}{\textbackslash{}input\{/etc/passwd\}}" in tex


def test_the_claims_markdown_shows_an_archives_label_as_text():
    table = pd.DataFrame([{"id": "c", "section": "§1", "paper": "1", "ours": "2 [1, 3]",
                           "gates_in_short": "trained: pass", "verdict": "holds",
                           "reason": "Holds.", "magnitude": "smaller",
                           "magnitude_why": f"the paper's {SCRIPT} is outside",
                           "robustness": f"not robust: holds in {SCRIPT}, fails in "
                                         "[x](javascript:alert(1))"}])
    text = claims.render_markdown(table)
    assert "<img" not in text.replace(r"\<img", "") and "](" not in text.replace(r"\](", "")


@pytest.mark.latex
@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk is not installed")
def test_compiling_an_archives_table1_reads_no_local_file(tmp_path):
    """The -recorder list of every file TeX opened: the secret only where a typed config
    asks for it (the control), never from an archive's."""
    secret = tmp_path / "secret.tex"
    secret.write_text("LEAKED")
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["optimizers"]["sgd"].update(label=rf"\input{{{secret}}}",
                                       notes=rf"\input{{{secret}}}")

    def opened(config: dict, name: str) -> str:
        table = tables.render(tables.build(1, None, validate_config(config)), False)
        (tmp_path / f"{name}.tex").write_text(
            "\\documentclass{article}\\usepackage{booktabs,xcolor,graphicx}"
            f"\\begin{{document}}{table}\\end{{document}}\n")
        subprocess.run(["latexmk", "-pdf", "-recorder", "-interaction=nonstopmode",
                        f"{name}.tex"], cwd=tmp_path, capture_output=True, check=True)
        return (tmp_path / f"{name}.fls").read_text()

    assert str(secret) in opened(config, "typed")
    assert str(secret) not in opened({**config, "from_archive": True}, "archived")
