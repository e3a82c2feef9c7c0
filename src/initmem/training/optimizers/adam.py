"""Keras Adam (epsilon hat, beta2 = 0.999): the Adam math of the base optimizer."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, Optimizer


class Adam(Optimizer):
    """Keras Adam (epsilon hat); with weight_decay > 0 it is Keras AdamW."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]],
                 weight_decay: float = 0.0):
        super().__init__(named_params, weight_decay)
        self._add_slot("m", self.params)
        self._add_slot("v", self.params)

    def _update(self, lr: LR) -> None:
        self._adam(self.params, lr)


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Adam:
    return Adam(named_params, recipe.weight_decay)
