"""Synthetic records: every expected run, the aggregate's format, marked generated, and
the paper's qualitative shapes."""

import numpy as np
import pandas as pd
import pytest
from analysis_frames import small_config

from initmem.analysis import metrics
from initmem.cli import main
from initmem.plan import grid
from initmem.plan.schedule import schedule_clocks
from initmem.plan.spec import spec_columns
from initmem.records import aggregate, synthetic
from initmem.records import files as records


@pytest.fixture(scope="module")
def config():
    return small_config()


@pytest.fixture(scope="module")
def generated(config):
    runs, epochs = synthetic.generate(config, seed=3, missing=0.1)
    return runs, epochs.to_pandas()


def test_every_expected_run_is_there_and_marked_generated(config, generated):
    runs, epochs = generated
    expected = grid.expand_runs(config)
    assert runs["run_id"].tolist() == [r.run_id for r in expected]
    done = runs[runs["status"] != "missing"]
    assert 0 < len(runs) - len(done) < 0.2 * len(runs)  # about 10% left missing
    assert set(done["record_source"]) == {"generated"}
    assert set(epochs["record_source"]) == {"generated"}
    assert list(epochs.columns) == [*records.HISTORY_COLUMNS,
                                    *[c for c in spec_columns() if c != "run_id"],
                                    "record_source"]
    assert list(runs.columns) == list(aggregate.runs_columns())
    assert len(epochs) == done["epochs_run"].sum()
    assert set(epochs["run_id"]) == set(done["run_id"])  # missing runs have no history
    assert runs.loc[runs["status"] == "missing", "test_acc_best"].isna().all()


def test_summaries_agree_with_the_histories(generated):
    runs, epochs = generated
    done = runs[runs["status"] != "missing"].set_index("run_id")
    for run_id, h in list(epochs.groupby("run_id"))[::40]:
        s = done.loc[run_id]
        best = h.loc[h["val_loss"].idxmin()]
        assert s["tau_best"] == best["epoch"]
        assert s["test_acc_best"] == best["test_acc"]
        hit = h[h["train_acc"] >= records.INTERP_THRESHOLD]
        assert (pd.isna(s["tau_interp"]) if hit.empty
                else s["tau_interp"] == hit["epoch"].iloc[0])
        assert s["epochs_run"] == len(h) and s["T_SGD"] == h["T_SGD"].iloc[-1]
        assert s["train_acc_last"] == h["train_acc"].iloc[-1]
        assert s["bn_var_ratio_best"] == best["bn_var_ratio"] or s["arch"] == "resnet9_ln"


def test_bn_var_ratio_decays_to_1_and_is_nan_without_batchnorm(generated):
    _, epochs = generated
    ratio = epochs.groupby(["arch", "sigma_w"])["bn_var_ratio"]
    assert ratio.apply(lambda r: r.isna().all())["resnet9_ln"].all()
    first, last = ratio.max().drop("resnet9_ln"), ratio.min().drop("resnet9_ln")
    assert (last >= 1).all() and (last < first).all()
    assert first["resnet9", 0.1] > 100 * first["resnet9", 2.5]  # small sigma_w: far off


def test_clocks_follow_the_schedule(config, generated):
    _, epochs = generated
    h = epochs[(epochs["family"] == "main") & (epochs["optimizer"] == "sgd")
               & (epochs["b"] == 128)]
    h = h[h["run_id"] == h["run_id"].iloc[0]]
    expected = schedule_clocks(1e-3, 128, 313, len(h))
    assert h["T_adapt"].to_numpy() == pytest.approx(expected["T_adapt"].to_numpy())
    assert h["lr"].to_numpy() == pytest.approx(expected["lr"].to_numpy())


def test_shapes_follow_the_paper():
    runs, _ = synthetic.generate(small_config(epochs_divisor=1), families=["main", "depth"])
    main_grid = runs[(runs["family"] == "main") & (runs["b"] == 128)]
    spread = metrics.spread(main_grid, keys=["optimizer"]).set_index("optimizer")["spread"]
    assert spread["sgd"] > 0.15 and spread["adam"] < 0.08  # SGD remembers, Adam forgets
    tau = metrics.event_stats(main_grid, "tau_interp", ["optimizer", "sigma_w"])
    tau = tau.set_index(["optimizer", "sigma_w"])["mean"]
    assert tau["sgd", 2.5] > 3 * tau["sgd", 0.1]  # SGD interpolates later at large sigma_w
    assert tau["adam", 2.5] < 1.5 * tau["adam", 0.1]
    norms = main_grid.groupby(["optimizer", "sigma_w"])["kernel_fro_norm_best"].mean()
    assert norms["sgd", 2.5] / norms["sgd", 0.1] > 5  # radial memory
    assert norms["adam", 2.5] / norms["adam", 0.1] < 2
    deep = runs[runs["arch"].isin(["resnet56", "resnet110"]) & (runs["status"] != "missing")]
    stopped = deep["epochs_run"] < deep["epochs"]
    assert stopped.any()
    assert (deep.loc[stopped, "status"] == "early_stopped").all()


def test_generation_is_reproducible_and_seeded(config):
    a, _ = synthetic.generate(config, seed=1, families=["best_recipe"])
    b, _ = synthetic.generate(config, seed=1, families=["best_recipe"])
    c, _ = synthetic.generate(config, seed=2, families=["best_recipe"])
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["test_acc_best"], c["test_acc_best"])
    assert set(a["family"]) == {"best_recipe"}
    with pytest.raises(grid.ConfigError, match="'nope'"):
        synthetic.generate(config, families=["nope"])


def test_stop_epochs_is_keras_early_stopping():
    val_loss = np.array([[3.0, 2.0, 2.5, 2.6, 2.7, 1.0],  # best at 2, stale 2 epochs at 4
                         [3.0, 2.0, 1.9, 1.8, 1.7, 1.6]])  # always improving
    assert synthetic.stop_epochs(val_loss, 2).tolist() == [4, 6]
    assert synthetic.stop_epochs(val_loss, None).tolist() == [6, 6]


def test_record_folders_aggregate_back_to_the_same_tables(config, tmp_path):
    runs, epochs = synthetic.generate(config, seed=4, families=["long_sgd"], missing=0.3)
    assert synthetic.write_run_records(runs, epochs, tmp_path) == (runs["status"]
                                                                   != "missing").sum()
    expected = [r for r in grid.expand_runs(config) if r.recipe.family == "long_sgd"]
    again, again_epochs = aggregate.aggregate(
        expected, *aggregate.read_folder_records(tmp_path, expected))
    pd.testing.assert_frame_equal(again, runs)
    # the same rows; run_id's Arrow string flavour depends on the source
    pd.testing.assert_frame_equal(again_epochs.to_pandas().astype({"run_id": object}),
                                  epochs.to_pandas().astype({"run_id": object}))


def test_cli_writes_the_aggregate_tables(tmp_path):
    config = tmp_path / "config.yaml"
    import yaml

    config.write_text(yaml.safe_dump(small_config(epochs_divisor=30)))
    out = tmp_path / "aggregate"
    assert main(["synthetic-records", "--config", str(config), "--out-dir", str(out),
                 "--families", "norm_aug", "--seed", "5"]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    assert set(runs["family"]) == {"norm_aug"} and set(runs["record_source"]) == {"generated"}
    assert len(pd.read_parquet(out / "epochs.parquet")) == runs["epochs_run"].sum()
    assert main(["synthetic-records", "--config", str(config), "--out-dir", str(out),
                 "--missing", "2"]) == 2
