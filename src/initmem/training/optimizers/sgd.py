"""Keras SGD without momentum: w <- w - eta g."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, Optimizer, keras_float

DECLARATION = {"label": "SGD", "keras": "SGD", "hyperparameters": {"weight_decay": 0.0}}


class SGD(Optimizer):
    """Keras SGD: v <- mu v - eta g; w <- w + v (plain w <- w - eta g when mu = 0)."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], momentum: float,
                 weight_decay: float = 0.0):
        """SGD over `named_params` at `momentum` (0: no velocity), decoupled decay weight_decay."""
        super().__init__(named_params, weight_decay)
        self.momentum = keras_float(momentum)
        if momentum:
            self._add_slot("velocity", self.params)

    def _update(self, lr: LR) -> None:
        names = self._live(self.params)
        if not names:
            return
        if not self.momentum:
            w, g = self._tensors(names)
            torch._foreach_sub_(w, torch._foreach_mul(g, lr))
            return
        w, g, velocity = self._tensors(names, "velocity")
        torch._foreach_mul_(velocity, self.momentum)
        torch._foreach_sub_(velocity, torch._foreach_mul(g, lr))
        torch._foreach_add_(w, velocity)


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> SGD:
    """The recipe's SGD without momentum, with its weight_decay."""
    return SGD(named_params, momentum=0.0, **recipe.optimizer_hyperparameters)
