"""Keras Adam (epsilon hat; beta_1, beta_2, epsilon as declared): the Adam math of the base
optimizer."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, AdamMath, Optimizer

DECLARATION = {"label": "Adam", "keras": "Adam", "adaptive": True,
               "hyperparameters": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7,
                                   "weight_decay": 0.0}}


class Adam(Optimizer):
    """Keras Adam (epsilon hat); with weight_decay > 0 it is Keras AdamW."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float,
                 adam: AdamMath):
        """Adam over `named_params`, decoupled decay `weight_decay`, betas and epsilon in `adam`."""
        super().__init__(named_params, weight_decay)
        self.adam = adam
        self._add_slot("m", self.params)
        self._add_slot("v", self.params)

    def _update(self, lr: LR) -> None:
        self._adam(self.params, lr, self.adam)


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Adam:
    """The recipe's Adam: its weight_decay and its declared hyperparameters."""
    adam = recipe.optimizer_hyperparameters
    return Adam(named_params, adam.pop("weight_decay"), AdamMath(**adam))
