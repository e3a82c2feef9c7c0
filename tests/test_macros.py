"""The prose's numbers as macros: values by hand, markers, placeholders, names."""

import math
import re

import pytest
from analysis_frames import epochs_table, runs_table, small_config

from initmem.analysis import macros
from initmem.analysis.tables.cells import NO_DATA
from initmem.cli import main

QUOTES = {q.name: q for q in macros.QUOTES}
FIVE = (0.1, 0.5, 1.0, 1.8, 2.5)


def sgd_b128(**fields) -> list[dict]:
    """Main-grid SGD at b=128 over a 3-point sweep: 85.0, 70.0, 58.5 % mean."""
    return [{"b": 128, "sigma_w": s, "seed": k, "test_acc_best": a + 0.01 * (k - 0.5),
             **fields}
            for s, a in ((0.1, 0.85), (1.3, 0.70), (2.5, 0.585)) for k in (0, 1)]


def test_spread_and_test_quotes_by_hand():
    runs = runs_table(sgd_b128())
    value, frame = macros.quote_value(QUOTES["SpreadSGDbOneTwoEight"], runs)
    assert value == pytest.approx(26.5) and len(frame) == 6
    assert macros.quote_value(QUOTES["TestSGDbOneTwoEightSigmaLow"], runs)[0] == pytest.approx(85)
    assert macros.quote_value(QUOTES["TestSGDbOneTwoEightSigmaHigh"], runs)[0] == pytest.approx(
        58.5)
    text = macros.render_value(QUOTES["SpreadSGDbOneTwoEight"], *macros.quote_value(
        QUOTES["SpreadSGDbOneTwoEight"], runs))
    assert text == r"\ensuremath{26.5}"


def test_a_quote_reads_the_family_that_plays_its_role():
    """A config whose main sweep is a family named otherwise (`role: main`) quotes the
    same numbers from it; without the config, the role is the family of its name."""
    runs = runs_table(sgd_b128(family="sweep"))
    config = {"families": {"sweep": {"role": "main"}}}
    quote = QUOTES["SpreadSGDbOneTwoEight"]
    assert macros.quote_value(quote, runs, config=config)[0] == pytest.approx(26.5)
    assert math.isnan(macros.quote_value(quote, runs)[0])  # no family named main


def test_partial_and_absent_inputs_are_visible():
    runs = runs_table([*sgd_b128(), {"b": 128, "sigma_w": 1.3, "seed": 2, "status": "missing"}])
    quote = QUOTES["SpreadSGDbOneTwoEight"]
    assert macros.render_value(quote, *macros.quote_value(quote, runs)) == (
        r"\ensuremath{26.5}\textsuperscript{\textcolor{red}{$-1$}}")
    absent = QUOTES["SpreadAdambOneSix"]
    assert macros.render_value(absent, *macros.quote_value(absent, runs)) == NO_DATA


def test_delta_quote_is_the_absolute_difference_of_the_extremes():
    runs = runs_table([{"family": "best_recipe", "optimizer": "adam", "b": 16, "lr0": 1e-3,
                        "augment": True, "epochs": 200, "sigma_w": s, "seed": k,
                        "test_acc_best": a} for s, a in ((0.1, 0.895), (2.5, 0.901))
                       for k in (0, 1)])
    value, _ = macros.quote_value(QUOTES["DeltaBestAdambOneSix"], runs)
    assert value == pytest.approx(0.6)


def test_clock_quotes_are_the_papers_arithmetic():
    runs = runs_table([{"b": 128, "status": "missing"},
                       {"family": "lr_l2", "lr0": 1e-2, "l2": 5e-3, "b": 128, "seed": 42}])
    quote = QUOTES["TSGDbOneTwoEight"]
    value, frame = macros.quote_value(quote, runs)
    assert value == pytest.approx(300 * 313 * 1e-6 / 128)  # 7.34e-4, from the spec alone
    assert macros.render_value(quote, value, frame) == r"\ensuremath{7.3\cdot 10^{-4}}"
    l2 = QUOTES["TLtwoLrMidLtwoMidbOneTwoEight"]
    assert macros.render_value(l2, *macros.quote_value(l2, runs)) == r"\ensuremath{4.7}"
    assert macros.scientific(0.939) == "0.94" and macros.scientific(0.0122) == r"1.2\cdot 10^{-2}"


def test_beta_quotes_need_the_epochs():
    runs = runs_table(sgd_b128())
    rows = [{"epoch": e, "b": 128, "sigma_w": s, "seed": k, "val_acc": 0.9 - 0.1 * s / e}
            for e in range(1, 21) for s in (0.1, 2.5) for k in (0, 1)]
    epochs = epochs_table(rows)
    # |beta(t)| = 0.1 / t: the last 10% of epochs are 19 and 20, the first 1 and 2
    final_value = 0.1 * (1 / 19 + 1 / 20) / 2
    final = QUOTES["BetaFinalSGDbOneTwoEight"]
    assert macros.quote_value(final, runs, epochs)[0] == pytest.approx(final_value)
    decades = macros.quote_value(QUOTES["BetaDecadesSGDbOneTwoEight"], runs, epochs)[0]
    assert decades == pytest.approx(math.log10(0.1 / final_value))
    assert macros.render_value(final, *macros.quote_value(final, runs)) == NO_DATA


def test_rendered_file_names_and_marks(tmp_path):
    config = small_config()
    runs = runs_table([*sgd_b128(), {"b": 16, "record_source": "generated"}])
    text = macros.render(runs, None, config)
    names = re.findall(r"^\\newcommand\{\\([A-Za-z]+)\}", text, flags=re.M)
    assert len(names) == len(set(names)) == len(text.strip().splitlines()) - 1
    assert {q.name for q in macros.QUOTES} < set(names)
    assert r"\newcommand{\NumRunsMain}{125}" in text  # 5 sigma_w x 5 x 5 x 1 seed
    assert r"\newcommand{\SyntheticMark}{\textcolor{red}" in text
    trained = macros.render(runs_table(sgd_b128()), None, config)
    assert r"\newcommand{\SyntheticMark}{}" in trained
    assert r"\newcommand{\RecordSource}{trained}" in trained


def test_cli_writes_the_macros(tmp_path):
    import yaml

    runs, epochs, config = (tmp_path / n for n in ("runs.parquet", "epochs.parquet",
                                                   "config.yaml"))
    runs_table(sgd_b128()).to_parquet(runs)
    epochs_table([{"epoch": 1, "b": 128, "sigma_w": s, "val_acc": 0.8} for s in FIVE]
                 ).to_parquet(epochs)
    config.write_text(yaml.safe_dump(small_config()))
    out = tmp_path / "paper" / "macros.tex"
    assert main(["macros", "--runs", str(runs), "--epochs", str(epochs), "--config",
                 str(config), "--out", str(out)]) == 0
    assert r"\newcommand{\SpreadSGDbOneTwoEight}{\ensuremath{26.5}}" in out.read_text()


def test_max_spread_is_unknown_while_any_configuration_is():
    rows = [{"family": fam, "arch": arch, "augment": aug, "optimizer": "adam", "b": b,
             "sigma_w": s, "test_acc_best": 0.85 + (0.02 if s == 0.1 and b == 16 else 0)}
            for fam, arch, aug in (("norm_aug", "resnet9", True), ("norm_aug", "resnet9_ln",
                                                                   True),
                                   ("main", "resnet9", False))
            for b in (16, 128) for s in FIVE]
    quote = QUOTES["SpreadNormAugAdamMax"]
    assert macros.quote_value(quote, runs_table(rows))[0] == pytest.approx(2.0)
    no_ln_128 = [r for r in rows if not (r["arch"] == "resnet9_ln" and r["b"] == 128
                                         and r["sigma_w"] == 2.5)]
    assert math.isnan(macros.quote_value(quote, runs_table(no_ln_128))[0])


def test_the_design_numbers_come_from_the_runs_of_any_config():
    """The demo sets its main grid's epochs per variant (2, and 20 for its interpolating
    cell); the paper's family recipe sets 300: both read from the expanded runs."""
    from pathlib import Path

    from initmem.plan import grid

    root = Path(__file__).parents[1]
    demo = macros.design_numbers(grid.load_config(root / "config" / "demo.yaml"))
    paper = macros.design_numbers(grid.load_config(root / "config.yaml"))
    assert demo["EpochsMain"] == "2/20" and paper["EpochsMain"] == "300"
    assert paper["NumRunsMain"] == "6{,}250"
