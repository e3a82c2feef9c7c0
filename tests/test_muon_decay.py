"""Muon's AdamW-path decay, its hyperparameter adam_weight_decay (both readings of the
paper's lambda are checked against keras.optimizers.Muon in tests/test_keras_networks.py):
unset it changes no recipe id or pack spec (records from when it was the recipe field
muon_adam_weight_decay: tests/test_aggregate.py, each older schema)."""

import re

import pytest
import torch

from initmem.errors import InputError
from initmem.plan.spec import Pack, Recipe, Run
from initmem.training.models import build_model
from initmem.training.optimizers import build_optimizer

FIELDS = dict(family="main", arch="resnet9", b=16, epochs=300)


def muon(adam_weight_decay: float | None = None, **kw) -> Recipe:
    return Recipe(optimizer="muon", **{**FIELDS, **kw}, hyperparameters={
        "weight_decay": 1e-4, "adam_weight_decay": adam_weight_decay})


def test_unset_it_leaves_ids_and_specs_as_they_were():
    recipe = muon()
    assert recipe.recipe_id == "resnet9-w1-muon-lr0.001-cosine-e300-wd0.0001"
    assert Pack(recipe, (Run(recipe, 1.0, 0),)).to_dict()["recipe"]["hyperparameters"] \
        == "weight_decay=0.0001"
    keras_default = muon(0.004)
    assert keras_default.recipe_id == recipe.recipe_id + "-awd0.004"
    spec = Pack(keras_default, (Run(keras_default, 1.0, 0),)).to_dict()
    assert Pack.from_dict(spec).recipe == keras_default  # the spec round-trips with it set


def test_the_clock_t_l2_counts_the_decay_that_acts():
    assert muon().shrinkage == 1e-4
    assert muon(0.004).shrinkage == 0.004
    assert Recipe(optimizer="sgd", **FIELDS, l2=5e-3).shrinkage == 5e-3


@pytest.mark.parametrize(("fields", "message"), [
    (dict(optimizer="adam", hyperparameters={"adam_weight_decay": 0.004}),
     "hyperparameters.adam_weight_decay=0.004 is not allowed for optimizer adam; its "
     "hyperparameters: beta_1, beta_2, epsilon, weight_decay"),
    (dict(optimizer="muon", hyperparameters={"adam_weight_decay": -1.0}),
     "hyperparameters.adam_weight_decay=-1.0 is not allowed; "
     "hyperparameters.adam_weight_decay must be >= 0"),
    (dict(optimizer="muon", hyperparameters="adam_weight_decay=-1.0"),  # a spec's text too
     "hyperparameters.adam_weight_decay=-1.0 is not allowed; "
     "hyperparameters.adam_weight_decay must be >= 0"),
    (dict(optimizer="muon", hyperparameters={"weight_decay": None}),  # null: Muon's own only
     "hyperparameters.weight_decay=None is not allowed; hyperparameters.weight_decay must be "
     "of type number"),
])
def test_bad_values_are_named(fields, message):
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        Recipe(**FIELDS, **fields)


@pytest.mark.parametrize(("value", "adam_path_decay"), [(None, 1e-4), (0.004, 0.004)])
def test_muon_decays_its_adamw_path_at_the_chosen_reading(value, adam_path_decay):
    recipe = muon(value, width=0.0625)
    model = build_model(recipe, 1)
    optimizer = build_optimizer(recipe, model)
    assert optimizer.adam_names == list(optimizer.params)  # the paper's Muon: all AdamW
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(1.0)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # Adam's step is then 0: only the decay moves w
    optimizer.step(0.1)
    assert model.dense.kernel[0, 0, 0].item() == pytest.approx(1 - 0.1 * adam_path_decay,
                                                               rel=1e-6)
