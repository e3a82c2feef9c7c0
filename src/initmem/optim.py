"""Keras-faithful optimizers and learning-rate schedule for packed training.

Every parameter has a leading run dimension N; every update is elementwise or batched
over that dimension, so the runs of a pack stay independent. The math follows the Keras
3.15 sources (keras/src/optimizers/{base_optimizer,sgd,adam,adamw,muon}.py), including the
order of the floating-point operations where that costs nothing:

- Weight decay (any optimizer with weight_decay > 0, as Keras' base optimizer does) is
  decoupled and applied *before* the update, at the same rate: w <- w - w * lambda * eta_k,
  to every trainable variable that has a gradient this step (biases and norm params too).
- The step counter counts updates; Adam's bias correction uses t = iterations + 1, and a
  parameter skipped for lack of a gradient still sees the counter advance. Like Keras it
  computes beta^t and 1 - beta^t in float32: 1 - 0.999 is then 1.3e-5 off its exact value,
  so early Adam steps differ from an exact-arithmetic Adam by ~6e-6 relative, as Keras'.
- SGD: v <- mu v - eta g; w <- w + v (mu = 0: w <- w - eta g).
- Adam: m <- m + (g - m)(1 - beta1); v <- v + (g^2 - v)(1 - beta2);
  w <- w - (m * eta sqrt(1 - beta2^t) / (1 - beta1^t)) / (sqrt(v) + 1e-7)  ("epsilon hat").
  AdamW is Adam with weight_decay (Keras' AdamW is exactly that subclass).
- Muon routes each variable: the Muon update only if its per-run ndim is 2 and its name
  matches none of exclude_layers (re.search, as Keras does on variable.path); everything
  else takes Muon's AdamW path (the Adam math above, adam_lr_ratio 1). With the paper's
  exclude_layers=["dense"] no variable of these convolutional ResNets qualifies, so the
  paper's "muon" is AdamW step for step; it is implemented as that routing, not an alias.
  Muon path (Keras): m <- m + (g + m (mu - 1)) = mu m + g, mu = 0.95; Nesterov input
  g + mu m; 5 Newton-Schulz steps (3.4445, -4.7750, 2.0315) on it divided by its Frobenius
  norm + 1e-7 (transposed while rows > cols), in float32; w <- w - eta * O * sqrt(max(rows,
  cols)) * 0.2. muon_orthogonal (an extension, never the reproduction) routes conv kernels
  too, flattened per run to (out, in*kh*kw); the output dense stays excluded.

Choices that differ from Keras, and why:
- The schedule is evaluated in float64 on the host; Keras evaluates CosineDecay in float32
  (float32 cos near pi loses digits), so the two differ by up to a few 1e-7 relative,
  about 1e-6 near the end of the schedule where alpha dominates.
- Keras Muon has two decay values (weight_decay for the Muon path, adam_weight_decay,
  default 0.004, for the AdamW path). A recipe has one lambda; the paper (Table 1) gives
  Muon lambda = 1e-4, so both paths use recipe.weight_decay.
- Keras Muon's exclude_embeddings has no effect here (no embeddings) and is not modelled.
- The kernel L2 penalty is the training loop's job (added to the loss, so its gradient is
  coupled through momentum and Adam), not the optimizer's.

`step(lr)` never synchronises with the host: the step counter and all state live on the
parameters' device (build the optimizer after moving the model), and lr may be a Python
float or a 0-d tensor; for CUDA-graph capture pass a 0-d tensor on that device, updated in
place, so the captured step reads the current rate.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .errors import InputError
from .spec import Recipe

ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON = 0.9, 0.999, 1e-7
MUON_MOMENTUM, MUON_NS_STEPS, MUON_RMS_RATE = 0.95, 5, 0.2
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
MUON_EXCLUDE_LAYERS = ("dense",)  # the paper's exclude_layers: the output layer

LR = float | Tensor


def learning_rate(recipe: Recipe, k: int) -> float:
    """eta_k of update k = 0, 1, ...: Keras CosineDecay(lr0, K, alpha) or a constant rate."""
    if k < 0:
        raise ValueError(f"update index k={k} is not allowed; k must be >= 0")
    if recipe.schedule == "constant":
        return recipe.lr0
    alpha, total = recipe.cosine_alpha, recipe.total_steps
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(k, total) / total))
    return recipe.lr0 * ((1.0 - alpha) * cosine + alpha)


def newton_schulz(x: Tensor, steps: int = MUON_NS_STEPS) -> Tensor:
    """Keras Muon's zeropower_via_newtonschulz5 on a batch of matrices (..., rows, cols)."""
    a, b, c = MUON_NS_COEFFS
    x = x.float()
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = x.mT
    x = x / (torch.linalg.matrix_norm(x, keepdim=True) + 1e-7)
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.mT if tall else x


class Optimizer(ABC):
    """Named parameters, per-parameter state slots and an update counter on the device."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float):
        self.params = {name: p for name, p in named_params if p.requires_grad}
        if not self.params:
            raise ValueError("no trainable parameters to optimise")
        self.weight_decay = weight_decay
        device = next(iter(self.params.values())).device
        self.iterations = torch.zeros((), dtype=torch.int64, device=device)
        self.slots: dict[str, Tensor] = {}  # "<param name>:<slot>" -> state tensor

    def _add_slot(self, slot: str, names: Iterable[str]) -> None:
        for name in names:
            self.slots[f"{name}:{slot}"] = torch.zeros_like(self.params[name])

    def _live(self, names: Iterable[str]) -> list[str]:
        """The names whose parameter has a gradient this step (Keras skips the others)."""
        return [n for n in names if self.params[n].grad is not None]

    def _tensors(self, names: list[str], *slots: str) -> list[list[Tensor]]:
        """Parameters, their gradients, then each requested slot, as parallel lists."""
        return [[self.params[n] for n in names], [self.params[n].grad for n in names],
                *[[self.slots[f"{n}:{s}"] for n in names] for s in slots]]

    @torch.no_grad()
    def step(self, lr: LR) -> None:
        """One update at rate lr: decoupled decay first (as Keras), then the update."""
        live = self._live(self.params)
        if self.weight_decay and live:
            w = self._tensors(live)[0]
            torch._foreach_sub_(w, torch._foreach_mul(w, lr * self.weight_decay))
        self._update(lr)
        self.iterations += 1

    @abstractmethod
    def _update(self, lr: LR) -> None:
        """The optimizer's own update of every live parameter (after the decay)."""

    def _adam(self, names: Iterable[str], lr: LR) -> None:
        names = self._live(names)
        if not names:
            return
        w, g, m, v = self._tensors(names, "m", "v")
        t = (self.iterations + 1).float()
        alpha = lr * torch.sqrt(1 - torch.pow(ADAM_BETA2, t)) / (1 - torch.pow(ADAM_BETA1, t))
        torch._foreach_lerp_(m, g, 1 - ADAM_BETA1)  # m + (g - m)(1 - beta1), as Keras
        torch._foreach_lerp_(v, torch._foreach_mul(g, g), 1 - ADAM_BETA2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, ADAM_EPSILON)
        step = torch._foreach_mul(m, alpha)
        torch._foreach_div_(step, denom)
        torch._foreach_sub_(w, step)

    def state_dict(self) -> dict[str, object]:
        """Everything a bitwise resume needs: the counter and every slot (copies)."""
        return {"iterations": self.iterations.clone(),
                "slots": {key: t.clone() for key, t in self.slots.items()}}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Copy a state_dict in place (tensors keep their storage, e.g. for CUDA graphs)."""
        slots = state["slots"]
        if set(slots) != set(self.slots):
            raise InputError(f"optimizer state has slots {sorted(slots)}; this optimizer "
                             f"needs exactly {sorted(self.slots)}")
        for key, t in slots.items():
            if t.shape != self.slots[key].shape:
                raise InputError(f"optimizer slot {key} has shape {tuple(t.shape)}; "
                                 f"expected {tuple(self.slots[key].shape)}")
            self.slots[key].copy_(t)
        self.iterations.copy_(state["iterations"])


class SGD(Optimizer):
    """Keras SGD: v <- mu v - eta g; w <- w + v (plain w <- w - eta g when mu = 0)."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], momentum: float,
                 weight_decay: float = 0.0):
        super().__init__(named_params, weight_decay)
        self.momentum = momentum
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


class Adam(Optimizer):
    """Keras Adam (epsilon hat); with weight_decay > 0 it is Keras AdamW."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]],
                 weight_decay: float = 0.0):
        super().__init__(named_params, weight_decay)
        self._add_slot("m", self.params)
        self._add_slot("v", self.params)

    def _update(self, lr: LR) -> None:
        self._adam(self.params, lr)


class Muon(Optimizer):
    """Keras Muon: per-variable routing between the orthogonalised update and AdamW.

    flatten_conv=False is Keras' rule (per-run ndim 2 only: the paper's optimizer);
    flatten_conv=True also routes conv kernels, flattened per run (muon_orthogonal).
    """

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float,
                 exclude_layers: Iterable[str] = MUON_EXCLUDE_LAYERS,
                 flatten_conv: bool = False):
        super().__init__(named_params, weight_decay)
        ndims = (2, 4) if flatten_conv else (2,)
        excluded = [re.compile(pattern) for pattern in exclude_layers]
        self.muon_names = [n for n, p in self.params.items() if p.ndim - 1 in ndims
                           and not any(e.search(n) for e in excluded)]
        self.adam_names = [n for n in self.params if n not in self.muon_names]
        self._add_slot("m", self.params)
        self._add_slot("v", self.adam_names)

    def _update(self, lr: LR) -> None:
        self._adam(self.adam_names, lr)
        names = self._live(self.muon_names)
        if not names:
            return
        w, g, m = self._tensors(names, "m")
        torch._foreach_add_(m, torch._foreach_add(g, torch._foreach_mul(m, MUON_MOMENTUM - 1)))
        nesterov = torch._foreach_add(g, torch._foreach_mul(m, MUON_MOMENTUM))
        for p, u in zip(w, nesterov, strict=True):
            matrices = u.reshape(u.shape[0], u.shape[1], -1)  # (N, rows, cols) per run
            update = lr * newton_schulz(matrices).to(p.dtype)  # Keras: lr_adjust(lr * O)
            p.sub_((update * math.sqrt(max(matrices.shape[1:])) * MUON_RMS_RATE).view_as(p))


def build_optimizer(recipe: Recipe, model: nn.Module) -> Optimizer:
    """The recipe's optimizer over the model's trainable parameters (see module docstring)."""
    if recipe.momentum and recipe.optimizer != "sgd_momentum":
        raise InputError(f"momentum={recipe.momentum} is not allowed for optimizer "
                         f"{recipe.optimizer}; momentum is only used by sgd_momentum")
    named = list(model.named_parameters())
    wd = recipe.weight_decay
    if recipe.optimizer in ("sgd", "sgd_momentum"):
        return SGD(named, recipe.momentum, wd)
    if recipe.optimizer in ("adam", "adamw"):
        return Adam(named, wd)
    if recipe.optimizer in ("muon", "muon_orthogonal"):
        return Muon(named, wd, flatten_conv=recipe.optimizer == "muon_orthogonal")
    raise InputError(f"optimizer={recipe.optimizer!r} is not allowed; optimizer must be one "
                     "of sgd, sgd_momentum, adam, adamw, muon, muon_orthogonal")
