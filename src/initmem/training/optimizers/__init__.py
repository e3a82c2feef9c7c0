"""Keras-faithful optimizers for packed training, one module per optimizer.

The module `<name>.py` is the optimizer a recipe names `optimizer: <name>`: it defines
`build(recipe, named_params)`. Adding an optimizer is adding its module (and its config
entry: label, colour, whether it is adaptive); `initmem.plan.spec` reads the names from
this folder, so the config check knows it without importing torch. Shared machinery (the
packed state, decay, counter and Adam math) is in `_base`.

Choices that differ from Keras, and why:
- The schedule is evaluated in float64 on the host (initmem.plan.schedule); Keras
  evaluates CosineDecay in float32 (float32 cos near pi loses digits), so the two differ
  by up to a few 1e-7 relative, about 1e-6 near the end of the schedule.
"""

from __future__ import annotations

import importlib

from torch import nn

from initmem.errors import InputError
from initmem.plan.spec import OPTIMIZERS, Recipe
from initmem.training.optimizers._base import LR, Optimizer, keras_float

__all__ = ["LR", "Optimizer", "build_optimizer", "keras_float"]


def build_optimizer(recipe: Recipe, model: nn.Module) -> Optimizer:
    """The recipe's optimizer over the model's trainable parameters."""
    if recipe.optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer={recipe.optimizer!r} is not allowed; optimizer must be "
                         f"one of {', '.join(OPTIMIZERS)}")
    if recipe.momentum and recipe.optimizer != "sgd_momentum":
        raise InputError(f"momentum={recipe.momentum} is not allowed for optimizer "
                         f"{recipe.optimizer}; momentum is only used by sgd_momentum")
    module = importlib.import_module(f"{__name__}.{recipe.optimizer}")
    return module.build(recipe, list(model.named_parameters()))
