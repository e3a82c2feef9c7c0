"""The learning-rate schedule and the forgetting clocks of a recipe, in closed form.

Keras CosineDecay evaluated per update k = 0, 1, ... (the first update uses k = 0):
    eta_k = eta_0 [alpha + (1 - alpha)(1 + cos(pi min(k, K) / K)) / 2],  K = epochs x ceil(n / b),
or a constant rate. The clocks of Section 4 accumulate it: T_SGD = (1/b) sum eta_k^2,
T_L2 = lambda sum eta_k, T_adapt = sum eta_k. The trainer steps with `learning_rate`;
the synthetic records and the paper's arithmetic use the closed forms.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pandas as pd

from initmem.plan.spec import Recipe


def learning_rate(recipe: Recipe, k: int) -> float:
    """eta_k of update k = 0, 1, ...: Keras CosineDecay(lr0, K, alpha) or a constant rate."""
    if k < 0:
        raise ValueError(f"update index k={k} is not allowed; k must be >= 0")
    if recipe.schedule == "constant":
        return recipe.lr0
    alpha, total = recipe.cosine_alpha, recipe.total_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(k, total) / total))
    return recipe.lr0 * ((1.0 - alpha) * cosine + alpha)


def schedule_clocks(lr0: float, b: int, steps_per_epoch: int, epochs: int, lam: float = 0.0,
                    schedule: str = "cosine", alpha: float = 0.01) -> pd.DataFrame:
    """The clocks at the end of each epoch, in closed form for the Keras schedules.

    eta_k = lr0 [alpha + (1 - alpha)(1 + cos(pi k / K)) / 2] for k < K updates
    (or lr0 for a constant schedule); T_SGD = (1/b) sum eta_k^2, T_L2 = lam sum eta_k,
    T_adapt = sum eta_k over the updates done by the end of the epoch. Columns: epoch,
    lr (rate of the epoch's last update), T_SGD, T_L2, T_adapt.
    """
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule={schedule!r} is not allowed; use cosine or constant")
    total = steps_per_epoch * epochs
    n = np.arange(1, epochs + 1, dtype=float) * steps_per_epoch  # updates done so far
    if schedule == "constant":
        s_eta, s_eta2, last = lr0 * n, lr0**2 * n, np.full(epochs, lr0)
    else:
        theta = math.pi / total
        s_cos = _cos_sum(n, theta)
        s_cos2 = n / 2 + _cos_sum(n, 2 * theta) / 2
        mid, half = alpha + (1 - alpha) / 2, (1 - alpha) / 2
        s_eta = lr0 * (mid * n + half * s_cos)
        s_eta2 = lr0**2 * (mid**2 * n + 2 * mid * half * s_cos + half**2 * s_cos2)
        last = lr0 * (mid + half * np.cos(theta * (n - 1)))
    return pd.DataFrame({"epoch": np.arange(1, epochs + 1), "lr": last,
                         "T_SGD": s_eta2 / b, "T_L2": lam * s_eta, "T_adapt": s_eta})


def _cos_sum(n: np.ndarray, theta: float) -> np.ndarray:
    """sum_{k<n} cos(theta k), closed form (theta in (0, 2 pi))."""
    return np.sin(n * theta / 2) * np.cos((n - 1) * theta / 2) / math.sin(theta / 2)


def clock_estimate(lr0: float, b: int, total_steps: int, lam: float = 0.0) -> dict[str, float]:
    """The clocks at a constant rate (the paper's Section 4 arithmetic, which ignores the
    cosine decay): K eta^2 / b, K eta lambda, K eta."""
    return {"T_SGD": total_steps * lr0**2 / b, "T_L2": total_steps * lr0 * lam,
            "T_adapt": total_steps * lr0}


CLOCKS = ("T_SGD", "T_L2", "T_adapt")


@cache
def final_clocks(recipe: Recipe) -> dict[str, float]:
    """The clocks a recipe's runs end with (their records' T_SGD, T_L2, T_adapt)."""
    last = schedule_clocks(recipe.lr0, recipe.b, recipe.steps_per_epoch, recipe.epochs,
                           recipe.shrinkage, recipe.schedule, recipe.cosine_alpha).iloc[-1]
    return {name: float(last[name]) for name in CLOCKS}
