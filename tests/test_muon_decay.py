"""Muon's AdamW-path decay as a recipe field (both readings of the paper's lambda are
checked against keras.optimizers.Muon in tests/test_keras_networks.py): unset it changes
no recipe id, pack spec or record, and records from before it read with its default."""

import math

import pytest
import torch
from fakes import write_fake_run

from initmem.errors import InputError
from initmem.plan.spec import Pack, Recipe, Run, spec_table
from initmem.records import aggregate
from initmem.records.files import atomic_write_parquet, read_records, read_sealed
from initmem.training.models import build_model
from initmem.training.optimizers import build_optimizer

FIELDS = dict(family="main", arch="resnet9", b=16, epochs=300, weight_decay=1e-4)


def muon(**kw) -> Recipe:
    return Recipe(optimizer="muon", **{**FIELDS, **kw})


def test_unset_it_leaves_ids_and_specs_as_they_were():
    recipe = muon()
    assert recipe.recipe_id == "resnet9-w1-muon-lr0.001-cosine-e300-wd0.0001"
    assert "muon_adam_weight_decay" not in Pack(recipe, (Run(recipe, 1.0, 0),)).to_dict()["recipe"]
    keras_default = muon(muon_adam_weight_decay=0.004)
    assert keras_default.recipe_id == recipe.recipe_id + "-awd0.004"
    spec = Pack(keras_default, (Run(keras_default, 1.0, 0),)).to_dict()
    assert Pack.from_dict(spec).recipe == keras_default  # the spec round-trips with it set


def test_the_clock_t_l2_counts_the_decay_that_acts():
    assert muon().shrinkage == 1e-4
    assert muon(muon_adam_weight_decay=0.004).shrinkage == 0.004
    assert Recipe(optimizer="sgd", **{**FIELDS, "weight_decay": 0.0, "l2": 5e-3}).shrinkage == 5e-3


@pytest.mark.parametrize(("fields", "message"), [
    (dict(optimizer="adam", muon_adam_weight_decay=0.004),
     "muon_adam_weight_decay=0.004 is not allowed; muon_adam_weight_decay must be null for "
     "optimizer adam (only muon, muon_orthogonal take muon_adam_weight_decay)"),
    (dict(optimizer="muon", muon_adam_weight_decay=-1.0),
     "muon_adam_weight_decay=-1.0 is not allowed; muon_adam_weight_decay must be >= 0"),
])
def test_bad_values_are_named(fields, message):
    with pytest.raises(InputError, match=f"^{message}$".replace("(", r"\(").replace(")", r"\)")):
        Recipe(**{**FIELDS, **fields})


@pytest.mark.parametrize(("value", "adam_path_decay"), [(None, 1e-4), (0.004, 0.004)])
def test_muon_decays_its_adamw_path_at_the_chosen_reading(value, adam_path_decay):
    recipe = muon(width=0.0625, muon_adam_weight_decay=value)
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


def test_records_from_before_the_field_read_with_its_default(tmp_path):
    recipe = muon(width=0.125, dataset="synthetic", train_subset=64, epochs=1)
    run = Run(recipe, 1.0, 0)
    write_fake_run(tmp_path, run)
    path = tmp_path / run.run_dir / "summary.parquet"
    old = read_sealed(path, 1, "one run").to_pandas().drop(columns=["muon_adam_weight_decay"])
    atomic_write_parquet(old, path)  # a summary as initmem wrote it before the field
    summary = read_records(tmp_path / run.run_dir)[1]
    assert math.isnan(summary["muon_adam_weight_decay"].iloc[0])
    typed = aggregate.typed_summaries(read_sealed(path, 1, "one run"))
    assert math.isnan(typed["muon_adam_weight_decay"].iloc[0])
    assert not aggregate.spec_mismatches(spec_table([run]), typed)
