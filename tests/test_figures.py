"""Figures 1-9 render from small hand-made tables, mark missing runs and synthetic input."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import PAPER_CONFIG

from initmem.analysis import figures, toy
from initmem.analysis.figures import common, heatmap, sweeps, toyfig
from initmem.plan import artifacts, grid
from initmem.plan.spec import Recipe, Run
from initmem.records import files as records

SIGMAS = (0.1, 0.5, 1.0, 1.8, 2.5)
MAIN_OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "muon")
N_EPOCHS = 4
# What the workflow gives the figures: the experiment part of a config (results/config.yaml)
CONFIG = yaml.safe_dump(grid.experiment_config(grid.load_config(PAPER_CONFIG)))


def expected_runs() -> list[Run]:
    """A reduced copy of the paper's families: every family each figure reads."""
    recipes = [Recipe("main", "resnet9", o, b, 300)
               for o in MAIN_OPTIMIZERS for b in (16, 32, 128)]
    recipes += [Recipe("long_sgd", "resnet9", "sgd", b, 5000, schedule="constant")
                for b in (16, 128)]
    recipes += [Recipe("lr_l2", "resnet9", "sgd", b, 300, lr0=lr0, l2=l2)
                for lr0, l2, b in itertools.product((1e-3, 1e-2, 1e-1), (0, 1e-3, 5e-3, 1e-2),
                                                    (16, 128)) if (lr0, l2) != (1e-3, 0)]
    recipes += [Recipe("norm_aug", arch, o, b, 300, augment=True)
                for arch, o, b in itertools.product(("resnet9", "resnet9_ln"), ("sgd", "adam"),
                                                    (16, 128))]
    recipes += [Recipe("depth", arch, o, b, 300)
                for arch, o, b in itertools.product(("r9_avgpool", "resnet56", "resnet110"),
                                                    ("sgd", "adam"), (16, 128))]
    return [Run(r, s, seed) for r in recipes for s in SIGMAS for seed in (0, 1)]


def _memory(run: Run) -> float:
    """Plausible: SGD remembers sigma_w (slope -0.1), adaptive methods forget."""
    forgets = run.recipe.optimizer not in ("sgd", "sgd_momentum") or run.recipe.l2 > 0
    return 0.01 if forgets else 0.1


def summary_row(run: Run, source: str) -> dict:
    test = 0.88 - _memory(run) * (run.sigma_w - 0.1) + 0.003 * run.seed
    train = 0.999 if run.recipe.optimizer == "sgd" else 0.97
    interp = None if run.recipe.optimizer == "adam" else int(5 + 10 * run.sigma_w)
    return {**run.as_row(), "status": "completed", "epochs_run": N_EPOCHS, "tau_best": 3,
            "tau_interp": interp, "test_acc_best": test, "val_acc_best": test,
            "train_acc_best": train, "val_loss_best": 0.5, "val_acc_interp": test - 0.01,
            "val_acc_last": test, "test_acc_last": test, "train_acc_last": train,
            "repair_gap": None if interp is None else 0.01,
            "kernel_fro_norm_init": 30 * run.sigma_w, "kernel_fro_norm_best": 25 * run.sigma_w,
            "kernel_fro_norm_last": 25 * run.sigma_w, "bn_var_ratio_best": 1.5, "T_SGD": 1e-3,
            "T_L2": 0.0, "T_adapt": 1.0, "diverged": False, "diverged_epoch": None,
            "wall_time_s": 1.0, "device": "cpu", "determinism": "cpu", "host": "x",
            "slurm_job_id": None, "resumed_from_epoch": None, "torch_version": "x",
            "python_version": "x", "initmem_version": "x", "code_version": "x",
            "data_verification": "synthetic", "record_source": source,
            "schema_version": records.SCHEMA_VERSION}


def missing_row(run: Run) -> dict:
    row = {c: None for c in records.OUTCOME_COLUMNS}
    return {**row, **run.as_row(), "status": "missing", "epochs_run": 0, "diverged": False,
            "schema_version": records.SCHEMA_VERSION}


def epoch_rows(run: Run, source: str) -> list[dict]:
    rows = []
    for epoch in range(1, N_EPOCHS + 1):
        memory = _memory(run) / epoch if _memory(run) < 0.1 else _memory(run)
        eta = run.recipe.lr0
        rows.append({**run.as_row(), "epoch": epoch,
                     "val_acc": 0.88 - memory * run.sigma_w + 0.002 * run.seed,
                     "T_SGD": epoch * eta**2 * 300 / run.recipe.b,
                     "T_L2": epoch * eta * 300 * run.recipe.l2, "T_adapt": epoch * eta * 300,
                     "record_source": source})
    return rows


def write_tables(folder: Path, *, missing: int = 0, source: str = "trained",
                 diverged: int = 0) -> tuple[Path, Path]:
    """runs.parquet and epochs.parquet; the first `missing` runs of each family lack
    records, the next `diverged` runs diverged."""
    runs, epochs, seen = [], [], {}
    for run in expected_runs():
        family = run.recipe.family
        seen[family] = seen.get(family, 0) + 1
        if seen[family] <= missing:
            runs.append(missing_row(run))
            continue
        runs.append(summary_row(run, source))
        if seen[family] <= missing + diverged:
            runs[-1].update(status="diverged", diverged=True, diverged_epoch=2)
        if family in ("main", "lr_l2"):
            epochs.extend(epoch_rows(run, source))
    runs_path, epochs_path = folder / "runs.parquet", folder / "epochs.parquet"
    records.summary_frame(runs).to_parquet(runs_path)
    pd.DataFrame(epochs).to_parquet(epochs_path)
    return runs_path, epochs_path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return path


def texts(number: int, runs: Path, epochs: Path, config: Path) -> list[str]:
    """Every text drawn on figure `number` (the same drawing write_figure saves)."""
    fig = figures.draw(number, common.load_inputs(runs, epochs, config))
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    matplotlib.pyplot.close(fig)
    return found


# Each figure's PDF and PNG are drawn in the fast tier by tests/test_paper.py's results too
# (about 2 s a figure): here, with the slow tier, but for Fig. 9's table beside it.
@pytest.mark.parametrize("number", [n if n == 9 else pytest.param(n, marks=pytest.mark.slow)
                                    for n in artifacts.FIGURES])
def test_every_figure_renders_pdf_and_png(tmp_path, config, number):
    runs, epochs = write_tables(tmp_path)
    pdf, png = tmp_path / f"fig{number}.pdf", tmp_path / f"fig{number}.png"
    figures.write_figure(number, runs, epochs, config, pdf, png)
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 5_000
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 5_000
    if number == 9:  # the toy model's per-run table goes next to the figure
        table = pd.read_csv(tmp_path / "fig9.csv")
        assert set(table["optimizer"]) == {"gd", "sgd", "adam", "minibatch_adam"}
        assert set(table["eta"]) == {0.01, 0.04} and (table["D_init"] == -35).all()


@pytest.mark.parametrize("number", [n for n, f in artifacts.FIGURES.items() if f.reads_runs])
def test_missing_and_generated_runs_are_marked_on_the_figure(tmp_path, config, number):
    found = texts(number, *write_tables(tmp_path, missing=3, source="generated"), config)
    assert any(t.startswith("INCOMPLETE: ") and "runs missing" in t for t in found), found
    assert "SYNTHETIC" in found
    complete = texts(number, *write_tables(tmp_path), config)
    assert not any("missing" in t or "SYNTHETIC" in t for t in complete), complete


@pytest.mark.parametrize("number", [1, 2, 4, 5])
def test_diverged_runs_are_counted_on_the_figure(tmp_path, config, number):
    found = texts(number, *write_tables(tmp_path, diverged=2), config)
    assert any(t.endswith("runs diverged (shown at their best epoch before it)")
               for t in found), found


def test_pdf_output_is_reproducible(tmp_path, config):
    runs, epochs = write_tables(tmp_path)
    outputs = []
    for name in ("a", "b"):
        pdf, png = tmp_path / f"{name}.pdf", tmp_path / f"{name}.png"
        figures.write_figure(2, runs, epochs, config, pdf, png)
        outputs.append((pdf.read_bytes(), png.read_bytes()))
    assert outputs[0] == outputs[1]


def test_figures_other_than_9_need_runs(tmp_path):
    with pytest.raises(figures.FigureInputError, match="--runs"):
        figures.write_figure(1, None, None, None, tmp_path / "a.pdf", tmp_path / "a.png")
    runs, _ = write_tables(tmp_path)
    with pytest.raises(figures.FigureInputError, match="--epochs"):
        figures.write_figure(6, runs, None, None, tmp_path / "a.pdf", tmp_path / "a.png")


def test_seed_band_is_mean_and_10_90_percentiles_per_sigma():
    frame = pd.DataFrame({"sigma_w": [0.1] * 11 + [0.5], "v": list(range(11)) + [np.nan]})
    band = common.seed_band(frame, "v")
    assert list(band.index) == [0.1]  # 0.5 has no value: no point, not a zero
    assert band.loc[0.1, ["mean", "lo", "hi", "n"]].tolist() == [5.0, 1.0, 9.0, 11]


def test_heatmap_cells_are_seed_means_in_optimizer_order():
    frame = pd.DataFrame({"optimizer": ["adam", "sgd", "sgd", "sgd"],
                          "sigma_w": [0.1, 0.1, 0.1, 0.5], "v": [0.5, 0.2, 0.4, np.nan]})
    cells = heatmap.cell_means(frame, "v", ["sgd", "adam"])
    assert list(cells.index) == ["sgd", "adam"]
    assert cells.loc["sgd", 0.1] == pytest.approx(0.3)
    assert np.isnan(cells.loc["sgd", 0.5])  # a missing cell stays empty


def test_heatmap_crosses_cells_whose_mean_train_acc_is_below_interpolation():
    frame = pd.DataFrame({"optimizer": ["sgd"] * 6, "sigma_w": [0.1, 0.1, 0.5, 0.5, 1.0, 1.0],
                          "train_acc_best": [1.0, 0.988, 1.0, np.nan, 0.995, 0.995]})
    crossed = heatmap.not_interpolated(frame)
    assert bool(crossed.loc["sgd", 0.1])  # seed mean 0.994 < 0.995
    assert not bool(crossed.loc["sgd", 0.5])  # the missing seed does not count
    assert not bool(crossed.loc["sgd", 1.0])  # exactly 99.5% is interpolation


def test_lr_l2_figure_has_table4_configurations(tmp_path, config):
    runs, _ = write_tables(tmp_path)
    inputs = common.load_inputs(runs, None, config)
    curves = sweeps._lr_l2_curves(inputs, inputs.runs, 16)
    labels = [c.label for c in curves]
    assert len(curves) == 14  # 12 eta x L2 (one from the main grid), 5,000 epochs, Adam
    assert r"$\eta$=0.001, $\lambda$=0" in labels and r"$\eta$=0.1, $\lambda$=0.01" in labels
    # each curve: its own configuration at the 5-point grid, 2 seeds (main grid subsampled)
    assert all(len(c.rows) == 10 and set(c.rows["sigma_w"]) == set(SIGMAS) for c in curves)
    assert all((c.rows["b"] == 16).all() for c in curves)


@pytest.fixture(scope="module")
def toy_figure():
    fig, _ = toyfig.fig9()
    yield fig
    matplotlib.pyplot.close(fig)


def eta_lines(ax) -> dict[float, matplotlib.lines.Line2D]:
    """A Fig. 9 panel's trajectory lines by step size (labels "$\\eta=0.01$")."""
    return {float(line.get_label().strip("$").split("=")[1]): line for line in ax.lines
            if line.get_label().startswith(r"$\eta=")}


@pytest.mark.parametrize("panel", range(4))
def test_fig9_draws_each_path_through_its_early_steps_and_end(toy_figure, panel):
    # panel (d)'s i.i.d. targets once thinned its 200,000 steps to 3 points: a straight line
    opt = toy.TOY_OPTIMIZERS[panel]
    lines = eta_lines(toy_figure.axes[panel])
    assert set(lines) == set(toy.ETAS)
    for line in lines.values():
        drawn = np.column_stack([line.get_xdata(), line.get_ydata()])
        assert len(drawn) >= min(opt.steps + 1, toyfig.DENSE_STEPS)
        assert tuple(drawn[0]) == (toy.A0, toy.B0)


def test_fig9_iid_panel_draws_points_of_its_simulated_path(toy_figure):
    opt, eta = toy.TOY_OPTIMIZERS[3], max(toy.ETAS)
    path = toy.run_toy(opt, eta)
    drawn = np.column_stack([eta_lines(toy_figure.axes[3])[eta].get_xdata(),
                             eta_lines(toy_figure.axes[3])[eta].get_ydata()])
    np.testing.assert_array_equal(drawn[:toyfig.DENSE_STEPS], path[:toyfig.DENSE_STEPS])
    np.testing.assert_array_equal(drawn[-1], path[-1])


def test_an_exact_zero_imbalance_prints_as_0():
    assert toyfig._fmt(0.0) == "0"
    assert toyfig._fmt(-3e-5) == "-3e-05" and toyfig._fmt(-3.46) == "-3.5"


def test_fig1_train_panels_show_the_last_epoch(tmp_path, config):
    # "SGD interpolates" is read at the end of training; at large sigma_w SGD's tau_best
    # comes before it interpolates, so train acc at tau_best would contradict the caption
    runs_path, _ = write_tables(tmp_path)
    runs = pd.read_parquet(runs_path)
    runs["train_acc_best"] = 0.5
    runs.to_parquet(runs_path)
    fig = figures.draw(1, common.load_inputs(runs_path, None, config))
    train_panels = [fig.axes[1], fig.axes[4]]
    for ax in train_panels:
        assert "last epoch" in ax.get_ylabel()
        drawn = np.concatenate([line.get_ydata() for line in ax.lines])
        assert len(drawn) and set(np.round(drawn, 6)) <= {99.9, 97.0}
    matplotlib.pyplot.close(fig)


def squeeze_epochs(path: Path, clock: tuple[float, float], beta: tuple[float, float]) -> None:
    """Make every clock run geometrically over `clock` and |beta| over `beta` across the
    epochs (both in view of one log axis)."""
    epochs = pd.read_parquet(path)
    f = (epochs["epoch"] - 1) / (N_EPOCHS - 1)
    for column in ("T_SGD", "T_L2", "T_adapt"):
        epochs[column] = clock[0] * (clock[1] / clock[0]) ** f
    epochs["val_acc"] = 0.9 - epochs["sigma_w"] * beta[0] * (beta[1] / beta[0]) ** f
    epochs.to_parquet(path)


def overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of visible tick labels on one axis whose drawn boxes overlap."""
    renderer = fig.canvas.get_renderer()
    pairs = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels(which="both")
                      if t.get_visible() and t.get_text()]
            boxed = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
            pairs += [(a, b) for (a, p), (b, q) in itertools.combinations(boxed, 2)
                      if p.overlaps(q)]
    return pairs


@pytest.mark.parametrize("span", [(4.0, 9.5), (1.5, 9.0), (0.6, 0.9), (2.0, 2.1), (1, 40)])
def test_fig6_log_axes_have_two_or_more_labels_that_do_not_overlap(tmp_path, config, span):
    runs, epochs = write_tables(tmp_path)
    squeeze_epochs(epochs, tuple(s * 1e-3 for s in span), tuple(s * 1e-2 for s in span))
    fig = figures.draw(6, common.load_inputs(runs, epochs, config))
    fig.canvas.draw()
    assert overlapping_labels(fig) == []
    for ax in (fig.axes[0], fig.axes[4], fig.axes[5]):  # (a), (e), (f): all have data
        for axis in (ax.xaxis, ax.yaxis)[ax is fig.axes[0]:]:
            low, high = sorted(axis.get_view_interval())
            shown = [t.get_text() for loc, t in zip(axis.get_majorticklocs(),
                                                    axis.get_majorticklabels(), strict=True)
                     if low <= loc <= high and t.get_text()]
            assert len(shown) >= 2, (ax.get_title(loc="left"), shown)
    matplotlib.pyplot.close(fig)


def test_fig4_inset_names_each_bar(tmp_path, config):
    fig = figures.draw(4, common.load_inputs(*write_tables(tmp_path), config))
    for ax in fig.axes[:2]:
        (inset,) = ax.child_axes
        names = [t.get_text() for t in inset.get_xticklabels()]
        assert len(names) == len(inset.patches) == 14  # Table 4's configurations at one b
        assert {"0.001 / 0", "0.1 / 0.01", "long", "Adam"} <= set(names)
        assert all(names)
    matplotlib.pyplot.close(fig)


def test_fig3_says_when_no_run_interpolated_rather_than_no_data(tmp_path, config):
    # a short run (the demo's 2 epochs) fits the labels nowhere: the panels are empty
    # because tau_interp and the repair gap do not exist, not because records are absent
    runs_path, epochs_path = write_tables(tmp_path)
    runs = pd.read_parquet(runs_path)
    runs[["tau_interp", "val_acc_interp", "repair_gap"]] = None
    runs.to_parquet(runs_path)
    found = texts(3, runs_path, epochs_path, config)
    assert "no data" not in found
    assert found.count(sweeps.NONE_INTERPOLATED) == 4


def test_an_empty_panel_has_no_value_scale(tmp_path, config):
    """A panel that says why it is empty shows no y ticks: matplotlib's default 0-1 would
    read as a range of the quantity its axis names."""
    runs_path, epochs_path = write_tables(tmp_path)
    runs = pd.read_parquet(runs_path)
    runs[["tau_interp", "val_acc_interp", "repair_gap"]] = None
    runs.to_parquet(runs_path)
    fig = figures.draw(3, common.load_inputs(runs_path, epochs_path, config))
    empty = [ax for ax in fig.axes if any(t.get_text() == sweeps.NONE_INTERPOLATED
                                          for t in ax.texts)]
    assert len(empty) == 4
    assert all(len(ax.get_yticks()) == 0 for ax in empty)
    matplotlib.pyplot.close(fig)
