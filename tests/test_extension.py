"""Extending the study: an optimizer is its module plus a config entry.

Lion (src/initmem/training/optimizers/lion.py, not in the paper) is added to a small main
grid through the config alone (config/lion.yaml) and flows to the grid, training, Tables
2-3, the figures' legends and the scorecard's "not in the paper" rows.
"""

from pathlib import Path

import pandas as pd
import pytest
import torch
from analysis_frames import scorecard_of

from initmem.analysis import claims, figures, tables
from initmem.analysis.figures.common import FigureInputs
from initmem.plan import grid
from initmem.plan.spec import OPTIMIZERS, Recipe
from initmem.records import synthetic
from initmem.training.models import build_model
from initmem.training.optimizers import build_optimizer

ROOT = Path(__file__).parents[1]
LION_CONFIG = ROOT / "config" / "lion.yaml"


@pytest.fixture(scope="module")
def config():
    return grid.load_config(LION_CONFIG)


@pytest.fixture(scope="module")
def records(config):
    return synthetic.generate(config)


def test_the_grid_knows_lion_from_its_module(config):
    assert "lion" in OPTIMIZERS
    optimizers = {run.recipe.optimizer for run in grid.expand_runs(config)}
    assert optimizers == {"sgd", "adam", "lion"}
    lion = next(r for r in grid.expand_runs(config) if r.recipe.optimizer == "lion")
    assert lion.recipe.lr0 == 3e-4  # its config entry's rate


def test_lion_steps_by_hand():
    """Two updates on a tiny pack, by the formula: w -= eta sign(b1 m + (1 - b1) g);
    m = b2 m + (1 - b2) g, after the decoupled decay w -= eta lambda w."""
    recipe = Recipe(family="t", arch="resnet9", optimizer="lion", b=1, epochs=1, lr0=0.1,
                    hyperparameters={"weight_decay": 0.5}, width=0.03)
    model = build_model(recipe, 2)  # allocated, not initialised: garbage can hold NaNs
    model.init_([1.0, 1.0], [torch.Generator().manual_seed(s) for s in (0, 1)])
    opt = build_optimizer(recipe, model)
    p = model.dense.kernel
    w, m = p.detach().clone(), torch.zeros_like(p)
    beta_1, beta_2 = 0.9, 0.99  # Keras' defaults
    for grad_scale in (1.0, -3.0):
        for q in model.parameters():
            q.grad = torch.full_like(q, grad_scale)
        opt.step(0.1)
        w = w - 0.1 * 0.5 * w
        w = w - 0.1 * torch.sign(beta_1 * m + (1 - beta_1) * grad_scale)
        m = beta_2 * m + (1 - beta_2) * grad_scale
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-6)


def test_lion_has_rows_in_the_main_grid_tables(config, records):
    runs, _ = records
    tex = tables.render(tables.build(2, runs, config), tables.is_synthetic(runs))
    rows = [line for line in tex.splitlines() if " & Lion & " in line]
    assert len(rows) == 1  # b = 16, the one batch size its main grid plans
    assert "??" not in rows[0]  # with its numbers


def test_lion_is_in_the_figures(config, records):
    """In the legends of Figs. 1 (accuracy and norm vs sigma_w) and 6 (|beta(t)|, in the
    adaptive column: its config entry says adaptive), a row of Fig. 2's heat map."""
    runs, epochs = records
    inputs = FigureInputs(runs, epochs.to_pandas(), config)
    for number in (1, 6):
        fig = figures.draw(number, inputs)
        labels = {t.get_text() for legend in [*fig.legends, *(a.get_legend() for a in fig.axes)]
                  if legend is not None for t in legend.get_texts()}
        assert "Lion" in labels, number
    heat = figures.draw(2, inputs)
    assert "Lion" in {t.get_text() for t in heat.axes[0].get_yticklabels()}


def test_the_scorecard_lists_lion_as_not_in_the_paper(config, records, tmp_path):
    runs, _ = records
    card = scorecard_of(runs, LION_CONFIG, tmp_path)
    lion = card[card["optimizer"] == "lion"]
    assert len(lion) > 0 and set(lion["verdict"]) == {"not in the paper"}
    assert not pd.isna(lion["reproduced"]).all()


def test_lion_enters_the_claims_adaptive_cell_by_its_declaration(records):
    """The claim that Adam-family methods wash out sigma_w selects `adaptive: true`: Lion
    (declared adaptive) is in that cell with no claim edited."""
    runs, _ = records
    claim = next(c for c in claims.read_claims(ROOT / "paper" / "claims.yaml")
                 if c["id"] == "adaptive_forget_b128")
    cell = claims.select_cell(runs, {**claim["cells"]["adaptive"], "b": 16})  # Lion's b
    assert set(cell["optimizer"]) == {"adam", "lion"}


def test_an_optimizer_entry_sets_its_schedule_and_its_labels_say_so():
    """config/schedule_free.yaml: Schedule-Free AdamW's entry sets a constant rate, the
    others keep common's cosine; Table 1, Table 2 and Fig. 1's legend name the schedule
    that differs, and only that one."""
    config = grid.load_config(ROOT / "config" / "schedule_free.yaml")
    schedules = {r.recipe.optimizer: r.recipe.schedule for r in grid.expand_runs(config)}
    assert schedules == {"sgd": "cosine", "adam": "cosine", "schedule_free_adamw": "constant"}
    runs, epochs = synthetic.generate(config)
    label = "Schedule-Free AdamW (constant rate)"
    assert [row["label"] for row in tables.build(1, None, config).context["rows"]] == [
        "SGD", "Adam", label]
    tex = tables.render(tables.build(2, runs, config), tables.is_synthetic(runs))
    assert any(f" & {label} & " in line for line in tex.splitlines())
    fig = figures.draw(1, FigureInputs(runs, epochs.to_pandas(), config))
    labels = {t.get_text() for legend in [*fig.legends, *(a.get_legend() for a in fig.axes)]
              if legend is not None for t in legend.get_texts()}
    assert label in labels and "Adam" in labels
