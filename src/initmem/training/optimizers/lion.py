"""Lion (Chen et al. 2023) as Keras 3's `keras.optimizers.Lion`: an extension the paper did
not run, and the example of adding an optimizer (docs/workflow.md, "Extending the study").

    w <- w - eta sign(beta1 m + (1 - beta1) g);   m <- beta2 m + (1 - beta2) g

beta1 = 0.9, beta2 = 0.99 by default (Keras'); decoupled weight decay before the update,
as for every Keras optimizer. Its update has the same size in every coordinate, like
Adam's normalised step: an adaptive method in the paper's sense (its declaration says so).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, Optimizer, keras_float

DECLARATION = {"label": "Lion", "keras": "Lion", "adaptive": True,
               "hyperparameters": {"beta_1": 0.9, "beta_2": 0.99, "weight_decay": 0.0}}


class Lion(Optimizer):
    """Keras Lion: the sign of the interpolated momentum as the step (module docstring)."""
    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]],
                 weight_decay: float, *, beta_1: float, beta_2: float):
        """Lion over `named_params`, decoupled decay `weight_decay`, Keras' beta_1 and beta_2."""
        super().__init__(named_params, weight_decay)
        # Keras casts both (ops.cast(self.beta_1, dtype)): through float32, even in float64
        self.beta_1, self.beta_2 = keras_float(beta_1), keras_float(beta_2)
        self._add_slot("m", self.params)

    def _update(self, lr: LR) -> None:
        names = self._live(self.params)
        if not names:
            return
        w, g, m = self._tensors(names, "m")
        # Keras: m * beta1 + g * (1 - beta1), in that order
        direction = torch._foreach_add(torch._foreach_mul(m, self.beta_1),
                                       torch._foreach_mul(g, 1.0 - self.beta_1))
        torch._foreach_sign_(direction)
        torch._foreach_sub_(w, torch._foreach_mul(direction, lr))
        torch._foreach_mul_(m, self.beta_2)
        torch._foreach_add_(m, torch._foreach_mul(g, 1.0 - self.beta_2))


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Lion:
    """The recipe's Lion: its weight_decay and its declared hyperparameters."""
    return Lion(named_params, **recipe.optimizer_hyperparameters)
