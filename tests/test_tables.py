"""Tables 1-7: layout, known cells, markers for partial results, the SYNTHETIC mark."""

from pathlib import Path

import jinja2
import pandas as pd
import pytest
import yaml
from analysis_frames import runs_table, small_config

from initmem.analysis import tables
from initmem.analysis.tables import cells
from initmem.cli import main
from initmem.plan import artifacts
from initmem.plan.grid import load_config
from initmem.vocabulary import FIVE_SIGMAS as FIVE
from initmem.vocabulary import SYNTHETIC_MARK

CONFIG = Path(__file__).parents[1] / "config.yaml"
PAPER = load_config(CONFIG)


HEADERS = (r"\multicolumn{10}", r"\multicolumn{13}", "$b$ & ", " & & ", "Optimizer & ",
           r"$\eta$ & ", "Batch size", "Architecture & Opt.", "Configuration & Opt.")


def body_rows(tex: str) -> list[list[str]]:
    """The data rows of a rendered tabular, split into cells."""
    return [line.removesuffix(r" \\").split(" & ") for line in tex.splitlines()
            if line.endswith(r"\\") and not line.startswith(HEADERS)]


def table2_runs(**fields) -> list[dict]:
    """SGD, b=16, sigma_w=0.1 (Table 2's first row), three seeds."""
    return [{"b": 16, "sigma_w": 0.1, "seed": s, "tau_interp": t, "tau_best": t + 2,
             "val_acc_interp": 0.86, "val_acc_best": v, "val_acc_last": 0.89,
             "repair_gap": v - 0.86, **fields}
            for s, t, v in ((0, 8, 0.88), (1, 9, 0.89), (2, 10, 0.90))]


def render(number: int, runs, config=PAPER) -> str:
    table = tables.build(number, runs, config)
    return tables.render(table, tables.is_synthetic(runs))


def test_table2_known_cells_and_layout():
    tex = render(2, runs_table(table2_runs()))
    rows = body_rows(tex)
    assert len(rows) == 25  # 5 batch sizes x 5 optimizers
    assert all(len(row) == 8 for row in rows)
    first = rows[0]
    assert first[:2] == ["16", "SGD"]
    assert first[2] == r"$9.0\pm 1.0$"  # tau_interp 8, 9, 10
    assert first[5] == r"$0.890\pm 0.010$"  # val_acc_best 0.88, 0.89, 0.90
    assert first[7] == r"$+0.030\pm 0.010$"  # repair gap, signed
    assert rows[1][2] == cells.NO_DATA  # b=16 momentum: no runs
    assert r"Val Acc${}_{300}$" in tex
    assert "SYNTHETIC" not in tex


def test_missing_runs_are_marked_and_counted():
    runs = runs_table([*table2_runs(), {"b": 16, "sigma_w": 0.1, "seed": 3,
                                        "status": "missing"}])
    tex = render(2, runs)
    first = body_rows(tex)[0]
    assert first[2] == r"$9.0\pm 1.0$\textsuperscript{\textcolor{red}{$-1$}}"
    assert "1 runs behind this table are missing: partial results" in tex
    assert tables.build(2, runs, PAPER).missing == [runs["run_id"].iloc[3]]


def test_strict_write_names_the_missing_runs(tmp_path):
    runs = runs_table([*table2_runs(), {"b": 16, "sigma_w": 0.1, "seed": 7,
                                        "status": "missing"}])
    path = tmp_path / "runs.parquet"
    runs.to_parquet(path)
    out = tables.write_table(2, path, CONFIG, tmp_path / "t2.tex")
    assert out.read_text().count(r"$-1$") >= 6
    with pytest.raises(tables.PartialResultsError, match=r"1 runs are missing: .*s7"):
        tables.write_table(2, path, CONFIG, tmp_path / "strict.tex", strict=True)
    assert not (tmp_path / "strict.tex").exists()


def test_never_and_partly_reached_events():
    never = render(2, runs_table(table2_runs(tau_interp=None, val_acc_interp=None,
                                             repair_gap=None)))
    first = body_rows(never)[0]
    assert first[2] == cells.NEVER and first[4] == cells.NEVER
    assert cells.LEGEND["never"] in never
    runs = table2_runs()
    runs[2].update(tau_interp=None, val_acc_interp=None, repair_gap=None)
    partial = body_rows(render(2, runs_table(runs)))[0]
    assert partial[2] == r"$8.5\pm 0.7$\textsuperscript{$2/3$}"


def test_diverged_runs_are_counted_and_marked():
    runs = table2_runs()
    runs[0].update(status="diverged", diverged=True)
    tex = render(2, runs_table(runs))
    assert body_rows(tex)[0][3] == r"$11.0\pm 1.0$\textsuperscript{d1}"
    assert "1 runs behind this table diverged" in tex


def lr_l2_rows(lr0, l2, b, seeds, family="lr_l2", acc=(0.9, 0.8, 0.7, 0.6, 0.5)):
    return [{"family": family, "lr0": lr0, "l2": l2, "b": b, "sigma_w": s, "seed": seed,
             "test_acc_best": a + 0.01 * k, "train_acc_last": 1.0}
            for s, a in zip(FIVE, acc, strict=True) for k, seed in enumerate(seeds)]


def test_table4_spread_train_and_single_seed_daggers():
    runs = runs_table([*lr_l2_rows(1e-3, 0.0, 16, (0, 1), family="main"),
                       *lr_l2_rows(1e-2, 1e-3, 16, (42,)),
                       *lr_l2_rows(1e-2, 1e-2, 128, (0, 1))[:-1],  # sigma 2.5 single seed
                       {"family": "main", "optimizer": "adam", "b": 16, "status": "missing"}])
    tex = render(4, runs)
    rows = body_rows(tex)
    assert len(rows) == 28  # 2 panels x (12 lr x L2 rows + Adam + 5k epochs)
    assert {len(row) for row in rows} == {9, 10}  # Adam, 5k rows: a 2-column label
    main_row = rows[0]
    assert main_row[:3] == ["$10^{-3}$", "$0$", "cos"]
    assert main_row[3] == r"$90.5{\pm}0.7$"  # 0.90 and 0.91
    assert main_row[8] == "$40.0$"  # spread: 90.5 - 50.5
    assert main_row[9] == "$100.0$"
    single = rows[5]  # b=16, lr 1e-2, L2 1e-3, seed 42 only
    assert single[:2] == ["$10^{-2}$", "$10^{-3}$"]
    assert single[3] == "$90.0$" and single[9] == r"$100.0^{\dagger}$"
    mixed = rows[14 + 7]  # b=128, lr 1e-2, L2 1e-2
    assert mixed[3] == r"$90.5{\pm}0.7$" and mixed[7] == r"$50.0^{\dagger}$"
    assert mixed[9] == "$100.0$"
    assert rows[12][0] == r"\multicolumn{2}{l}{Adam $\eta{=}10^{-3}$}"
    assert rows[12][2] == cells.NO_DATA + r"\textsuperscript{\textcolor{red}{$-1$}}"
    assert r"$5{\times}10^{-3}$" in tex


def caption(tex: str) -> str:
    return tex.split(r"\caption{", 1)[1].split(r"\label", 1)[0]


def test_caption_states_the_seed_count_or_its_range():
    assert "over $n=3$ seeds" in caption(render(2, runs_table(table2_runs())))
    # Table 5: ResNet-9 SGD with two seeds, ResNet-56 SGD with one (a cut-down config)
    runs = runs_table([*lr_l2_rows(1e-3, 0.0, 16, (0, 1), family="main"),
                       *[{**row, "arch": "resnet56"}
                         for row in lr_l2_rows(1e-3, 0.0, 16, (42,), family="depth")]])
    assert "over $n=1$--$2$ seeds" in caption(render(5, runs))


def test_table5_names_the_depth_familys_optimizers_it_has_no_rows_for():
    """Table 5 has the paper's SGD and Adam rows; any other optimizer the depth family ran
    (the paper's own, or an extension's Lion) is named in the caption, not dropped unsaid."""
    depth = [{**row, "arch": "resnet56"} for row in lr_l2_rows(1e-3, 0.0, 16, (0,), "depth")]
    runs = runs_table([*depth, *({**row, "optimizer": opt} for row in depth
                                 for opt in ("lion", "adamw", "adam"))])
    tex = render(5, runs)
    assert "the depth family's runs of AdamW, Lion are not shown" in caption(tex)
    assert {row[1] for row in body_rows(tex)} == {"SGD", "Adam"}
    assert "not shown" not in caption(render(5, runs[runs["optimizer"].isin(["sgd", "adam"])]))


def test_every_table_renders_from_a_small_synthetic_config():
    from initmem.records import synthetic

    config = small_config()
    runs, _ = synthetic.generate(config, missing=0.05)
    for number in artifacts.TABLES:
        tex = render(number, runs, config)
        assert tex.count(tables.SYNTHETIC_MARK) == 2  # above the table and in the caption
        assert tex.count(r"\begin{tabular}") == 1 and tex.count(r"\end{tabular}") == 1
        assert rf"\label{{tab:table{number}}}" in tex


def test_table1_comes_from_the_config():
    config = yaml.safe_load(CONFIG.read_text())
    config["optimizers"]["adamw"]["hyperparameters"] = {"weight_decay": 5e-4}
    tex = render(1, runs_table([]), config)
    rows = body_rows(tex)
    assert len(rows) == len(config["optimizers"])
    # the momentum column as the paper's: SGD's 0, the Adam family's beta_1, Muon's none
    assert "SGD & $10^{-3}$ & $0$ & $0$ & --- " in tex
    assert r"AdamW & $10^{-3}$ & $\beta_{1}{=}0.9$ & $5{\times}10^{-4}$ & " \
           r"Decoupled weight decay (default) \\" in tex  # the decay not again in the notes
    assert "Muon & $10^{-3}$ & --- & $10^{-4}$" in tex
    assert r"\texttt{adam\_weight\_decay}" in tex  # the caption names both readings


def test_table1_shows_the_keras_default_reading_of_muon_decay_where_set():
    config = yaml.safe_load(CONFIG.read_text())
    config["optimizers"]["muon"]["hyperparameters"]["adam_weight_decay"] = 0.004
    tex = render(1, runs_table([]), config)
    muon = next(row for row in body_rows(tex) if row[0] == "Muon")
    assert muon[3].startswith("$10^{-4}$ (AdamW path $") and "AdamW path $10^{-4}$" not in tex


def test_a_generated_record_marks_the_table_synthetic():
    runs = runs_table([*table2_runs(), {"b": 256, "record_source": "generated"}])
    assert SYNTHETIC_MARK in render(2, runs)
    assert SYNTHETIC_MARK in render(7, runs)


def test_templates_reject_undefined_names():
    template = tables.environment().from_string(r"\VAR{rows | length} \VAR{caption}")
    with pytest.raises(jinja2.UndefinedError):
        template.render(rows=[])


def test_table7_delta_and_bold_best_row():
    runs = runs_table([{"family": "best_recipe", "optimizer": opt, "b": b, "sigma_w": s,
                        "seed": k, "test_acc_best": acc + 0.002 * k, "train_acc_last": 1.0,
                        "tau_interp": 100 + k, "tau_best": 190}
                       for opt, b, acc in (("sgd_momentum", 128, 0.942), ("adam", 16, 0.9))
                       for s in (0.1, 2.5) for k in (0, 1)])
    rows = body_rows(render(7, runs))
    sgd128 = rows[1]
    assert sgd128[:2] == ["", "128"]
    assert sgd128[2] == r"$\mathbf{94.3{\pm}0.1}$"  # 94.2 and 94.4
    assert sgd128[6] == r"$100{\pm}1$ / $100{\pm}1$"
    assert sgd128[7] == r"$190{\pm}0$ / $190{\pm}0$"
    assert sgd128[8] == r"$\mathbf{0.0}$"
    adam16 = rows[3]
    assert adam16[:3] == ["Adam", "16", r"$90.1{\pm}0.1$"]
    assert rows[0][2] == cells.NO_DATA  # SGD b=16: no runs


def test_cli_writes_a_table(tmp_path):
    path = tmp_path / "runs.parquet"
    runs_table(table2_runs()).to_parquet(path)
    out = tmp_path / "tables" / "table3.tex"
    assert main(["table", "3", "--runs", str(path), "--config", str(CONFIG),
                 "--out", str(out)]) == 0
    assert r"\sigma_{w}=2.5" in out.read_text()
    cells_csv = pd.read_csv(out.with_suffix(".csv"))  # its cells, one per row
    assert len(cells_csv) == 25 * 6 and set(cells_csv["table"]) == {3}
    assert main(["table", "1", "--runs", str(path), "--config", str(CONFIG),
                 "--out", str(tmp_path / "t1.tex")]) == 0


def test_table1_needs_only_the_config_and_shows_resolved_recipes(tmp_path):

    from initmem.analysis.tables import write_table

    config = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())
    del config["common"]["lr0"]  # the Recipe default (1e-3) must still show
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    text = write_table(1, None, path, tmp_path / "t1.tex").read_text()
    assert r"AdamW & $10^{-3}$ & $\beta_{1}{=}0.9$ & $10^{-4}$" in text
    assert "over 300 epochs" in text and "SYNTHETIC" not in text


def test_tables_2_to_7_need_runs(tmp_path):
    from initmem.analysis.tables import write_table
    from initmem.errors import InputError

    with pytest.raises(InputError, match="pass --runs"):
        write_table(2, None, CONFIG, tmp_path / "t2.tex")


@pytest.mark.parametrize("name", ["lion", "laptop"])
def test_tables_2_and_3_show_only_the_planned_rows_a_rule_between_batch_sizes(name):
    """A config of three optimizers at one b (lion) or of an excluded pair (laptop: no
    AdamW at b = 128): one row per planned (b, optimizer), in the config's optimizer
    order, a rule exactly where b changes; no `??` row for a cell it never planned."""
    from initmem.records import synthetic

    config = load_config(Path(__file__).parents[1] / "config" / f"{name}.yaml")
    runs, _ = synthetic.generate(config)
    planned = tables.rows.planned_rows(tables.rows.Sheet(artifacts.table(2), config))
    for number in (2, 3):
        tex = render(number, runs, config)
        body = tex[tex.index(r"\midrule") + len(r"\midrule"):tex.index(r"\bottomrule")]
        groups = [body_rows(part) for part in body.split(r"\midrule")]
        assert [[int(row[0]) for row in group] for group in groups] == [
            [b for b, _ in planned if b == first]
            for first in dict.fromkeys(b for b, _ in planned)]
        assert cells.NO_DATA not in tex
