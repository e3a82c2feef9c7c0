"""The training step, and the executor that runs it eagerly or as a CUDA graph.

`train_step` is one update of every run of a pack. `StepExecutor` is how the training loop
calls it. With `cuda_graph`, full batches' inputs are copied into fixed buffers and the
whole update (batch, forward, backward, optimizer) replays as one CUDA graph: one launch
instead of the hundreds of small kernels of a small ResNet's update at b = 16. A graph
replays the kernels it recorded, on the same data, so it computes what the eager step
computes; the executor checks that when it captures (`_capture_verified`) and falls back
to eager steps, with a warning, if it does not hold.

The step's inputs are the batch's slots of the epoch's order and its augmentation draws
(both drawn per epoch, data.py); `batch` gathers the images, converts and augments them,
all inside the graph, so a replayed update launches nothing but the input copies.

The capture follows torch.cuda.graphs' whole-network recipe:
- the first WARMUP_STEPS full batches run eagerly on a side stream, the one the capture
  then records on (cuDNN and cuBLAS set up their handles and workspaces there, outside
  capture). They are real updates: nothing is rolled back;
- gradients are created inside the graph (set to None before capture), so replays write
  them to the graph's own memory;
- the rate is a 0-d device tensor filled before each step, and the optimizer's counter
  lives on the device (initmem.training.optimizers), so a replay reads the current eta_k and t;
- a batch of another shape (the epoch's last partial batch, n_train % b images) runs
  eagerly on the same parameters and optimizer state;
- the returned loss and hit counts are the graph's output tensors, overwritten by the next
  replay: the caller consumes them at once (the training loop adds them to its sums).
The runs' generators are drawn from at epoch start, outside the graph, so the random
streams are the eager path's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from initmem.training.models import PackedNet
from initmem.training.optimizers import LR, Optimizer, keras_float

log = logging.getLogger("initmem.train")
WARMUP_STEPS = 3
# Replay vs eager after one update: equal bitwise with deterministic kernels; the margin
# admits the last-bit noise of non-deterministic ones (--nondeterministic).
VERIFY_RTOL, VERIFY_ATOL = 1e-5, 1e-7


def train_step(model: PackedNet, optimizer: Optimizer, x: Tensor, y: Tensor, lr: LR,
               l2: float) -> tuple[Tensor, Tensor]:
    """One update of every run. x: (N, B, 3, H, W), y: (N, B). Returns the per-run loss
    (Keras' logged loss: mean cross-entropy + the L2 penalty) and correct counts."""
    logits = model(x)
    loss = cross_entropy(logits, y) + l2_penalty(model, l2)
    model.zero_grad(set_to_none=True)
    loss.sum().backward()  # runs share no parameters: each gets its own loss's gradient
    optimizer.step(lr)
    return loss.detach(), (logits.detach().argmax(-1) == y).sum(1)


def cross_entropy(logits: Tensor, y: Tensor) -> Tensor:
    """Mean cross-entropy per run: logits (N, B, 10), y (N, B) -> (N,)."""
    n, b = y.shape
    return F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(n, b).mean(1)


def l2_penalty(model: PackedNet, l2: float,
               tensors: dict[str, Tensor] | None = None) -> Tensor | float:
    """Keras L2(l) on kernels: l * sum(W^2) per run (so its gradient 2 l W is coupled),
    with l cast as Keras casts it; of `tensors` (the network's state by name) if given."""
    return keras_float(l2) * model.kernel_sq_norm(tensors) if l2 else 0.0


Batch = Callable[..., tuple[Tensor, Tensor]]  # the step's inputs -> (x, y)


class StepExecutor:
    """Calls train_step for the training loop: eagerly, or replayed as a CUDA graph for
    batches of the full shape (n_runs, b). A step's inputs are what `batch` turns into
    (x, y): the slots of the epoch's order and their augmentation draws, so gathering,
    conversion and augmentation are inside the graph too. Either way the rate is a device
    tensor, so the two paths do the same arithmetic."""

    def __init__(self, model: PackedNet, optimizer: Optimizer, l2: float, b: int,
                 batch: Batch, cuda_graph: bool = False):
        """Steps of `model` by `optimizer`, kernel L2 `l2`, batch size b, inputs from `batch`."""
        self.model, self.optimizer, self.l2, self.batch = model, optimizer, l2, batch
        self.lr = torch.zeros((), device=next(model.parameters()).device)
        self.full_shape = (model.n, b)
        self.cuda_graph = cuda_graph  # asked for (needs the model on a CUDA device)
        self.warmup_left = WARMUP_STEPS
        self.graph: torch.cuda.CUDAGraph | None = None
        self.stream: torch.cuda.Stream | None = None  # of the warm-up and the capture
        self.inputs: list[Tensor] = []  # the graph's input buffers
        self.outputs: tuple[Tensor, Tensor] | None = None  # the graph's loss and hits
        self.verify_diff: float | None = None  # replay vs eager after the capture's update
        self.dropped: str | None = None  # why the graph was given up, if it was

    def __call__(self, lr: float, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        """One update at rate lr on the batch of `inputs` (the first one (N, B, ...))."""
        self.lr.fill_(lr)
        if (not self.cuda_graph or self.dropped
                or tuple(inputs[0].shape[:2]) != self.full_shape):
            return self._eager(*inputs)
        if self.graph is not None:
            _copy(self.inputs, inputs)
            self._replay()
            return self.outputs
        if self.warmup_left:
            self.warmup_left -= 1
            return self._warmup(*inputs)
        self.inputs = _clones(inputs)
        return self._capture_verified()

    def describe(self) -> str:
        """How the steps ran, as the records note it."""
        layout = "channels_last" if self.model.channels_last else "contiguous"
        if not self.cuda_graph:
            return f"eager step, {layout}"
        if self.dropped:
            return f"eager step (CUDA graph dropped: {self.dropped}), {layout}"
        checked = ("" if self.verify_diff is None
                   else f", replay vs eager max |diff| {self.verify_diff:.3g}")
        return f"CUDA-graph step{checked}, {layout}"

    def _eager(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        x, y = self.batch(*inputs)
        return train_step(self.model, self.optimizer, x, y, self.lr, self.l2)

    def _warmup(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            out = self._eager(*inputs)
        torch.cuda.current_stream().wait_stream(self.stream)
        return out

    def _capture(self) -> None:
        """Record one update on the input buffers (recording runs no kernel), on the
        warm-up's stream, where cuBLAS and cuDNN already hold their handles."""
        self.model.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            self.outputs = self._eager(*self.inputs)

    def _replay(self) -> None:
        self.graph.replay()

    def _capture_verified(self) -> tuple[Tensor, Tensor]:
        """Capture, then check the capture's first update against an eager update of the
        same batch from the same state; keep the graph only if they agree."""
        before = _clones(self._state())
        eager_out = _clones(self._eager(*self.inputs))
        eager_state = _clones(self._state())
        _copy(self._state(), before)
        try:
            self._capture()
            self._replay()
        except RuntimeError as err:  # an op that cannot be captured: keep the eager update
            return self._drop(f"capture failed: {err}", eager_state, eager_out)
        self.verify_diff, agree = agreement([*eager_state, *eager_out],
                                            [*self._state(), *self.outputs])
        if not agree:
            return self._drop(f"replay differed from eager by {self.verify_diff:.3g}",
                              eager_state, eager_out)
        log.info("CUDA graph captured; replay vs eager max |diff| %.3g", self.verify_diff)
        return self.outputs

    def _drop(self, reason: str, eager_state: list[Tensor],
              eager_out: list[Tensor]) -> tuple[Tensor, Tensor]:
        """Give up the graph, keeping the eager update of the capture's batch."""
        log.warning("CUDA graph dropped (%s); eager steps from now on", reason)
        self.graph, self.dropped = None, reason
        _copy(self._state(), eager_state)
        return tuple(eager_out)

    def _state(self) -> list[Tensor]:
        """Every tensor an update changes: parameters, BN statistics, optimizer state."""
        return [*self.model.state_dict().values(), *self.optimizer.state_tensors()]


def _clones(tensors: Sequence[Tensor]) -> list[Tensor]:
    return [t.detach().clone() for t in tensors]


@torch.no_grad()
def _copy(targets: Sequence[Tensor], sources: Sequence[Tensor]) -> None:
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)


def agreement(expected: list[Tensor], got: list[Tensor]) -> tuple[float, bool]:
    """Largest |difference| and whether every pair is close (VERIFY_RTOL, VERIFY_ATOL).
    NaN matches NaN and inf the same inf: a run of the pack that has already diverged
    must not cost the others the graph."""
    largest, agree = 0.0, True
    for a, b in zip(expected, got, strict=True):
        a, b = a.double(), b.double()
        same = (a == b) | (a.isnan() & b.isnan())
        diff = torch.where(same, 0.0, (a - b).abs().nan_to_num(math.inf))
        largest = max(largest, diff.max().item() if diff.numel() else 0.0)
        agree = agree and torch.allclose(a, b, VERIFY_RTOL, VERIFY_ATOL, equal_nan=True)
    return largest, agree
