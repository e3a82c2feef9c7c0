"""Extending the study: a network is its declaration plus a config entry.

ResNet-20 (He et al.'s CIFAR ResNet with n = 3; not in the paper) is one entry of
initmem.plan.architectures. config/resnet20.yaml puts it in a small depth family beside
ResNet-56, and it flows to the config check, the grid's pack specs, Table 5's rows,
Figs. 5 and 7's legends and the scorecard's "not in the paper" rows, while the paper's
depth rows stay as they were. (Its build, Keras parameter count and packing are tested
with every declared network: tests/test_models.py, tests/test_keras_networks.py.)
"""

import json
from pathlib import Path

import pytest
from analysis_frames import scorecard_of

from initmem import cli
from initmem.analysis import figures, tables
from initmem.analysis.figures.common import FigureInputs
from initmem.plan import grid
from initmem.plan.architectures import ARCHITECTURES, ARCHS
from initmem.records import synthetic

ROOT = Path(__file__).parents[1]
RESNET20_CONFIG = ROOT / "config" / "resnet20.yaml"
PAPER_DEPTH_ROWS = ["ResNet-9", "R9-AvgPool", "ResNet-56", "ResNet-110"]


@pytest.fixture(scope="module")
def config():
    return grid.load_config(RESNET20_CONFIG)


@pytest.fixture(scope="module")
def records(config):
    return synthetic.generate(config)


def row_labels(tex: str) -> list[str]:
    """The networks of Table 5's first panel, in order (a label opens each SGD row)."""
    rows = tex.split(r"$b=16$")[1].split(r"$b=128$")[0].splitlines()
    return [line.split(" & ")[0] for line in rows if " & SGD & " in line]


def test_the_config_and_the_grid_take_resnet20_from_its_declaration(config, tmp_path,
                                                                    capsys):
    assert "resnet20" in ARCHS and ARCHITECTURES["resnet20"].depth == 20
    archs = {run.recipe.arch for run in grid.expand_runs(config)}
    assert archs == {"resnet9", "resnet20", "resnet56"}
    assert cli.main(["grid", "--config", str(RESNET20_CONFIG), "--packs-dir",
                     str(tmp_path)]) == 0
    assert "depth            40 runs" in capsys.readouterr().out
    specs = [json.loads(p.read_text()) for p in tmp_path.glob("depth-resnet20-*.json")]
    assert len(specs) == 4 and all(s["recipe"]["arch"] == "resnet20" for s in specs)


def test_resnet20_has_rows_in_table5_beside_the_papers(config, records):
    runs, _ = records
    tex = tables.render(tables.build(5, runs, config), tables.is_synthetic(runs))
    # the paper's R9-AvgPool and ResNet-110 are not planned here: no rows for them
    assert row_labels(tex) == ["ResNet-9", "ResNet-20", "ResNet-56"]
    resnet20 = [line for line in tex.splitlines() if line.startswith("ResNet-20 & ")]
    assert len(resnet20) == 4  # SGD rows of the two panels and of the two event panels
    assert all("??" not in line for line in resnet20)  # its runs have numbers


def test_the_papers_table5_rows_are_its_own(records):
    """Without ResNet-20 in the depth family, Table 5 has the paper's rows only."""
    runs, _ = records
    paper = grid.load_config(ROOT / "config.yaml")
    depth_free = runs[runs["arch"] != "resnet20"]
    tex = tables.render(tables.build(5, depth_free, paper), tables.is_synthetic(runs))
    assert row_labels(tex) == PAPER_DEPTH_ROWS


def test_resnet20_is_in_the_legends_of_figs_5_and_7(config, records):
    runs, epochs = records
    inputs = FigureInputs(runs, epochs.to_pandas(), config)
    for number in (5, 7):
        fig = figures.draw(number, inputs)
        labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        assert "ResNet-20" in labels, number
        colours = {t.get_text(): h.get_color() for legend in fig.legends
                   for t, h in zip(legend.get_texts(), legend.get_lines(), strict=True)}
        assert colours["ResNet-20"] == ARCHITECTURES["resnet20"].colour


def test_the_scorecard_lists_resnet20_as_not_in_the_paper(records, tmp_path):
    runs, _ = records
    card = scorecard_of(runs, RESNET20_CONFIG, tmp_path)
    resnet20 = card[card["config"] == "resnet20"]
    assert len(resnet20) > 0 and set(resnet20["verdict"]) == {"not in the paper"}
    assert "not in the paper" not in set(card.loc[card["config"] == "resnet56", "verdict"])
