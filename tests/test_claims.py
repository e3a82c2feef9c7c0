"""The claims evaluator on hand-made runs tables: each verdict, and the claims file."""

import math
from pathlib import Path

import pytest
import yaml
from analysis_frames import runs_table

from initmem.analysis import claims
from initmem.cli import main

CLAIMS = Path(__file__).parents[1] / "paper" / "claims.yaml"
FIVE = (0.1, 0.5, 1.0, 1.8, 2.5)


def sweep(optimizer: str, b: int, top: float, drop: float, seeds=(0, 1, 2), noise=0.004,
          train=1.0, **fields) -> list[dict]:
    """Runs over the five sigma_w: test accuracy falls linearly by `drop` from `top`,
    seeds spread by +-noise."""
    return [{"optimizer": optimizer, "b": b, "sigma_w": s, "seed": k,
             "test_acc_best": top - drop * i / 4 + noise * (k - 1), "train_acc_last": train,
             **fields}
            for i, s in enumerate(FIVE) for k in seeds]


def claim(**overrides) -> dict:
    base = {"id": "sgd_beats_adam", "section": "§3.1", "sentence": "SGD remembers.",
            "cells": {"sgd": {"family": "main", "optimizer": "sgd", "b": 16},
                      "adam": {"family": "main", "optimizer": "adam", "b": 16}},
            "values": {"spread_sgd": {"stat": "spread", "cell": "sgd"},
                       "spread_adam": {"stat": "spread", "cell": "adam"},
                       "train": {"stat": "min_train_acc", "cell": "sgd"}},
            "requires": ["train >= 99.5"], "holds": ["spread_sgd >> spread_adam"],
            "paper": {"spread_sgd": 22.8, "spread_adam": 1.6}}
    return {**base, **overrides}


def judged(rows: list[dict], **overrides):
    runs = runs_table(rows)
    return claims.evaluate(claim(**overrides), runs, None, claims.pooled_std(runs))


def test_a_large_sgd_spread_over_a_small_adam_one_holds():
    result = judged([*sweep("sgd", 16, 0.40, 0.15), *sweep("adam", 16, 0.40, 0.01)])
    assert result.verdict == "holds", result.reason
    assert result.values["spread_sgd"].value == pytest.approx(15.0)
    assert result.values["spread_adam"].value == pytest.approx(1.0)
    row = result.row()
    assert "spread_sgd = 15 (paper 22.8)" in row["values"]


def test_equal_spreads_fail_the_ordering():
    result = judged([*sweep("sgd", 16, 0.40, 0.05), *sweep("adam", 16, 0.40, 0.05)])
    assert result.verdict == "fails"
    assert result.reason.startswith("not spread_sgd >> spread_adam")


def test_a_difference_within_seed_noise_fails():
    """A 2 pp difference with seeds spread by +-5 pp is not separable."""
    result = judged([*sweep("sgd", 16, 0.40, 0.04, noise=0.05),
                     *sweep("adam", 16, 0.40, 0.02, noise=0.05)])
    assert result.verdict == "fails"


def test_cells_not_run_cannot_be_judged():
    result = judged(sweep("sgd", 16, 0.40, 0.15))
    assert result.verdict == "cannot be judged"
    assert "spread_adam: not run" in result.reason


def test_a_missing_sigma_w_cannot_be_judged():
    rows = [r for r in sweep("adam", 16, 0.4, 0.01) if r["sigma_w"] != 1.8]
    result = judged([*sweep("sgd", 16, 0.40, 0.15), *rows])
    assert result.verdict == "cannot be judged"
    assert "no test_acc_best at sigma_w 1.8" in result.reason


def test_a_failed_presupposition_cannot_be_judged_and_says_the_value():
    result = judged([*sweep("sgd", 16, 0.40, 0.15, train=0.97),
                     *sweep("adam", 16, 0.40, 0.01)])
    assert result.verdict == "cannot be judged"
    assert "presupposition train >= 99.5 fails at this scale: 97 >= 99.5" in result.reason


def test_single_seeds_borrow_the_pooled_noise_or_cannot_be_judged():
    single = [*sweep("sgd", 16, 0.40, 0.15, seeds=(0,)), *sweep("adam", 16, 0.4, 0.01,
                                                                 seeds=(0,))]
    assert judged(single).verdict == "cannot be judged"  # no multi-seed cell anywhere
    with_noise = [*single, *sweep("sgd", 128, 0.4, 0.1, noise=0.01, seeds=(0, 1))]
    result = judged(with_noise)
    assert result.verdict == "holds"
    assert "pooled from 5 multi-seed cells" in result.reason
    # two seeds 1 pp apart: a standard deviation of 1 / sqrt(2) pp
    assert claims.pooled_std(runs_table(with_noise))[0] == pytest.approx(1 / math.sqrt(2))


def test_a_spread_near_zero_is_within_noise_and_a_large_one_is_not():
    rows = [*sweep("sgd", 16, 0.40, 0.001, noise=0.01), *sweep("adam", 16, 0.4, 0.2)]
    result = judged(rows, holds=["spread_sgd ~ 0", "spread_adam >> 0"], requires=[])
    assert result.verdict == "holds", result.reason


def test_differences_of_values_compare_with_their_noise():
    rows = [*sweep("sgd", 16, 0.40, 0.20), *sweep("adam", 16, 0.40, 0.02),
            *sweep("sgd", 128, 0.40, 0.20), *sweep("adam", 128, 0.40, 0.18)]
    cells = {"sgd": {"optimizer": "sgd", "b": 16}, "adam": {"optimizer": "adam", "b": 16},
             "sgd128": {"optimizer": "sgd", "b": 128}, "adam128": {"optimizer": "adam", "b": 128}}
    values = {f"s_{c}": {"stat": "spread", "cell": c} for c in cells}
    result = judged(rows, cells=cells, values=values, requires=[],
                    holds=["s_sgd - s_adam >> s_sgd128 - s_adam128"])
    assert result.verdict == "holds", result.reason


def test_clock_ranges_select_runs_by_their_final_clock():
    runs = runs_table([*sweep("sgd", 16, 0.4, 0.2, T_L2=0.01), *sweep("adam", 16, 0.4, 0.01,
                                                                       T_L2=3.0)])
    assert set(claims.select_cell(runs, {"clock": {"T_L2": {"min": 1}}})["optimizer"]) \
        == {"adam"}
    assert set(claims.select_cell(runs, {"l2": {"max": 0.5}})["optimizer"]) == {"sgd", "adam"}


def test_the_paper_claims_file_is_valid_and_covers_the_issue():
    parsed = claims.read_claims(CLAIMS)
    ids = {c["id"] for c in parsed}
    assert len(parsed) >= 16
    for needed in ("sgd_interpolates_yet_remembers_b128", "adaptive_forget_b16",
                   "momentum_helps_at_small_batch_only", "lr_with_l2_collapses_spread",
                   "long_training_leaves_spread", "larger_batch_keeps_more_memory",
                   "beta_decays_for_adam_flat_for_sgd", "best_recipe_erases_memory",
                   "deeper_nets_fail_to_train_at_large_sigma", "l2_clock_threshold"):
        assert needed in ids


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["claims"][0]["values"]["spread"].update(stat="median"), "is not one of"),
    (lambda c: c["claims"][0]["values"]["spread"].update(cell="nope"), "uses cell 'nope'"),
    (lambda c: c["claims"][0].update(holds=["spread > 3"]), "is not 'a OP b'"),
    (lambda c: c["claims"][0].update(holds=["spreads >> 0"]), "names 'spreads'"),
    (lambda c: c["claims"].append(c["claims"][0]), "claim ids repeat"),
    (lambda c: c["claims"][0].pop("sentence"), "'sentence' is a required property"),
])
def test_a_bad_claims_file_names_the_problem(tmp_path, edit, message):
    data = yaml.safe_load(CLAIMS.read_text())
    edit(data)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(claims.ClaimsError, match=message):
        claims.read_claims(path)


def test_a_claims_file_with_a_repeated_key_is_refused(tmp_path):
    """Claims are read as strictly as configs: the second `section` would win silently."""
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS.read_text().replace("  - id:", "  - section: x\n    id:", 1))
    with pytest.raises(claims.ClaimsError, match="duplicate key 'section'"):
        claims.read_claims(path)


def test_cli_writes_the_csv_and_the_latex_table(tmp_path):
    runs = runs_table([*sweep("sgd", 128, 0.40, 0.15), *sweep("adam", 128, 0.40, 0.01)])
    runs.to_parquet(tmp_path / "runs.parquet")
    assert main(["claims", "--runs", str(tmp_path / "runs.parquet"), "--claims", str(CLAIMS),
                 "--out-csv", str(tmp_path / "c.csv"), "--out-tex", str(tmp_path / "c.tex"),
                 "--out-md", str(tmp_path / "c.md")]) == 0
    markdown = (tmp_path / "c.md").read_text().splitlines()
    assert markdown[0] == "| claim | section | ours (paper) | verdict | why |"
    assert len(markdown) == 2 + len(claims.read_claims(CLAIMS))
    tex = (tmp_path / "c.tex").read_text()
    assert r"\label{tab:claims}" in tex and "adaptive\\_forget\\_b128" in tex
    assert "SYNTHETIC" not in tex


def test_interpolated_counts_the_runs_that_reached_tau_interp():
    rows = [*sweep("sgd", 16, 0.4, 0.15, tau_interp=40), *sweep("adam", 16, 0.4, 0.01)]
    rows[-1 - 15]["tau_interp"] = None  # one SGD run never reached 99.5%
    result = judged(rows, values={**claim()["values"],
                                  "interp": {"stat": "interpolated", "cell": "sgd"}},
                    requires=["interp >= 100"])
    assert result.values["interp"].value == pytest.approx(100 * 14 / 15)
    assert result.verdict == "cannot be judged"
    assert "presupposition interp >= 100 fails" in result.reason
