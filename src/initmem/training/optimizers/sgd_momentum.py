"""Keras SGD with momentum: v <- mu v - eta g; w <- w + v (PyTorch's SGD applies today's
rate to the whole buffer instead, which differs under a schedule)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers.sgd import SGD

DECLARATION = {"label": "SGD with momentum", "tex_label": "SGD$~(\\beta=0.9)$",
               "keras": "SGD", "requires": ["momentum"],
               "hyperparameters": {"momentum": 0.9, "weight_decay": 0.0}}


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> SGD:
    """The recipe's SGD with its momentum and weight_decay."""
    return SGD(named_params, **recipe.optimizer_hyperparameters)
