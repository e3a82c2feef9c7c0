"""`initmem claims --plan`: what a config can judge before training, on small configs."""

import math

import pytest
import yaml
from workflow_helpers import TEST_CONFIG

from initmem.analysis import design
from initmem.cli import main
from initmem.plan import cells, grid, schedule
from initmem.plan.spec import Recipe


def config_with(**main_family) -> dict:
    """The test config with five sigma_w, three seeds and the main family's recipe set."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["sigma_sets"]["five"] = [0.1, 0.5, 1.0, 1.8, 2.5]
    config["seed_sets"]["three"] = [0, 1, 2]
    family = config["families"]["main"]
    family.update(sigma_w="five", seeds="three")
    family["recipe"].update(main_family)
    family["grid"]["b"] = [8, 32]
    family["recipe"].pop("b")
    return grid.validate_config(config)


def claim(**overrides) -> dict:
    base = {"id": "sgd_remembers", "section": "§3", "sentence": "SGD remembers.",
            "cells": {"sgd": {"family": "main", "optimizer": "sgd", "b": 8},
                      "adam": {"family": "main", "optimizer": "adam", "b": 8}},
            "values": {"spread_sgd": {"stat": "spread", "cell": "sgd"},
                       "spread_adam": {"stat": "spread", "cell": "adam"}},
            "gates": {"clock": [{"cell": "adam", "name": "T_adapt", "paper": 1.0,
                                 "needs": "reach"}]},
            "holds": ["spread_sgd >> spread_adam"],
            "paper": {"spread_sgd": 20.0, "spread_adam": 1.0}}
    return {**base, **overrides}


def test_final_clocks_are_the_sums_over_the_schedule():
    recipe = Recipe("main", "resnet9", "sgd", 16, 3, lr0=0.01, l2=1e-3, train_subset=64)
    k_total = recipe.total_steps
    rates = [0.01 * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * k / k_total)))
             for k in range(k_total)]
    clocks = schedule.final_clocks(recipe)
    assert clocks["T_adapt"] == pytest.approx(sum(rates))
    assert clocks["T_L2"] == pytest.approx(1e-3 * sum(rates))
    assert clocks["T_SGD"] == pytest.approx(sum(r * r for r in rates) / 16)


def test_planned_runs_carry_each_batch_sizes_own_updates_and_clocks():
    table = cells.planned_runs(config_with(epochs=10))
    by_b = table.groupby("b")[["updates", "T_adapt"]].first()
    assert by_b.loc[8, "updates"] == 10 * 64 // 8 and by_b.loc[32, "updates"] == 10 * 64 // 32
    assert by_b.loc[8, "T_adapt"] > 3 * by_b.loc[32, "T_adapt"]


def plan(config: dict, noise_sd: float = 1.0, **overrides) -> str:
    return design.plan_table([claim(**overrides)], config, None, noise_sd)["plan"][0]


def test_the_plan_names_each_obstacle_before_training():
    assert plan(config_with(epochs=10), cells={**claim()["cells"], "adam": {
        "family": "main", "optimizer": "muon"}}).startswith("cannot: not in the config (adam)")
    short = plan(config_with(epochs=10))  # 80 updates of 1e-3: T_adapt 0.04 of 1.0
    assert short.startswith("out of regime: adam: T_adapt reached")
    assert f"80 updates, BatchNorm needs {design.BN_UPDATES}" in short
    noisy = plan(config_with(epochs=100, lr0=0.1), noise_sd=12.0)
    assert noisy.startswith("refutable only: sgd runs 3 seeds, confirming needs")
    assert plan(config_with(epochs=100, lr0=0.1), noise_sd=0.5).startswith(
        "confirmable with power")


def test_a_cell_the_config_leaves_out_is_planned_at_its_scale():
    """The reference's (the paper's) adam cell, at the config's data and width, says why
    a small study leaves it out, or that it could run it, with seeds and hours."""
    small = config_with(epochs=100, lr0=0.1)
    small["families"]["main"]["grid"]["optimizer"] = ["sgd"]
    small = grid.validate_config(small)
    halved = {**small, "common": {**small["common"], "train_subset": 32}}
    at_32 = design.Study.at_scale(halved, config_with(epochs=10))
    assert set(at_32.table["train_subset"]) == {32}
    assert set(at_32.table["optimizer"]) == {"sgd", "adam"}
    short = design.plan_table([claim()], small, None, 0.5, config_with(epochs=10))["plan"][0]
    assert short.startswith("cannot: not in the config (adam); at its scale out of regime: "
                            "adam: T_adapt reached")
    assert "adam: 80 updates, BatchNorm needs" in short  # 10 epochs of 64 images at b = 8
    long = design.plan_table([claim()], small, None, 0.5, config_with(epochs=100, lr0=0.1))
    assert long["plan"][0].startswith("cannot: not in the config (adam); at its scale its "
                                      "clocks and BatchNorm updates would suffice (sgd: 3 of")
    assert long["device_hours"][0] > 0


def test_batchnorm_needs_about_six_hundred_updates():
    """From 1,000x off to within 2x at Keras' momentum 0.99: 0.99^k <= 0.002."""
    assert design.BN_UPDATES == 619
    assert 1000 * 0.99 ** design.BN_UPDATES <= 2 < 1000 * 0.99 ** (design.BN_UPDATES - 1)


def test_cli_plans_a_config(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_with(epochs=10)))
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump({"claims": [claim()]}))
    assert main(["claims", "--plan", "--config", str(config), "--claims", str(claims),
                 "--out-csv", str(tmp_path / "plan.csv"), "--out-md",
                 str(tmp_path / "plan.md"), "--draws", "2"]) == 0
    looks = capsys.readouterr().out
    assert "staged: 5 looks" in looks and "fixed design: " in looks
    text = (tmp_path / "plan.md").read_text()
    assert text.startswith("| claim | plan | device-hours (H100-class GPU")
    assert "`sgd_remembers` | out of regime" in text


def test_the_gpu_first_study_runs_every_claims_cells_inside_its_clocks():
    """config/gpu_first.yaml: every compared cell of every claim is run, at clocks the
    gates accept, with the updates BatchNorm needs (the seeds: README's table)."""
    from pathlib import Path

    from initmem.analysis import claims, gates

    root = Path(__file__).parents[1]
    table = cells.planned_runs(grid.load_config(root / "config" / "gpu_first.yaml"))
    for c in claims.read_claims(root / "paper" / "claims.yaml"):
        for value in c["values"].values():
            cell = claims.select_cell(table, c["cells"][value["cell"]])
            assert not cell.empty, (c["id"], value["cell"])
            assert cell["updates"].min() >= design.BN_UPDATES, (c["id"], value["cell"])
        for clock in c["gates"]["clock"]:
            cell = claims.select_cell(table, c["cells"][clock["cell"]])
            assert gates.clock(clock["cell"], cell, clock).passed, (c["id"], clock)
