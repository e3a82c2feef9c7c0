"""A recipe as the constructor arguments of the reference optimizer its declaration names
(a Keras class, or a PyTorch one), for the tests that run that optimizer beside ours
(tests/test_optimizer_registry.py on a kernel and a bias, tests/test_keras_networks.py on
the real networks). No Keras or reference import."""

from __future__ import annotations

from initmem.plan.spec import Recipe

# Keras' argument for each recipe field an optimizer may take (its `takes`)
KERAS_FIELDS = {"momentum": "momentum", "weight_decay": "weight_decay",
                "muon_adam_weight_decay": "adam_weight_decay"}


def keras_kwargs(recipe: Recipe) -> dict:
    """The recipe's hyperparameters and the fields its optimizer takes, by Keras' names
    (Muon's AdamW path decays at the recipe's reading of the paper's lambda)."""
    kwargs = dict(recipe.optimizer_hyperparameters)
    for field in recipe.declaration.takes:
        value = recipe.muon_adam_decay if field == "muon_adam_weight_decay" \
            else getattr(recipe, field)
        kwargs[KERAS_FIELDS[field]] = value
    return kwargs


def torch_kwargs(recipe: Recipe) -> dict:
    """The recipe's hyperparameters and the fields its optimizer takes as a PyTorch
    optimizer's arguments: the reference's own names, but beta_1 and beta_2 as torch's
    `betas` pair."""
    kwargs = dict(recipe.optimizer_hyperparameters)
    if "beta_1" in kwargs:
        kwargs["betas"] = (kwargs.pop("beta_1"), kwargs.pop("beta_2"))
    return {**kwargs, **{field: getattr(recipe, field) for field in recipe.declaration.takes}}
