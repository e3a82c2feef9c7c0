"""The minimal linear model of Appendix G: imbalance conservation and what breaks it.

Scalar two-factor model: loss (ab - y)^2, imbalance D = a^2 - b^2. Gradient flow conserves
D; coupled L2 decay contracts it as exp(-2 lambda t); a finite Euclidean step moves it by
exactly eta^2 g^2 (b^2 - a^2) with g = 2(ab - y); a preconditioner moves it at first order.
Deep linear networks W_L ... W_1 conserve every W_j W_j^T - W_{j+1}^T W_{j+1} under flow.

The discrete optimizers are scalar recurrences, sequential by nature: a plain float loop
runs them faster than numpy would (numpy's per-call overhead dwarfs one scalar step);
200,000 Adam steps take a fraction of a second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.integrate import solve_ivp

A0, B0 = 1.0, 6.0  # Fig. 9's initialisation: D0 = -35
ETAS = (0.01, 0.04)
CYCLIC_TARGETS = (0.0, 1.0, 2.0)  # minibatch targets, mean 1: same minimiser ab = 1
# Panel (d): "adding stochasticity": targets drawn i.i.d. from {0, 1, 2} with a fixed
# seed. With strictly cyclic targets eta = 0.01 is still at D = -8.5 after 200,000
# steps, against the caption's D ~ 0 for both rates; i.i.d. draws reproduce the caption.
RANDOM_TARGETS = tuple(np.random.default_rng(0).choice(CYCLIC_TARGETS, 200_000).tolist())
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-7  # Keras' epsilon, added to sqrt(v) ("epsilon hat" form)


@dataclass(frozen=True)
class ToyOptimizer:
    """One panel of Fig. 9: an update rule, a step count and the target sequence."""

    name: str
    label: str
    rule: str  # "gd" (Euclidean step) or "adam"
    steps: int
    targets: tuple[float, ...]
    iid: bool = False  # targets are i.i.d. draws, one per step: they never repeat

    @property
    def cycle(self) -> int:
        """Steps after which the targets repeat; 1 for i.i.d. draws, which have no cycle
        to average over (their sequence is as long as the run)."""
        return 1 if self.iid else len(self.targets)


TOY_OPTIMIZERS = (
    ToyOptimizer("gd", "GD", "gd", 20, (1.0,)),
    ToyOptimizer("sgd", "SGD, cyclic targets", "gd", 50_000, CYCLIC_TARGETS),
    ToyOptimizer("adam", "Adam, full batch", "adam", 5_000, (1.0,)),
    ToyOptimizer("minibatch_adam", "Adam, random minibatch targets", "adam", 200_000,
                 RANDOM_TARGETS, iid=True),
)
RULES = ("gd", "adam")


def imbalance(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray | float:
    """The imbalance D = a^2 - b^2."""
    return a * a - b * b


def trajectory(rule: str, eta: float, steps: int, targets: Sequence[float] = (1.0,),
               a0: float = A0, b0: float = B0) -> np.ndarray:
    """(steps + 1, 2) array of (a, b): step k uses target targets[k % len(targets)]."""
    if rule not in RULES:
        raise ValueError(f"rule={rule!r} is not allowed; rule must be one of {RULES}")
    if not (eta > 0 and steps >= 0 and len(targets) > 0):
        raise ValueError(f"need eta > 0, steps >= 0 and targets; got eta={eta!r}, "
                         f"steps={steps!r}, targets={targets!r}")
    step = _gd if rule == "gd" else _adam
    return step(float(eta), int(steps), [float(y) for y in targets], float(a0), float(b0))


def _gd(eta: float, steps: int, targets: list[float], a: float, b: float) -> np.ndarray:
    n = len(targets)
    out_a, out_b = [a], [b]
    for k in range(steps):
        g = 2.0 * (a * b - targets[k % n])
        a, b = a - eta * g * b, b - eta * g * a  # simultaneous update of both factors
        out_a.append(a)
        out_b.append(b)
    return np.column_stack([out_a, out_b])


def _adam(eta: float, steps: int, targets: list[float], a: float, b: float) -> np.ndarray:
    """Keras Adam: w -= eta sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)."""
    b1, b2 = ADAM_BETAS
    n = len(targets)
    m_a = m_b = v_a = v_b = 0.0
    out_a, out_b = [a], [b]
    for k in range(steps):
        g = 2.0 * (a * b - targets[k % n])
        g_a, g_b = g * b, g * a
        m_a = b1 * m_a + (1 - b1) * g_a
        m_b = b1 * m_b + (1 - b1) * g_b
        v_a = b2 * v_a + (1 - b2) * g_a * g_a
        v_b = b2 * v_b + (1 - b2) * g_b * g_b
        rate = eta * math.sqrt(1 - b2 ** (k + 1)) / (1 - b1 ** (k + 1))
        a -= rate * m_a / (math.sqrt(v_a) + ADAM_EPS)
        b -= rate * m_b / (math.sqrt(v_b) + ADAM_EPS)
        out_a.append(a)
        out_b.append(b)
    return np.column_stack([out_a, out_b])


def run_toy(optimizer: ToyOptimizer, eta: float) -> np.ndarray:
    """One panel's (a, b) trajectory at step size `eta`."""
    return trajectory(optimizer.rule, eta, optimizer.steps, optimizer.targets)


def toy_table(trajectories: dict[tuple[str, float], np.ndarray]) -> pd.DataFrame:
    """One row per (optimizer, eta): steps, final point, D at start and end, norm, product."""
    rows = []
    for (name, eta), path in trajectories.items():
        a, b = path[-1]
        rows.append({"optimizer": name, "eta": eta, "steps": len(path) - 1,
                     "a_final": a, "b_final": b, "ab_final": a * b,
                     "norm2_final": a * a + b * b, "D_init": imbalance(*path[0]),
                     "D_final": imbalance(a, b)})
    return pd.DataFrame(rows)


def gradient_flow(t: Sequence[float], a0: float = A0, b0: float = B0, l2: float = 0.0,
                  target: float = 1.0) -> np.ndarray:
    """(len(t), 2) solution of  a' = -g b - l2 a,  b' = -g a - l2 b,  g = 2(ab - target).

    l2 is the coupled decay of the penalty l2 (a^2 + b^2) / 2 (Appendix G, Prop. 3).
    """
    def field(_t: float, w: np.ndarray) -> list[float]:
        a, b = w
        g = 2.0 * (a * b - target)
        return [-g * b - l2 * a, -g * a - l2 * b]

    sol = solve_ivp(field, (0.0, float(t[-1])), [a0, b0], t_eval=np.asarray(t, float),
                    method="DOP853", rtol=1e-12, atol=1e-12)
    if not sol.success:
        raise RuntimeError(f"gradient flow did not integrate: {sol.message}")
    return sol.y.T


def deep_linear_grads(weights: Sequence[np.ndarray], target: np.ndarray) -> list[np.ndarray]:
    """Layer gradients of phi(F) = ||F - target||_F^2 / 2, F = W_L ... W_1 (weights[0] = W_1).

    H_j = A_j^T G B_j^T with A_j = W_L ... W_{j+1}, B_j = W_{j-1} ... W_1, G = F - target.
    """
    prefix = [np.eye(weights[0].shape[1])]  # B_1 = I, B_{j+1} = W_j B_j
    for w in weights:
        prefix.append(w @ prefix[-1])
    grad_f = prefix[-1] - target
    grads, suffix = [], np.eye(weights[-1].shape[0])  # A_L = I, A_{j-1} = A_j W_j
    for j in reversed(range(len(weights))):
        grads.append(suffix.T @ grad_f @ prefix[j].T)
        suffix = suffix @ weights[j]
    return grads[::-1]


def adjacent_imbalances(weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    """D_j = W_j W_j^T - W_{j+1}^T W_{j+1}, j = 1 .. L-1."""
    return [w @ w.T - nxt.T @ nxt for w, nxt in zip(weights[:-1], weights[1:], strict=True)]


def deep_linear_flow(weights: Sequence[np.ndarray], target: np.ndarray, t_end: float,
                     l2: float = 0.0) -> list[np.ndarray]:
    """The weights after gradient flow (with coupled decay l2) for time t_end."""
    shapes = [w.shape for w in weights]
    sizes = np.cumsum([0] + [w.size for w in weights])

    def unpack(flat: np.ndarray) -> list[np.ndarray]:
        return [flat[s:e].reshape(shape) for s, e, shape in zip(sizes[:-1], sizes[1:], shapes,
                                                                 strict=True)]

    def field(_t: float, flat: np.ndarray) -> np.ndarray:
        ws = unpack(flat)
        return np.concatenate([(-h - l2 * w).ravel()
                               for h, w in zip(deep_linear_grads(ws, target), ws, strict=True)])

    start = np.concatenate([w.ravel() for w in weights])
    sol = solve_ivp(field, (0.0, t_end), start, method="DOP853", rtol=1e-12, atol=1e-12)
    if not sol.success:
        raise RuntimeError(f"deep linear flow did not integrate: {sol.message}")
    return unpack(sol.y[:, -1])
