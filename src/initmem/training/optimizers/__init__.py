"""Keras-faithful optimizers for packed training, one module per optimizer.

The module `<name>.py` is the optimizer a recipe names `optimizer: <name>`: it declares
itself in a literal `DECLARATION = {...}` (label, Keras class, adaptive, the recipe fields
and hyperparameters it takes; initmem.plan.optimizers reads it without importing torch)
and defines `build(recipe, named_params)`, which reads `recipe.optimizer_hyperparameters`.
Adding an optimizer is adding its module and naming it in a config's `optimizers`. Shared
machinery (the packed state, decay, counter and Adam math) is in `_base`.

Choices that differ from Keras, and why:
- The schedule is evaluated in float64 on the host (initmem.plan.schedule); Keras
  evaluates CosineDecay in float32 (float32 cos near pi loses digits), so the two differ
  by up to a few 1e-7 relative, about 1e-6 near the end of the schedule.
"""

from __future__ import annotations

import importlib

from torch import nn

from initmem.errors import InputError
from initmem.plan.optimizers import OPTIMIZERS
from initmem.plan.spec import Recipe
from initmem.training.optimizers._base import LR, AdamMath, Optimizer, keras_float, run_rows

__all__ = ["LR", "AdamMath", "Optimizer", "build_optimizer", "keras_float", "run_rows"]


def build_optimizer(recipe: Recipe, model: nn.Module) -> Optimizer:
    """The recipe's optimizer over the model's trainable parameters."""
    if recipe.optimizer not in OPTIMIZERS:  # a Recipe checks it; this guards stand-ins
        raise InputError(f"optimizer={recipe.optimizer!r} is not allowed; optimizer must be "
                         f"one of {', '.join(OPTIMIZERS)}")
    module = importlib.import_module(f"{__name__}.{recipe.optimizer}")
    return module.build(recipe, list(model.named_parameters()))
