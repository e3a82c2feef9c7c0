"""Keras 3 Muon: per-variable routing between the orthogonalised update and AdamW.

Muon routes each variable: the Muon update only if its per-run ndim is 2 and its name
matches none of exclude_layers (re.search, as Keras does on variable.path); everything
else takes Muon's AdamW path (the base optimizer's Adam math, adam_lr_ratio 1). With the
paper's exclude_layers=["dense"] no variable of these convolutional ResNets qualifies, so
the paper's "muon" is AdamW step for step; it is implemented as that routing, not an
alias. Muon path (Keras): m <- m + (g + m (mu - 1)) = mu m + g, mu = 0.95; Nesterov input
g + mu m; ns_steps = 5 Newton-Schulz steps (muon_a, muon_b, muon_c = 3.4445, -4.7750,
2.0315) on it divided by its Frobenius norm + 1e-7 (transposed while rows > cols), in
float32; w <- w - eta * O * sqrt(max(rows, cols)) * rms_rate (0.2). Every number named
here is a declared hyperparameter (Keras' names and defaults); Keras' nesterov=True is
fixed. `muon_orthogonal` (an extension, never the reproduction) routes conv
kernels too, flattened per run to (out, in*kh*kw); the output dense stays excluded.

Keras' Muon has two decay values: weight_decay for the Muon path and adam_weight_decay
(default 0.004) for the AdamW path, which here is every variable. The paper gives Muon
lambda = 1e-4 without naming the argument, so the recipe holds both readings: by default
both paths decay at weight_decay (the paper's stated lambda; adam_weight_decay null,
this module's default); with adam_weight_decay set the AdamW path decays at that value
(0.004: Keras' default, had the authors set only weight_decay). Keras'
exclude_embeddings has no effect here (no embeddings) and is not modelled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, AdamMath, Optimizer, keras_float

DECLARATION = {
    "label": "Muon", "keras": "Muon", "adaptive": True,
    "kernel_decay": "adam_weight_decay",  # the paper's exclude_layers leave every kernel to AdamW
    "hyperparameters": {"adam_beta_1": 0.9, "adam_beta_2": 0.999, "epsilon": 1e-7,
                        "adam_lr_ratio": 1.0, "momentum": 0.95, "ns_steps": 5,
                        "rms_rate": 0.2, "muon_a": 3.4445, "muon_b": -4.7750,
                        "muon_c": 2.0315, "weight_decay": 0.0, "adam_weight_decay": None},
}
MUON_EXCLUDE_LAYERS = ("dense",)  # the paper's exclude_layers: the output layer
_H = DECLARATION["hyperparameters"]


def newton_schulz(x: Tensor, steps: int = _H["ns_steps"],
                  coefficients: tuple[float, float, float] = (_H["muon_a"], _H["muon_b"],
                                                              _H["muon_c"])) -> Tensor:
    """Keras Muon's zeropower_via_newtonschulz5 on a batch of matrices (..., rows, cols)."""
    a, b, c = coefficients
    x = x.float()
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = x.mT
    x = x / (torch.linalg.matrix_norm(x, keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.mT if tall else x


class Muon(Optimizer):
    """Keras Muon: per-variable routing between the orthogonalised update and AdamW.

    flatten_conv=False is Keras' rule (per-run ndim 2 only: the paper's optimizer);
    flatten_conv=True also routes conv kernels, flattened per run (muon_orthogonal).
    """

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]],
                 exclude_layers: Iterable[str] = MUON_EXCLUDE_LAYERS,
                 flatten_conv: bool = False, hyperparameters: dict[str, float] | None = None):
        """Muon over `named_params`, its declared hyperparameters overridden by
        `hyperparameters`: the Muon path decays at weight_decay, the AdamW path at
        adam_weight_decay (None: weight_decay)."""
        h = {**_H, **(hyperparameters or {})}
        super().__init__(named_params, h["weight_decay"])
        adam_weight_decay = h["adam_weight_decay"]
        self.adam = AdamMath(h["adam_beta_1"], h["adam_beta_2"], h["epsilon"])
        self.adam_lr_ratio, self.momentum, self.rms_rate = (
            h["adam_lr_ratio"], h["momentum"], h["rms_rate"])
        self.ns_steps, self.ns_coefficients = int(h["ns_steps"]), (
            h["muon_a"], h["muon_b"], h["muon_c"])
        self.adam_weight_decay = (self.weight_decay if adam_weight_decay is None
                                  else keras_float(adam_weight_decay))
        ndims = (2, 4) if flatten_conv else (2,)
        excluded = [re.compile(pattern) for pattern in exclude_layers]
        self.muon_names = [n for n, p in self.params.items() if p.ndim - 1 in ndims
                           and not any(e.search(n) for e in excluded)]
        self.adam_names = [n for n in self.params if n not in self.muon_names]
        self._add_slot("m", self.params)
        self._add_slot("v", self.adam_names)

    def decoupled_decays(self) -> list[tuple[list[str], float]]:
        """The AdamW path decayed at adam_weight_decay, the Muon path at weight_decay."""
        return [(self.adam_names, self.adam_weight_decay), (self.muon_names, self.weight_decay)]

    def _update(self, lr: LR) -> None:
        self._adam(self.adam_names, lr * self.adam_lr_ratio, self.adam)
        names = self._live(self.muon_names)
        if not names:
            return
        w, g, m = self._tensors(names, "m")
        torch._foreach_add_(m, torch._foreach_add(g, torch._foreach_mul(m, self.momentum - 1)))
        nesterov = torch._foreach_add(g, torch._foreach_mul(m, self.momentum))
        for p, u in zip(w, nesterov, strict=True):
            matrices = u.reshape(u.shape[0], u.shape[1], -1)  # (N, rows, cols) per run
            orthogonal = newton_schulz(matrices, self.ns_steps, self.ns_coefficients)
            update = lr * orthogonal.to(p.dtype)  # Keras: lr_adjust(lr * O)
            p.sub_((update * math.sqrt(max(matrices.shape[1:])) * self.rms_rate).view_as(p))


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Muon:
    """The recipe's Muon, routed as Keras routes it: both decays, the declared hyperparameters."""
    return Muon(named_params, hyperparameters=recipe.optimizer_hyperparameters)
