"""initmem.metrics on tiny hand-made tables, every expected value worked out by hand."""

import math

import numpy as np
import pytest
from analysis_frames import epochs_table, runs_table

from initmem.analysis import metrics
from initmem.plan.cells import recipe_keys, select
from initmem.plan.schedule import clock_estimate, schedule_clocks
from initmem.plan.spec import Recipe, Run
from initmem.vocabulary import sigma_w_key


def test_spread_is_max_minus_min_of_seed_means_per_group():
    runs = runs_table([
        {"sigma_w": 0.1, "seed": 0, "test_acc_best": 0.80},
        {"sigma_w": 0.1, "seed": 1, "test_acc_best": 0.90},  # mean 0.85
        {"sigma_w": 1.0, "seed": 0, "test_acc_best": 0.70},  # mean 0.70
        {"sigma_w": 2.5, "seed": 0, "test_acc_best": 0.60},
        {"sigma_w": 2.5, "seed": 1, "test_acc_best": 0.70},  # mean 0.65
        {"optimizer": "adam", "sigma_w": 0.1, "test_acc_best": 0.84},
        {"optimizer": "adam", "sigma_w": 2.5, "test_acc_best": 0.83},
    ])
    out = metrics.spread(runs, keys=["optimizer"]).set_index("optimizer")
    assert out.loc["sgd", "spread"] == pytest.approx(0.20)
    assert out.loc["sgd", "sigma_max"] == 0.1 and out.loc["sgd", "sigma_min"] == 2.5
    assert out.loc["sgd", "n_sigma"] == 3
    assert out.loc["adam", "spread"] == pytest.approx(0.01)
    # a restricted sweep: 0.85 - 0.70
    sub = metrics.spread(runs, keys=["optimizer"], sigma_values=[0.1, 1.0])
    assert sub.set_index("optimizer").loc["sgd", "spread"] == pytest.approx(0.15)


def test_missing_runs_drop_out_of_the_spread():
    runs = runs_table([
        {"sigma_w": 0.1, "test_acc_best": 0.8},
        {"sigma_w": 0.1, "seed": 1, "status": "missing"},
        {"sigma_w": 2.5, "test_acc_best": 0.5},
    ])
    assert metrics.spread(runs, keys=["family"])["spread"].iloc[0] == pytest.approx(0.3)


def test_seed_stats_use_the_sample_std():
    runs = runs_table([{"seed": s, "test_acc_best": v} for s, v in enumerate([1, 2, 3, 4])])
    stats = metrics.seed_stats(runs, "test_acc_best", ["sigma_w"]).iloc[0]
    assert stats["mean"] == 2.5
    assert stats["std"] == pytest.approx(math.sqrt(5 / 3))  # sum of squares 5, n - 1 = 3
    assert stats["n"] == 4
    single = metrics.seed_stats(runs.head(1), "test_acc_best", ["sigma_w"]).iloc[0]
    assert math.isnan(single["std"])


def test_percentile_band_interpolates_linearly():
    runs = runs_table([{"seed": s, "test_acc_best": float(s)} for s in range(11)])
    band = metrics.percentile_band(runs, "test_acc_best", ["sigma_w"]).iloc[0]
    assert (band["lo"], band["mean"], band["hi"]) == pytest.approx((1.0, 5.0, 9.0))


def test_event_stats_count_runs_that_never_reached_the_event():
    runs = runs_table([
        {"seed": 0, "tau_interp": 10}, {"seed": 1, "tau_interp": 20},
        {"seed": 2, "tau_interp": None},  # never interpolated
        {"seed": 3, "status": "missing"},
    ])
    stats = metrics.event_stats(runs, "tau_interp", ["sigma_w"]).iloc[0]
    assert stats["mean"] == 15
    assert stats["std"] == pytest.approx(math.sqrt(50))
    assert (stats["n_reached"], stats["n_runs"]) == (2, 3)


def test_repair_gap_stats_follow_tau_interp():
    runs = runs_table([{"seed": 0, "repair_gap": 0.02}, {"seed": 1, "repair_gap": -0.04},
                       {"seed": 2, "repair_gap": None}])
    stats = metrics.repair_gap_stats(runs, ["sigma_w"]).iloc[0]
    assert stats["mean"] == pytest.approx(-0.01)
    assert (stats["n_reached"], stats["n_runs"]) == (2, 3)


def test_interpolated_at_best_is_the_seed_mean_threshold():
    runs = runs_table([
        {"b": 16, "seed": 0, "train_acc_best": 1.0}, {"b": 16, "seed": 1, "train_acc_best": 0.992},
        {"b": 32, "seed": 0, "train_acc_best": 0.99}, {"b": 32, "seed": 1, "train_acc_best": 0.99},
    ])
    out = metrics.interpolated_at_best(runs, ["b"]).set_index("b")["interpolated"]
    assert out[16] and not out[32]  # 0.996 >= 0.995 > 0.99


def test_beta_is_the_ols_slope_over_all_seeds_per_epoch():
    rows = [  # epoch 1: points (0.5, 1), (1.0, 3), (1.5, 2): slope = Sxy/Sxx = 0.5/0.5 = 1
        {"epoch": 1, "sigma_w": 0.5, "seed": 0, "val_acc": 1.0},
        {"epoch": 1, "sigma_w": 1.0, "seed": 0, "val_acc": 3.0},
        {"epoch": 1, "sigma_w": 1.5, "seed": 1, "val_acc": 2.0},
        # epoch 2: val_acc = 0.9 - 0.1 sigma_w exactly, two seeds
        *({"epoch": 2, "sigma_w": s, "seed": k, "val_acc": 0.9 - 0.1 * s}
          for s in (0.5, 1.0, 1.5) for k in (0, 1)),
        # epoch 3: one sigma_w only: no slope
        {"epoch": 3, "sigma_w": 1.0, "seed": 0, "val_acc": 0.5},
        {"epoch": 3, "sigma_w": 1.0, "seed": 1, "val_acc": 0.6},
    ]
    out = metrics.beta(epochs_table(rows), keys=["optimizer"]).set_index("epoch")
    assert out.loc[1, "beta"] == pytest.approx(1.0)
    assert out.loc[2, "beta"] == pytest.approx(-0.1)
    assert out.loc[2, "abs_beta"] == pytest.approx(0.1)
    assert out.loc[2, "n_points"] == 6
    assert math.isnan(out.loc[3, "beta"])


def test_beta_keeps_configurations_apart():
    rows = [{"epoch": 1, "sigma_w": s, "optimizer": opt, "val_acc": slope * s}
            for opt, slope in (("sgd", -0.1), ("adam", 0.01)) for s in (0.1, 2.5)]
    out = metrics.beta(epochs_table(rows), keys=["optimizer"]).set_index("optimizer")
    assert out.loc["sgd", "beta"] == pytest.approx(-0.1)
    assert out.loc["adam", "beta"] == pytest.approx(0.01)


def test_clocks_per_epoch_average_the_runs_of_a_configuration():
    rows = [{"epoch": e, "seed": s, "T_SGD": e * 1e-6, "T_L2": 0.0, "T_adapt": e * 0.1}
            for e in (1, 2) for s in (0, 1)]
    out = metrics.clocks(epochs_table(rows), keys=["optimizer"])
    assert list(out["epoch"]) == [1, 2]
    assert out["T_adapt"].tolist() == pytest.approx([0.1, 0.2])


def test_schedule_clocks_match_the_sums_written_out():
    # 2 epochs of 2 updates: eta_k = lr0 [a + (1 - a)(1 + cos(pi k / 4)) / 2], k = 0..3
    lr0, a, b, lam = 0.1, 0.01, 4, 0.5
    eta = [lr0 * (a + (1 - a) * (1 + math.cos(math.pi * k / 4)) / 2) for k in range(4)]
    out = schedule_clocks(lr0, b, steps_per_epoch=2, epochs=2, lam=lam, alpha=a)
    assert out["lr"].tolist() == pytest.approx([eta[1], eta[3]])
    assert out["T_adapt"].tolist() == pytest.approx([eta[0] + eta[1], sum(eta)])
    assert out["T_SGD"].tolist() == pytest.approx(
        [(eta[0] ** 2 + eta[1] ** 2) / b, sum(e * e for e in eta) / b])
    assert out["T_L2"].tolist() == pytest.approx([lam * (eta[0] + eta[1]), lam * sum(eta)])
    const = schedule_clocks(0.01, 16, 10, 3, schedule="constant")
    assert const["T_SGD"].tolist() == pytest.approx([10 * 1e-4 / 16 * e for e in (1, 2, 3)])
    with pytest.raises(ValueError, match="schedule='step'"):
        schedule_clocks(0.1, 16, 1, 1, schedule="step")


def test_clock_estimate_is_the_papers_arithmetic():
    k = 300 * 313  # 300 epochs of ceil(40000 / 128) updates
    clocks = clock_estimate(1e-2, 128, k, lam=1e-3)
    assert clocks["T_SGD"] == pytest.approx(k * 1e-4 / 128)  # 0.73
    assert clocks["T_L2"] == pytest.approx(0.939)  # the paper's 0.94
    assert clocks["T_adapt"] == pytest.approx(939.0)


def test_select_matches_sigma_w_by_its_canonical_key_and_names_bad_columns():
    # a Run keeps sigma_w as its key: 0.1 + 0.2 is the sigma_w 0.3, exactly
    recipe = Recipe(family="x", arch="resnet9", optimizer="sgd", b=8, epochs=1)
    assert Run(recipe, 0.1 + 0.2, 0).sigma_w == 0.3 == sigma_w_key(0.1 + 0.2)
    assert sigma_w_key(1.2345678901234567e-12) == 1.23456789012e-12  # digits, not decimals
    runs = runs_table([{"sigma_w": 0.3}, {"sigma_w": 0.4}, {"optimizer": "adam"}])
    assert len(select(runs, sigma_w=0.1 + 0.2)) == 1  # the lookup keyed too
    assert len(select(runs, sigma_w=[0.3, 0.4])) == 2
    assert len(select(runs, optimizer=["adam"], sigma_w=0.1)) == 1
    assert len(select(runs, sigma_w=0.3 + 1e-9)) == 0  # equality, not closeness
    with pytest.raises(KeyError, match="sigma"):
        select(runs, sigma=0.3)


def test_recipe_keys_are_the_recipe_fields():
    keys = recipe_keys()
    assert {"family", "arch", "optimizer", "b", "lr0", "l2", "augment"} <= set(keys)
    assert "sigma_w" not in keys and "seed" not in keys
    assert np.all([k in runs_table([{}]).columns for k in keys])
