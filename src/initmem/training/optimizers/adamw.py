"""Keras AdamW: Adam with decoupled weight decay before each update (Keras' AdamW is
exactly that subclass of Adam)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import AdamMath
from initmem.training.optimizers.adam import Adam

DECLARATION = {"label": "AdamW", "keras": "AdamW", "base": "adam"}


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Adam:
    return Adam(named_params, recipe.weight_decay, AdamMath(**recipe.optimizer_hyperparameters))
