"""A recipe as the constructor arguments of the reference optimizer its declaration names
(a Keras class, or a PyTorch one), for the tests that run that optimizer beside ours
(tests/test_optimizer_registry.py on a kernel and a bias, tests/test_keras_networks.py on
the real networks). No Keras or reference import."""

from __future__ import annotations

from initmem.plan.spec import Recipe


def keras_kwargs(recipe: Recipe) -> dict:
    """The recipe's hyperparameters, by Keras' names already; Muon's AdamW path decays at
    the recipe's reading of the paper's lambda (null there: weight_decay)."""
    kwargs = dict(recipe.optimizer_hyperparameters)
    if "adam_weight_decay" in kwargs and kwargs["adam_weight_decay"] is None:
        kwargs["adam_weight_decay"] = kwargs["weight_decay"]
    return kwargs


def torch_kwargs(recipe: Recipe) -> dict:
    """The recipe's hyperparameters as a PyTorch optimizer's arguments: the reference's
    own names, but beta_1 and beta_2 as torch's `betas` pair."""
    kwargs = dict(recipe.optimizer_hyperparameters)
    if "beta_1" in kwargs:
        kwargs["betas"] = (kwargs.pop("beta_1"), kwargs.pop("beta_2"))
    return kwargs
