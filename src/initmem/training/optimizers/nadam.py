"""Keras 3's `keras.optimizers.Nadam` (Dozat 2015): Adam with Nesterov momentum and a
momentum schedule. An extension the paper did not run, and the example of per-run scalar
state: the running product of the momentum-decay factors, one value per run.

    mu_t = beta_1 (1 - 0.5 * 0.96^t),  t = iterations + 1;  u <- u * mu_t (once per step)
    m <- m + (g - m)(1 - beta_1);  v <- v + (g^2 - v)(1 - beta_2)
    m_hat = mu_{t+1} m / (1 - u mu_{t+1}) + (1 - mu_t) g / (1 - u)
    w <- w - m_hat eta / (sqrt(v / (1 - beta_2^t)) + epsilon)

As Keras, the product's update reads beta_1 and 0.96 as Python floats (exact in float64),
the per-variable update casts them (keras_float); epsilon is added as a Python float.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, Optimizer, keras_float

DECLARATION = {"label": "Nadam", "keras": "Nadam", "adaptive": True,
               "hyperparameters": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7,
                                   "weight_decay": 0.0}}
DECAY = 0.96  # Keras' fixed momentum-schedule base


class Nadam(Optimizer):
    """Keras Nadam: Adam with Nesterov momentum and a momentum schedule (module docstring)."""
    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float,
                 *, beta_1: float, beta_2: float, epsilon: float):
        """Nadam over `named_params`, decoupled decay `weight_decay`, Keras' betas and epsilon."""
        super().__init__(named_params, weight_decay)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self._add_slot("m", self.params)
        self._add_slot("v", self.params)
        self._add_run_scalar("u_product", 1.0)

    def _update(self, lr: LR) -> None:
        u = self.run_scalars["u_product"]
        t = (self.iterations + 1).to(u.dtype)
        u.mul_(self.beta_1).mul_(1.0 - 0.5 * torch.pow(DECAY, t))  # Keras: every step
        names = self._live(self.params)
        if not names:
            return
        beta_1, beta_2 = keras_float(self.beta_1), keras_float(self.beta_2)
        mu_t = beta_1 * (1.0 - 0.5 * torch.pow(keras_float(DECAY), t))
        mu_next = beta_1 * (1.0 - 0.5 * torch.pow(keras_float(DECAY), t + 1))
        v_scale = 1 - torch.pow(beta_2, t)
        for w, g, m, v in zip(*self._tensors(names, "m", "v"), strict=True):
            per_run = (-1,) + (1,) * (w.ndim - 1)  # u's run dimension against w's
            u_t = u.view(per_run)
            m.add_((g - m) * (1 - beta_1))
            v.add_((g * g - v) * (1 - beta_2))
            m_hat = mu_next * m / (1 - u_t * mu_next) + (1 - mu_t) * g / (1 - u_t)
            w.sub_(m_hat * lr / (torch.sqrt(v / v_scale) + self.epsilon))


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Nadam:
    """The recipe's Nadam: its weight_decay and its declared hyperparameters."""
    return Nadam(named_params, **recipe.optimizer_hyperparameters)
