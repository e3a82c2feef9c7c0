"""Scorecard: the transcribed numbers, the tolerance rule and the verdicts on hand-made runs."""

import math
from pathlib import Path

import pandas as pd
import pytest
from analysis_frames import runs_table

from initmem.analysis import macros, scorecard, tables
from initmem.cli import main

PUBLISHED = Path(__file__).parents[1] / "paper" / "published"
CONFIG = Path(__file__).parents[1] / "config.yaml"


def test_published_tables_have_every_cell_of_the_paper():
    pub = scorecard.read_published(PUBLISHED)
    counts = pub["table"].value_counts().to_dict()
    # 25 rows x 6 columns; 2 panels x 14 rows x 7; 2 x 8 x 11 + 2 x 8 x 10; 2 x 6 x 11; 6 x 9
    assert counts == {"2": 150, "3": 150, "4": 196, "5": 336, "6": 132, "7": 54,
                      "text": len(pub[pub["table"] == "text"])}
    assert not pub.duplicated([*scorecard.KEYS, "macro"]).any()  # text: one per macro
    assert set(pub.loc[pub["table"] == "text", "macro"]) <= {q.name for q in macros.QUOTES}


@pytest.mark.parametrize(("table", "key", "value", "std"), [
    # copied by hand from the paper's tables
    ("2", dict(b="64", optimizer="sgd", metric="val_acc_interp"), 0.815, 0.024),
    ("3", dict(b="256", optimizer="sgd", metric="tau_interp"), 153.3, 8.7),
    ("3", dict(b="128", optimizer="adamw", metric="repair_gap"), 0.045, 0.025),
    ("4", dict(b="128", lr0="0.1", l2="0", sigma_w="2.5", metric="test_acc"), 77.2, 2.1),
    ("4", dict(b="16", lr0="0.01", l2="0.001", metric="spread"), 0.4, None),
    ("4", dict(b="128", config="long_sgd", metric="train_acc_mean"), 99.9, None),
    ("5", dict(b="128", config="resnet56", optimizer="sgd", sigma_w="0.1",
               metric="train_acc"), 81.9, 11.0),
    ("5", dict(b="16", config="r9_avgpool", optimizer="adam", sigma_w="1",
               metric="tau_interp"), 166.4, 4.5),
    ("6", dict(b="128", config="ln_aug", optimizer="sgd", metric="spread"), 15.2, None),
    ("7", dict(b="16", optimizer="sgd_momentum", sigma_w="0.1", metric="test_acc"), 86.5, 6.4),
    ("7", dict(b="256", optimizer="adam", sigma_w="2.5", metric="tau_best"), 38, 10),
])
def test_transcribed_cells_match_the_paper(table, key, value, std):
    pub = scorecard.read_published(PUBLISHED)
    rows = pub[pub["table"] == table]
    for col, wanted in key.items():
        rows = rows[rows[col] == wanted]
    assert len(rows) == 1
    assert rows["value"].iloc[0] == pytest.approx(value)
    assert (math.isnan(rows["std"].iloc[0]) if std is None
            else rows["std"].iloc[0] == pytest.approx(std))


def test_never_reached_and_single_seed_cells_are_noted():
    pub = scorecard.read_published(PUBLISHED)
    never = pub[pub["note"] == "never reached"]
    assert len(never) == 14  # Table 5: 12 dashes; Table 7: "--- / ---"
    assert never["value"].isna().all()
    single = pub[(pub["table"] == "4") & pub["note"].str.startswith("single seed")]
    assert (single["n_seeds"] == "1").all() and len(single) == 21 * 7


@pytest.mark.parametrize(("unit", "published", "std", "expected"), [
    ("pct", 85.0, 0.3, 1.0),  # the 1 pp floor
    ("pct", 86.5, 6.4, 12.8),  # 2 std
    ("frac", 0.862, 0.0, 0.01),
    ("epoch", 8.8, 0.4, 1.0),
    ("epoch", 153.3, 8.7, 17.4),
    ("epoch", 222.1, 0.0, 22.21),  # 10% of the value
    ("clock", 4.7, math.nan, 0.235),
])
def test_tolerance(unit, published, std, expected):
    assert scorecard.tolerance(unit, published, std) == pytest.approx(expected)


def test_verdicts():
    assert scorecard.verdict(85.0, False, 85.9, False, 1.0, 0) == "agrees"
    assert scorecard.verdict(85.0, False, 86.1, False, 1.0, 0) == "disagrees"
    assert scorecard.verdict(85.0, False, math.nan, False, 1.0, 2) == "missing"
    assert scorecard.verdict(85.0, False, math.nan, False, 1.0, 0) == "not in config"
    assert scorecard.verdict(85.0, False, math.nan, True, 1.0, 0) == "disagrees"  # ours: ---
    assert scorecard.verdict(math.nan, True, math.nan, True, 1.0, 0) == "agrees"
    assert scorecard.verdict(math.nan, True, 120.0, False, 1.0, 0) == "disagrees"
    assert scorecard.verdict(math.nan, True, math.nan, False, 1.0, 1) == "missing"


def published_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "published"
    folder.mkdir()
    rows = [  # table, b, optimizer, config, sigma_w, lr0, l2, metric, unit, value, std
        "4,128,sgd,resnet9,0.1,0.001,0,test_acc,pct,85.0,0.3,10,,",
        "4,128,sgd,resnet9,2.5,0.001,0,test_acc,pct,58.6,0.7,10,,",
        "4,128,sgd,resnet9,,0.001,0,spread,pp,26.5,,10,,",
        "4,16,sgd,resnet9,0.1,0.001,0,test_acc,pct,88.1,0.3,10,,",
        "text,128,sgd,resnet9,,0.001,0,T_SGD,clock,7.3e-4,,,,TSGDbOneTwoEight",
        "text,128,sgd,resnet9,,0.001,0,spread,pp,26.5,,10,,SpreadSGDbOneTwoEight",
    ]
    header = "table,b,optimizer,config,sigma_w,lr0,l2,metric,unit,value,std,n_seeds,note,macro"
    (folder / "table4.csv").write_text("\n".join([header, *rows[:4]]) + "\n")
    (folder / "text.csv").write_text("\n".join([header, *rows[4:]]) + "\n")
    return folder


def sgd_runs() -> pd.DataFrame:
    return runs_table([
        {"sigma_w": 0.1, "seed": 0, "test_acc_best": 0.850},
        {"sigma_w": 0.1, "seed": 1, "test_acc_best": 0.860},  # 85.5: delta 0.5
        {"sigma_w": 2.5, "seed": 0, "test_acc_best": 0.599},  # 59.9: delta 1.3 <= 2 x 0.7
        {"sigma_w": 2.5, "seed": 1, "status": "missing"},
        # every other sigma_w of the 5-point grid, for a complete spread: 85.5 - 59.9
        *({"sigma_w": s, "seed": 0, "test_acc_best": 0.7} for s in (0.5, 1.0, 1.8)),
        {"b": 16, "sigma_w": 0.1, "seed": 0, "status": "missing"},
    ])


@pytest.fixture(scope="module")
def sgd_tables(tmp_path_factory) -> Path:
    """A folder with sgd_runs() as runs.parquet and the Tables 2-7 our tables write of
    them in tables/ (what the scorecard reads): 4 s, made once for the module."""
    folder = tmp_path_factory.mktemp("sgd_tables")
    sgd_runs().to_parquet(folder / "runs.parquet")
    for n in range(2, 8):
        tables.write_table(n, folder / "runs.parquet", CONFIG,
                           folder / "tables" / f"table{n}.tex")
    return folder


def test_score_compares_cell_by_cell(tmp_path, sgd_tables):
    runs = sgd_runs()
    card = scorecard.score(runs, scorecard.read_published(published_dir(tmp_path)),
                           scorecard.read_cells(sgd_tables / "tables"))
    card = card.set_index(["table", "b", "sigma_w", "metric"])
    low = card.loc[("4", "128", "0.1", "test_acc")]
    assert low["reproduced"] == pytest.approx(85.5)
    assert low["delta"] == pytest.approx(0.5)
    assert low["delta_std_units"] == pytest.approx(0.5 / 0.3)
    assert low["verdict"] == "agrees" and not low["partial"]
    high = card.loc[("4", "128", "2.5", "test_acc")]
    assert high["delta"] == pytest.approx(1.3)
    assert high["tolerance"] == pytest.approx(1.4)  # 2 x 0.7
    assert high["verdict"] == "agrees"
    assert high["partial"]  # one of its two runs is missing
    spread = card.loc[("4", "128", "", "spread")]
    assert spread["reproduced"] == pytest.approx(25.6)
    assert spread["verdict"] == "agrees"  # |25.6 - 26.5| <= 1 pp
    assert math.isnan(spread["delta_std_units"])  # no published std
    assert card.loc[("4", "16", "0.1", "test_acc")]["verdict"] == "missing"
    clock = card.loc[("text", "128", "", "T_SGD")]
    assert clock["reproduced"] == pytest.approx(300 * 313 * 1e-6 / 128)
    assert clock["verdict"] == "agrees" and not clock["partial"]
    prose = card.loc[("text", "128", "", "spread")]
    assert prose["reproduced"] == pytest.approx(25.6) and prose["partial"]


def test_summary_and_outputs(tmp_path, sgd_tables):
    out_csv, out_tex = tmp_path / "sc" / "scorecard.csv", tmp_path / "sc" / "scorecard.tex"
    assert main(["scorecard", "--runs", str(sgd_tables / "runs.parquet"), "--tables",
                 str(sgd_tables / "tables"), "--published", str(published_dir(tmp_path)),
                 "--out-csv", str(out_csv), "--out-tex", str(out_tex)]) == 0
    card = pd.read_csv(out_csv)
    assert len(card) == 6
    summary = scorecard.summary(card.astype({"table": str})).set_index("table")
    assert summary.loc["4", ["agrees", "disagrees", "missing", "partial", "cells"]].tolist() \
        == [3, 0, 1, 2, 4]
    tex = out_tex.read_text()
    assert r"Table~\ref{tab:table4} & 4 & 3 & 0 & 1 & 2 & 0 & 0 \\" in tex
    assert r"Prose & 2 & 2 & 0 & 0 & 1 & 0 & 0 \\" in tex
    assert r"Total & 6 & 5 & 0 & 1 & 3 & 0 & 0 \\" in tex
    assert "max(2" in tex.replace(r"\max", "max") and "SYNTHETIC" not in tex


def test_a_cell_outside_the_config_is_not_a_missing_record(tmp_path, sgd_tables):
    # a cut-down config runs no b = 64 at all; its b = 16 run has no record yet
    folder = published_dir(tmp_path)
    with (folder / "table4.csv").open("a") as f:
        f.write("4,64,sgd,resnet9,0.1,0.001,0,test_acc,pct,87.0,0.3,10,,\n")
    card = scorecard.score(sgd_runs(), scorecard.read_published(folder),
                           scorecard.read_cells(sgd_tables / "tables"))
    verdicts = card.set_index(["table", "b", "sigma_w", "metric"])["verdict"]
    assert verdicts[("4", "64", "0.1", "test_acc")] == "not in config"
    assert verdicts[("4", "16", "0.1", "test_acc")] == "missing"
    tex = scorecard.render_tex(card, synthetic=False)
    assert r"Table~\ref{tab:table4} & 5 & 3 & 0 & 1 & 2 & 1 & 0 \\" in tex


def test_an_empty_published_folder_is_an_error(tmp_path):
    with pytest.raises(scorecard.InputError, match="no \\*.csv"):
        scorecard.read_published(tmp_path)
