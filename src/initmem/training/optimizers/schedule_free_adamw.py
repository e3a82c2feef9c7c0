"""Schedule-Free AdamW (Defazio et al. 2024), as `schedulefree.AdamWScheduleFree` 1.4.1:
an extension the paper did not run, and the example of an optimizer evaluated at other
weights than it trains, with a PyTorch reference instead of a Keras one.

The parameters hold y, where gradients are taken; the slot z is the base sequence
(starting at the parameters as built) and x, the weighted average of the z's, is where
the method is evaluated (Optimizer.evaluation_parameters): x = y + (1 - 1/beta_1)(z - y).
Per update, t = iterations + 1, with an optional linear warm-up inside the method:

    eta = lr min(t / warmup_steps, 1);  eta_max <- max(eta_max, eta)
    c = w_t / sum w,  w_t = t^r eta_max^weight_lr_power
    v <- beta_2 v + (1 - beta_2) g^2;   d = g / (sqrt(v / (1 - beta_2^t)) + eps) + lambda y
    y <- (1 - c) y + c z + eta (beta_1 (1 - c) - 1) d;   z <- z - eta d

Its weight decay is the reference's (lambda y inside d, at y), not Keras' decoupled step,
so it declares no decoupled decay (decoupled_decays() is []). The method wants a constant
rate: config/schedule_free.yaml sets `schedule: constant` on its `optimizers` entry.
Hyperparameters take the reference's names (betas split in two) and Python floats as the
reference does (no keras_float).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, Optimizer

DECLARATION = {
    "label": "Schedule-Free AdamW", "adaptive": True,
    "reference": "schedulefree.AdamWScheduleFree", "tolerance": 1e-12,
    "hyperparameters": {"beta_1": 0.9, "beta_2": 0.999, "eps": 1e-8, "warmup_steps": 0,
                        "r": 0.0, "weight_lr_power": 2.0, "weight_decay": 0.0},
}


class ScheduleFreeAdamW(Optimizer):
    """Schedule-Free AdamW: trained at y, evaluated at x (module docstring)."""
    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float,
                 *, beta_1: float, beta_2: float, eps: float, warmup_steps: int, r: float,
                 weight_lr_power: float):
        """Over `named_params`, z starting at them; the reference's hyperparameters."""
        super().__init__(named_params, weight_decay)
        self.decay = weight_decay  # a Python float, as the reference's
        self.beta_1, self.beta_2, self.eps = beta_1, beta_2, eps
        self.warmup_steps, self.r, self.weight_lr_power = warmup_steps, r, weight_lr_power
        self._add_slot("z", self.params, from_parameters=True)
        self._add_slot("v", self.params)
        self._add_run_scalar("lr_max", -1.0)
        self._add_run_scalar("weight_sum", 0.0)

    def decoupled_decays(self) -> list[tuple[list[str], float]]:
        """None: its decay is inside its update, at y."""
        return []  # its decay is inside the update, at y

    def evaluation_parameters(self) -> dict[str, Tensor]:
        """x, where the method is evaluated: y + (1 - 1/beta_1)(z - y), out of place."""
        return {n: torch.lerp(y, self.slots[f"{n}:z"], 1 - 1 / self.beta_1)
                for n, y in self.params.items()}

    def _update(self, lr: LR) -> None:
        lr_max, weight_sum = self.run_scalars["lr_max"], self.run_scalars["weight_sum"]
        t = (self.iterations + 1).to(lr_max.dtype)
        if self.warmup_steps:
            lr = lr * torch.clamp(t / self.warmup_steps, max=1.0)
        lr_max.clamp_(min=lr)
        weight = torch.pow(t, self.r) * torch.pow(lr_max, self.weight_lr_power)
        weight_sum.add_(weight)
        ckp1 = torch.where(weight_sum != 0, weight / weight_sum, 0.0)
        bias_correction = 1 - torch.pow(self.beta_2, t)
        for y, g, z, v in zip(*self._tensors(self._live(self.params), "z", "v"), strict=True):
            c = ckp1.view((-1,) + (1,) * (y.ndim - 1))  # per run, against y's shape
            v.mul_(self.beta_2).addcmul_(g, g, value=1 - self.beta_2)
            d = g / (v.div(bias_correction).sqrt_().add_(self.eps))
            if self.decay:
                d.add_(y, alpha=self.decay)
            y.lerp_(z, c)
            y.add_(d * (lr * (self.beta_1 * (1 - c) - 1)))
            z.sub_(d * lr)


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]
          ) -> ScheduleFreeAdamW:
    """The recipe's Schedule-Free AdamW: its weight_decay and its declared hyperparameters."""
    return ScheduleFreeAdamW(named_params, **recipe.optimizer_hyperparameters)
