"""What every optimizer shares: named packed parameters, its state (per-parameter slots,
per-run scalars and an update counter, all on the device), Keras' decoupled weight decay,
and Keras' Adam math (Adam, AdamW and Muon's AdamW path use it).

Every parameter has a leading run dimension N; every update is elementwise or batched
over that dimension, so the runs of a pack stay independent. The math follows the Keras
3.15 sources (keras/src/optimizers/), including the order of the floating-point
operations where that costs nothing:

- Weight decay (any optimizer with weight_decay > 0, as Keras' base optimizer does) is
  decoupled and applied *before* the update, at the same rate: w <- w - w * lambda * eta_k,
  to every trainable variable that has a gradient this step (biases and norm params too).
- The step counter counts updates; Adam's bias correction uses t = iterations + 1, and a
  parameter skipped for lack of a gradient still sees the counter advance. Like Keras it
  computes beta^t and 1 - beta^t in the variables' dtype from the float32-rounded betas:
  in float32 training 1 - 0.999 is then 1.3e-5 off its exact value, so early Adam steps
  differ from an exact-arithmetic Adam by ~6e-6 relative, as Keras' do.
- Adam: m <- m + (g - m)(1 - beta1); v <- v + (g^2 - v)(1 - beta2);
  w <- w - (m * eta sqrt(1 - beta2^t) / (1 - beta1^t)) / (sqrt(v) + epsilon)  ("epsilon
  hat"), with the optimizer's declared beta_1, beta_2, epsilon (Keras': 0.9, 0.999, 1e-7).
- Hyperparameters pass through `keras_float` where Keras casts them: `ops.cast(x, dtype)`
  of a Python float, and an initializer's constant (`initializers.Constant(0.1)`, Adagrad's
  initial_accumulator_value), make a float32 tensor first, so 0.1 starts as 0.10000000149
  even in float64. Keras' Python arithmetic on the same attribute does not cast
  (`1 - self.beta_1`, `+ self.epsilon`: exact in float64), so each use follows the Keras
  line it reproduces: momentum, weight decay, the L2 coefficient and the betas of Adam's
  bias-correction powers are cast; a slot's or run scalar's initial value always is
  (`_add_slot`, `_add_run_scalar`). In float32 that is what happens anyway; in float64
  it keeps us equal to Keras-float64 (tests/test_optimizer_registry.py,
  tests/test_keras_networks.py).
- State is of two kinds, both with the leading run dimension, so packing, compaction
  (`run_rows`), checkpoints and the CUDA-graph check (`state_tensors`) handle every
  optimizer alike: per-parameter slots (Adam's m and v) and per-run scalars, one value per
  run (Nadam's running product of momentum-decay factors). An optimizer keeps no other
  state between steps: a plain attribute would not follow a compaction, a resume or a
  graph's capture check (tests/test_optimizer_registry.py checks all three).
- Two hooks say what differs from that: `decoupled_decays()` (the Keras-style decay
  groups; [] for a method that decays inside its update) and `evaluation_parameters()`
  (the weights the method is evaluated at, out of place; Schedule-Free AdamW's x).
- The kernel L2 penalty is the training loop's job (added to the loss, so its gradient is
  coupled through momentum and Adam), not the optimizer's.

`step(lr)` never synchronises with the host: the step counter and all state live on the
parameters' device (build the optimizer after moving the model), and lr may be a Python
float or a 0-d tensor; for CUDA-graph capture pass a 0-d tensor on that device, updated in
place, so the captured step reads the current rate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from initmem.errors import InputError

LR = float | Tensor


def keras_float(x: float) -> float:
    """A Python-float hyperparameter as Keras' TensorFlow backend casts it to a variable's
    dtype: through a float32 tensor (0.9 becomes 0.89999997615814209 even in float64)."""
    return float(np.float32(x))


@dataclass(frozen=True)
class AdamMath:
    """The hyperparameters of Keras' Adam math (Keras' names; their defaults are the
    optimizer's DECLARATION's)."""

    beta_1: float
    beta_2: float
    epsilon: float


class Optimizer(ABC):
    """Named parameters, per-parameter slots, per-run scalars and an update counter, all on
    the parameters' device."""

    def __init__(self, named_params: Iterable[tuple[str, nn.Parameter]], weight_decay: float):
        self.params = {name: p for name, p in named_params if p.requires_grad}
        if not self.params:
            raise ValueError("no trainable parameters to optimise")
        self.weight_decay = keras_float(weight_decay)
        device = next(iter(self.params.values())).device
        self.iterations = torch.zeros((), dtype=torch.int64, device=device)
        self.slots: dict[str, Tensor] = {}  # "<param name>:<slot>" -> state tensor
        self.run_scalars: dict[str, Tensor] = {}  # name -> (N,) tensor, one value per run

    def _add_slot(self, slot: str, names: Iterable[str], initial: float = 0.0, *,
                  from_parameters: bool = False) -> None:
        """A state tensor per named parameter, filled as Keras' Constant(initial) fills it,
        or, `from_parameters`, a copy of the parameter as built (Schedule-Free's z: build
        the optimizer after initialising the network, as the trainer does)."""
        for name in names:
            p = self.params[name]
            self.slots[f"{name}:{slot}"] = (p.detach().clone() if from_parameters
                                            else torch.full_like(p, keras_float(initial)))

    def _add_run_scalar(self, name: str, initial: float) -> None:
        """One value per run, in the parameters' dtype (as Keras' optimizer variable of the
        first variable's dtype), starting at keras_float(initial)."""
        first = next(iter(self.params.values()))
        self.run_scalars[name] = torch.full(first.shape[:1], keras_float(initial),
                                            dtype=first.dtype, device=first.device)

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
        for names, decay in self.decoupled_decays():
            live = self._live(names)
            if decay and live:
                w = self._tensors(live)[0]
                torch._foreach_sub_(w, torch._foreach_mul(w, lr * decay))
        self._update(lr)
        self.iterations += 1

    def decoupled_decays(self) -> list[tuple[list[str], float]]:
        """Hook: the (parameter names, decay) groups decayed Keras' way before each update,
        w <- w - w lambda eta; by default one group, every parameter at weight_decay (Keras'
        base). Muon returns one per path; an optimizer whose method decays inside its own
        update (Schedule-Free AdamW) returns []."""
        return [(list(self.params), self.weight_decay)]

    def evaluation_parameters(self) -> dict[str, Tensor]:
        """Hook: the weights the method is evaluated at, by parameter name, computed out of
        place (training state untouched, so a resume stays bitwise); {} (the default): the
        parameters themselves. Every evaluation of the trainer (validation, test, tau_best,
        early stopping, ||W||_F, the best, final and saved weights) reads these, with
        BatchNorm statistics re-estimated at them (trainer.evaluation_state)."""
        return {}

    @abstractmethod
    def _update(self, lr: LR) -> None:
        """The optimizer's own update of every live parameter (after the decay)."""

    def _adam(self, names: Iterable[str], lr: LR, adam: AdamMath) -> None:
        names = self._live(names)
        if not names:
            return
        w, g, m, v = self._tensors(names, "m", "v")
        t = (self.iterations + 1).to(w[0].dtype)
        alpha = lr * (torch.sqrt(1 - torch.pow(keras_float(adam.beta_2), t))
                      / (1 - torch.pow(keras_float(adam.beta_1), t)))
        torch._foreach_lerp_(m, g, 1 - adam.beta_1)  # m + (g - m)(1 - beta1), as Keras
        torch._foreach_lerp_(v, torch._foreach_mul(g, g), 1 - adam.beta_2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, adam.epsilon)
        step = torch._foreach_mul(m, alpha)
        torch._foreach_div_(step, denom)
        torch._foreach_sub_(w, step)

    def _per_run(self) -> dict[str, dict[str, Tensor]]:
        """The state with a leading run dimension, by kind (as state_dict names them)."""
        return {"slots": self.slots, "run_scalars": self.run_scalars}

    def state_tensors(self) -> list[Tensor]:
        """Every tensor a step changes besides the parameters (the CUDA-graph check saves
        and restores them)."""
        return [*(t for kind in self._per_run().values() for t in kind.values()),
                self.iterations]

    def state_dict(self) -> dict[str, object]:
        """Everything a bitwise resume needs: the counter, every slot and run scalar (copies)."""
        return {"iterations": self.iterations.clone(),
                **{kind: {key: t.clone() for key, t in tensors.items()}
                   for kind, tensors in self._per_run().items()}}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Copy a state_dict in place (tensors keep their storage, e.g. for CUDA graphs).
        A state saved before run scalars existed has none, which fits an optimizer without."""
        for kind, own in self._per_run().items():
            saved = state.get(kind, {})
            if set(saved) != set(own):
                raise InputError(f"optimizer state has {kind} {sorted(saved)}; this "
                                 f"optimizer needs exactly {sorted(own)}")
            for key, t in saved.items():
                if t.shape != own[key].shape:
                    raise InputError(f"optimizer {kind} {key} has shape {tuple(t.shape)}; "
                                     f"expected {tuple(own[key].shape)}")
                own[key].copy_(t)
        self.iterations.copy_(state["iterations"])


def run_rows(state: dict[str, object], rows: list[int]) -> dict[str, object]:
    """A state_dict cut to the pack's `rows` (a compaction): every slot and run scalar
    sliced along its run dimension; the counter, shared by the pack, as it is."""
    return {key: ({name: t[rows] for name, t in value.items()}
                  if isinstance(value, dict) else value) for key, value in state.items()}
