"""Train one pack: N runs of one recipe, each with its own sigma_w and seed, at once.

Per epoch and run it logs what Keras' `fit` logs (training metrics as running means in
training mode; validation and test in inference mode), ||W||_F, how far BatchNorm's
moving variances are from the batch's (models.bn_variance_ratio: is inference mode a
valid evaluation yet?), the rate and the clocks T_SGD, T_L2, T_adapt. Metrics accumulate
on the device and are read once per epoch. Everything evaluated (validation, test,
||W||_F, tau_best's weights, early stopping, the final and saved weights) is read at the
weights the optimizer declares it is evaluated at (evaluation_state; its parameters
unless it declares others, as Schedule-Free AdamW does).
A run whose loss turns non-finite is recorded as diverged and stops; a run that early-stops
stops; its records are written at once. The other runs go on.

Compaction (on unless turned off): at the end of an epoch in which runs stopped, they leave
the pack. Their final weights are set aside (kept in the checkpoint, so --keep-checkpoint
keeps them); the runs still training are sliced out of every packed tensor (parameters,
BatchNorm statistics, optimizer slots and run scalars, accumulators, generators) into a
pack of their size, whose step (and CUDA graph) is built anew. Every computation of a run depends on
its own slice only, so the records are those of the uncompacted pack (tests/test_train.py).
"""

from __future__ import annotations

import logging
import math
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.func import functional_call

from initmem.plan.schedule import learning_rate
from initmem.plan.spec import Pack, Run
from initmem.records import cluster
from initmem.records.files import history_frame, summary_record, write_records
from initmem.training import checkpoint, data
from initmem.training.models import (
    PackedNet,
    batchnorm_statistics,
    bn_variance_ratio,
    build_model,
)
from initmem.training.optimizers import Optimizer, build_optimizer, run_rows
from initmem.training.step import StepExecutor, cross_entropy, l2_penalty

log = logging.getLogger("initmem.train")
# Images per inference batch. On CPU each run is evaluated alone (grouped convolutions
# ran inference 2-3x slower per run than N single convolutions, and batches of ~128 fit
# the caches best); on a GPU the pack is evaluated at once.
EVAL_BATCH = {"cpu": 128, "cuda": 1000}
# What a checkpoint holds: tensors, numbers and the pack's spec as plain data, never an
# initmem class (a pickled class ties a checkpoint to a module path). Bump on any change.
# 5: the last batch's BatchNorm variances (an epoch resumed after its last update records
# its bn_var_ratio from them). 6: each run's weights at tau_best (Recipe.best_test_subset).
# 7: the pack's evaluation state at the last epoch's end (LoopState.evaluated).
CHECKPOINT_FORMAT = 7
HISTORY_ROW_JSON = 2048  # bytes of one run's epoch in a checkpoint's JSON: about 700
# Training images (in index order, unaugmented, in batches of b) over which BatchNorm's
# statistics are re-estimated at an optimizer's evaluation weights (evaluation_state).
BN_IMAGES = 2048


@torch.no_grad()
def evaluate(model: PackedNet, x: Tensor, y: Tensor, l2: float,
             single: PackedNet | None = None,
             state: dict[str, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """Per-run loss (+ L2 penalty, as Keras' val_loss) and accuracy in inference mode, of
    the network at `state` (its parameters and buffers by name: evaluation_state) or, None,
    as it is. With `single` (the architecture built for one run) each run is evaluated
    alone through it, with the pack's parameters and moving statistics: the CPU's faster
    path."""
    model.eval()
    loss_sum = torch.zeros(model.n, device=x.device)
    correct = torch.zeros(model.n, device=x.device)
    if single is not None and model.n > 1:
        forward = _run_by_run(model, single, state)
    elif state is not None:
        forward = lambda xb: functional_call(model, state, (xb,))  # noqa: E731
    else:
        forward = model
    batch = EVAL_BATCH[x.device.type]
    for start in range(0, len(x), batch):
        xb = data.as_float(x[start:start + batch])
        yb = y[start:start + batch].expand(model.n, -1)
        logits = forward(xb)
        loss_sum += cross_entropy(logits, yb) * len(xb)
        correct += (logits.argmax(-1) == yb).sum(1)
    model.train()
    return loss_sum / len(x) + l2_penalty(model, l2, state), correct / len(x)


def _run_by_run(model: PackedNet, single: PackedNet,
                state: dict[str, Tensor] | None = None) -> Callable[[Tensor], Tensor]:
    """x -> (N, B, 10) logits, each run's through `single` with its slice of the pack's
    parameters and buffers (of `state`, if given)."""
    tensors = state or {**dict(model.named_parameters()), **dict(model.named_buffers())}
    slices = [{name: t[i:i + 1] for name, t in tensors.items()} for i in range(model.n)]
    single.eval()
    single.channels_last = model.channels_last
    return lambda x: torch.cat([functional_call(single, s, (x,)) for s in slices])


@torch.no_grad()
def evaluation_state(model: PackedNet, optimizer: Optimizer, train_x: Tensor,
                     b: int) -> dict[str, Tensor] | None:
    """The pack's state (parameters and persistent buffers, by name) at which its runs are
    evaluated; None where the optimizer declares no evaluation weights (the model as it
    is). Otherwise copies: the optimizer's evaluation parameters, the others as they are,
    and BatchNorm's moving statistics re-estimated at them (models.batchnorm_statistics:
    training mode's per-batch statistics, averaged) over the first BN_IMAGES training
    images (whole batches of b, at least one; index order, unaugmented, shared by the
    runs). Nothing of the training state changes, so a resume stays bitwise."""
    evaluated = optimizer.evaluation_parameters()
    if not evaluated:
        return None
    state = {name: t.detach().clone() for name, t in model.state_dict().items()}
    state.update(evaluated)
    count = b * min(max(1, BN_IMAGES // b), len(train_x) // b)
    batches = [data.as_float(train_x[i:i + b]) for i in range(0, count, b)]
    state.update(batchnorm_statistics(model, state, batches))
    return state


METRICS = ("train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc",
           "kernel_fro_norm", "bn_var_ratio")


@dataclass
class RunState:
    """What the loop tracks for one run of the pack."""

    run: Run
    patience: int | None
    history: list[dict[str, Any]] = field(default_factory=list)
    best_val_loss: float = math.inf
    wait: int = 0  # epochs without a new best val loss (Keras EarlyStopping)
    diverged_epoch: int | None = None
    early_stopped: bool = False
    written: bool = False  # records on disk

    def is_best(self, epoch: int) -> bool:
        """Whether `epoch`, just recorded, is the run's tau_best so far (its lowest val
        loss: records.files.epoch_outcomes' rule)."""
        return self.wait == 0 and bool(self.history) and self.history[-1]["epoch"] == epoch

    @property
    def active(self) -> bool:
        """Whether the run still trains: neither diverged nor early-stopped."""
        return self.diverged_epoch is None and not self.early_stopped

    def record(self, epoch: int, metrics: dict[str, float]) -> None:
        """Log one epoch; decide divergence and early stopping as Keras would."""
        if not all(math.isfinite(metrics[m]) for m in ("train_loss", "val_loss")):
            self.diverged_epoch = epoch
            return
        self.history.append({"run_id": self.run.run_id, "epoch": epoch, **metrics})
        if metrics["val_loss"] < self.best_val_loss:
            self.best_val_loss, self.wait = metrics["val_loss"], 0
        else:
            self.wait += 1
            self.early_stopped = self.patience is not None and self.wait >= self.patience


@dataclass
class Clocks:
    """T_SGD = (1/b) sum eta_k^2, T_L2 = lambda sum eta_k, T_adapt = sum eta_k."""

    T_SGD: float = 0.0
    T_L2: float = 0.0
    T_adapt: float = 0.0

    def tick(self, lr: float, b: int, lam: float) -> None:
        """Advance the clocks by one update at rate lr, batch size b and kernel shrinkage lam."""
        self.T_SGD += lr * lr / b
        self.T_L2 += lam * lr
        self.T_adapt += lr


@dataclass
class LoopState:
    """Where the loop stands and what it has measured: everything a checkpoint restores
    besides the network, the optimizer and the random streams, saved and restored as a
    whole (a new field is checkpointed by being declared here)."""

    states: list[RunState]  # one per run of the pack
    members: list[int]  # the model's rows, as indices of runs
    kernel_fro_norm_init: list[float]
    loss_sum: Tensor  # this epoch's running training loss and hits, per member
    correct: Tensor
    clocks: Clocks = field(default_factory=Clocks)
    k: int = 0  # updates done
    epoch: int = 1  # the epoch under way
    step: int = 0  # updates done in it
    order: Tensor | None = None  # this epoch's example order, (N, n_train)
    augmentations: Tensor | None = None  # its flips and crops, (N, n_train, 3)
    elapsed_s: float = 0.0
    run_updates: int = 0  # updates computed, summed over the runs in the pack at each
    departed: dict[int, dict[str, Tensor]] = field(default_factory=dict)  # final weights of
    # the runs that left the pack; and each run's weights at tau_best so far (for the test
    # of Recipe.best_test_subset)
    best_weights: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    # the pack's evaluation state at the last epoch's end (evaluation_state; None: the
    # optimizer declares no evaluation weights, so the weights are the model's own)
    evaluated: dict[str, Tensor] | None = None

    def updated(self, loss: Tensor, hits: Tensor, images: int, runs: int) -> None:
        """One update's bookkeeping: the running loss and hits of its `images` per run,
        the counters (`runs` runs computed it)."""
        self.loss_sum.add_(loss, alpha=images)
        self.correct += hits
        self.k, self.step, self.run_updates = self.k + 1, self.step + 1, self.run_updates + runs

    def next_epoch(self) -> None:
        """Begin the next epoch: no update done in it, its order and augmentations still to draw."""
        self.epoch, self.step, self.order, self.augmentations = self.epoch + 1, 0, None, None
        self.loss_sum.zero_()
        self.correct.zero_()

    def saved(self) -> dict[str, Any]:
        """As plain data (no initmem class: a checkpoint outlives module paths)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["states"] = [{k: v for k, v in vars(s).items() if k != "run"} for s in self.states]
        out["clocks"] = vars(self.clocks)
        return out

    def restore(self, saved: dict[str, Any], device: torch.device) -> None:
        """Take back what `saved` holds, in place, its tensors onto `device`."""
        for f in fields(self):
            value = saved[f.name]
            if f.name == "states":
                for state, kept in zip(self.states, value, strict=True):
                    vars(state).update(kept)
            elif f.name == "clocks":
                self.clocks = Clocks(**value)
            else:
                setattr(self, f.name, value.to(device) if isinstance(value, Tensor) else value)


@dataclass
class TrainedPack:
    """What training a pack yields: the runs' summaries, the model, every run's final weights
    and the run-updates computed."""
    summaries: list[dict[str, Any]]
    model: PackedNet  # the runs still in the pack at the end (all of them without compaction)
    weights: list[dict[str, Tensor]]  # every run's final parameters and buffers, pack order
    run_updates: int  # updates computed, summed over the runs in the pack at each update


class Preempted(Exception):
    """Training stopped on request (SIGTERM, SIGUSR1, SIGINT) after writing a checkpoint."""


class Observer(Protocol):
    """Watches training without changing it (heartbeats, TensorBoard)."""

    def updated(self, epoch: int, k: int) -> None:
        """After update k, in epoch `epoch` (called often: must be cheap)."""

    def epoch_ended(self, epoch: int, rows: list[dict[str, Any]]) -> None:
        """The epoch's history rows of the runs that trained it (records.files columns)."""


class PackTrainer:
    """Trains one pack; with a checkpoint folder it saves its whole state at the end of
    every epoch and every `checkpoint_every_s` seconds, and resumes from it bitwise."""

    def __init__(  # noqa: PLR0913 (the trainer's settings, each with its default)
            self, pack: Pack, splits: data.Splits, out_dir: Path, device: torch.device,
            checkpoint_dir: Path | None = None, checkpoint_every_s: float = 600.0,
            progress: bool = True, cuda_graph: bool = False, channels_last: bool = False,
            compaction: bool = True, observers: Sequence[Observer] = (),
            trust_checkpoint: bool = False, guard: Callable[[], None] = lambda: None):
        """Ready `pack` to train on `splits` into out_dir, restored from its checkpoint if any."""
        recipe, runs = pack.recipe, pack.runs
        if len(splits.train_x) != recipe.n_train:
            raise ValueError(f"the data has {len(splits.train_x)} training images but the "
                             f"recipe counts {recipe.n_train} (train_subset="
                             f"{recipe.train_subset}); K and the clocks would be wrong")
        self.pack, self.splits, self.out_dir, self.device = pack, splits, out_dir, device
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every_s, self.progress = checkpoint_every_s, progress
        self.cuda_graph, self.channels_last, self.compaction = cuda_graph, channels_last, compaction
        self.observers, self.trust_checkpoint = observers, trust_checkpoint
        self.guard = guard  # called before every write: raises when the pack is not ours
        self._build(len(runs), runs)
        # on CPU, evaluation runs the pack run by run through one single-run network
        self.single = build_model(recipe, 1).to(device) if device.type == "cpu" else None
        self.generators = [data.run_generators(r.seed, device) for r in runs]
        self.order_gens = [g["order"] for g in self.generators]
        self.augment_gens = [g["augment"] for g in self.generators]
        self.loop = LoopState(
            states=[RunState(r, recipe.patience) for r in runs],
            members=list(range(len(runs))),
            kernel_fro_norm_init=self.model.kernel_fro_norm().tolist(),
            loss_sum=torch.zeros(len(runs), device=device),
            correct=torch.zeros(len(runs), device=device))
        self.stop_requested = False  # set by a signal handler
        self.summaries: list[dict[str, Any]] = []
        self.resumed_from_epoch: int | None = None  # the loop's epoch at a resume
        if checkpoint_dir is not None:
            self._resume()

    def run(self) -> TrainedPack:
        """Train the pack until its last epoch or until every run has stopped, checkpointing as it
        goes; each run's records written. Preempted on a stop request, after a checkpoint."""
        recipe, loop = self.pack.recipe, self.loop
        started, last_save = time.monotonic() - loop.elapsed_s, time.monotonic()
        bar = _progress_bar(recipe.epochs * recipe.steps_per_epoch, self.progress,
                            initial=loop.k)
        lam = recipe.shrinkage
        while loop.epoch <= recipe.epochs and any(s.active for s in loop.states):
            epoch_start = time.monotonic()
            if loop.order is None:
                self._draw_epoch()
            first = loop.step * recipe.b
            plans = [p[:, first:] for p in (loop.order, loop.augmentations) if p is not None]
            for inputs in data.minibatches(recipe.b, *plans):
                lr = learning_rate(recipe, loop.k)
                loss, hits = self.train_step(lr, *inputs)
                loop.updated(loss, hits, inputs[0].shape[1], self.model.n)
                loop.clocks.tick(lr, recipe.b, lam)
                bar.update(1)
                for observer in self.observers:
                    observer.updated(loop.epoch, loop.k)
                if self.stop_requested or time.monotonic() - last_save > self.checkpoint_every_s:
                    loop.elapsed_s = time.monotonic() - started
                    self._save()
                    last_save = time.monotonic()
                    if self.stop_requested:
                        raise Preempted(f"stopped at update {loop.k}, checkpoint written")
            rows = self._end_epoch(started)
            images_per_s = len(rows) * recipe.n_train / (time.monotonic() - epoch_start)
            if self.compaction:
                self._compact()
            bar.set_postfix(epoch=loop.epoch - 1, loss=f"{rows[0][0]:.3f}",
                            acc=f"{rows[0][1]:.3f}", img_s=f"{images_per_s:.0f}")
            loop.elapsed_s = time.monotonic() - started
            self._save()
            last_save = time.monotonic()
        bar.close()
        for state in loop.states:
            if not state.written:
                self._finish(state)
        return TrainedPack(self.summaries, self.model, self.run_weights(), loop.run_updates)

    def _build(self, n: int, runs: Sequence[Run] = ()) -> None:
        """A pack of n runs, its optimizer and its step. With `runs` the parameters are
        drawn as theirs before the optimizer is built (a slot may start at them:
        Schedule-Free's z); without, the caller fills parameters and optimizer state."""
        recipe = self.pack.recipe
        self.model = build_model(recipe, n).to(self.device).train()
        self.model.channels_last = self.channels_last
        if runs:
            self.model.init_([r.sigma_w for r in runs],
                             [data.run_generators(r.seed, "cpu")["init"] for r in runs])
        self.optimizer = build_optimizer(recipe, self.model)
        self.train_step = StepExecutor(self.model, self.optimizer, recipe.l2, recipe.b,
                                       self._batch, cuda_graph=self.cuda_graph)

    def _compact(self) -> None:
        """The runs that stopped leave the pack, their final weights set aside; the others
        go on as a pack of their size with their own slices of every tensor."""
        loop = self.loop
        rows = [i for i, m in enumerate(loop.members) if loop.states[m].active]
        if len(rows) == len(loop.members) or not rows or loop.epoch > self.pack.recipe.epochs:
            return  # nobody left, or nobody goes on: the loop ends
        weights = self.model.state_dict()
        for i, m in enumerate(loop.members):
            if i not in rows:
                loop.departed[m] = {name: t[i:i + 1].detach().cpu().clone()
                                    for name, t in (loop.evaluated or weights).items()}
        if loop.evaluated is not None:
            loop.evaluated = _rows(loop.evaluated, rows)
        optimizer = run_rows(self.optimizer.state_dict(), rows)
        log.info("epoch %d: %d run(s) stopped and leave the pack; %d go on",
                 loop.epoch - 1, len(loop.members) - len(rows), len(rows))
        self._keep([loop.members[i] for i in rows])
        self.model.load_state_dict(_rows(weights, rows))
        self.optimizer.load_state_dict(optimizer)
        loop.loss_sum, loop.correct = loop.loss_sum[rows], loop.correct[rows]

    def _keep(self, members: list[int]) -> None:
        """The pack of these runs (indices into pack.runs), with their generators; a new
        model when its size changes (the caller fills its parameters and optimizer state)."""
        self.loop.members = list(members)
        self.order_gens = [self.generators[m]["order"] for m in members]
        self.augment_gens = [self.generators[m]["augment"] for m in members]
        if self.model.n != len(members):
            self._build(len(members))

    def run_weights(self) -> list[dict[str, Tensor]]:
        """Every run's parameters and buffers as evaluated at the last epoch's end (one-run
        slices), in pack order."""
        return run_weights(self.loop.evaluated or self.model.state_dict(), self.loop.members,
                           self.loop.departed)

    def _batch(self, idx: Tensor, draws: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Images and labels of a batch's slots (N, B), augmented by their draws if any."""
        x = data.as_float(self.splits.train_x[idx])
        return (x if draws is None else data.augment(x, draws)), self.splits.train_y[idx]

    def _draw_epoch(self) -> None:
        """The epoch's example order and, with augmentation, its flips and crops."""
        recipe, loop = self.pack.recipe, self.loop
        loop.order = data.epoch_permutations(recipe.n_train, self.order_gens)
        if recipe.augment:
            loop.augmentations = data.epoch_augmentations(recipe.n_train, self.augment_gens)

    def _end_epoch(self, started: float) -> list[list[float]]:
        recipe, splits, loop = self.pack.recipe, self.splits, self.loop
        loop.evaluated = evaluated = evaluation_state(self.model, self.optimizer,
                                                      splits.train_x, recipe.b)
        val = evaluate(self.model, splits.val_x, splits.val_y, recipe.l2, self.single,
                       evaluated)
        test = evaluate(self.model, splits.test_x, splits.test_y, recipe.l2, self.single,
                        evaluated)
        columns = torch.stack([loop.loss_sum / recipe.n_train, loop.correct / recipe.n_train,
                               *val, *test, self.model.kernel_fro_norm(evaluated).detach(),
                               bn_variance_ratio(self.model)])
        rows = columns.T.tolist()  # the epoch's one host synchronisation
        lr = learning_rate(recipe, loop.k - 1)
        logged = []
        for i, (m, row) in enumerate(zip(loop.members, rows, strict=True)):
            state = loop.states[m]
            if state.active:
                state.record(loop.epoch, {**dict(zip(METRICS, row, strict=True)), "lr": lr,
                                          **vars(loop.clocks)})
                if recipe.best_test_subset and state.is_best(loop.epoch):
                    loop.best_weights[m] = {
                        name: t[i:i + 1].detach().clone()
                        for name, t in (evaluated or self.model.state_dict()).items()}
                logged += state.history[-1:] if state.diverged_epoch is None else []
                if not state.active:
                    loop.elapsed_s = time.monotonic() - started
                    self._finish(state)
        for observer in self.observers:
            observer.epoch_ended(loop.epoch, logged)
        loop.next_epoch()
        return rows

    def _finish(self, state: RunState) -> None:
        i = self.loop.states.index(state)
        history = history_frame(state.history)
        summary = summary_record(state.run, history,
                                 test_acc_best=self._best_test_accuracy(i),
                                 kernel_fro_norm_init=self.loop.kernel_fro_norm_init[i],
                                 diverged_epoch=state.diverged_epoch,
                                 early_stopped=state.early_stopped,
                                 wall_time_s=self.loop.elapsed_s, device=str(self.device),
                                 determinism=f"{determinism_settings(self.device)}; "
                                             f"{self.train_step.describe()}",
                                 torch_version=torch.__version__,
                                 data_verification=self.splits.verification,
                                 host=socket.gethostname(), slurm_job_id=cluster.job_id(),
                                 resumed_from_epoch=self.resumed_from_epoch)
        self.guard()
        if not write_records(self.out_dir / state.run.run_dir, history, summary, replace=False):
            log.warning("%s: its records were written by another trainer meanwhile; kept as "
                        "they are", state.run.run_id)
        state.written = True
        self.summaries.append(summary)

    def _best_test_accuracy(self, run: int) -> float | None:
        """Recipe.best_test_subset: the run's weights at tau_best on that many test images
        (NaN for a run that never logged an epoch); None: the per-epoch test set's."""
        if not self.pack.recipe.best_test_subset:
            return None
        if run not in self.loop.best_weights:
            return math.nan
        net = build_model(self.pack.recipe, 1).to(self.device)
        net.channels_last = self.channels_last
        net.load_state_dict(self.loop.best_weights.pop(run))  # tested once: memory goes back
        _, accuracy = evaluate(net, self.splits.best_test_x, self.splits.best_test_y, 0.0)
        return float(accuracy[0])

    def _checkpoint_state(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT, "pack": self.pack.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "order_gens": [g.get_state() for g in self.order_gens],
            "augment_gens": [g.get_state() for g in self.augment_gens],
            "batch_variances": _batch_variances(self.model),
            **self.loop.saved(),
        }

    def checkpoint_limit(self) -> int:
        """The most bytes a checkpoint of this pack takes (a larger file is refused unread):
        the network's state four times (the pack's, the departed runs', the weights at
        tau_best, the evaluation state) and the optimizer's slots; per run, an epoch's
        example order and augmentations (int64), two generator states and its history;
        1 MiB of structure."""
        recipe, n = self.pack.recipe, self.model.n
        weights = sum(t.nbytes for t in self.model.state_dict().values())
        slots = sum(t.nbytes for t in self.optimizer.slots.values())
        per_run = 4 * 8 * recipe.n_train + 2 * 8192 + HISTORY_ROW_JSON * recipe.epochs
        return 4 * weights + slots + n * per_run + 2**20

    def _save(self) -> None:
        self.guard()
        if self.checkpoint_dir is not None:
            checkpoint.save(self.checkpoint_dir, self._checkpoint_state())

    def _resume(self) -> None:
        """Restore the newest checkpoint that restores (none in the folder: start fresh);
        when every one fails, stop with an error that says so before anything restarts."""
        checkpoint.discard_partial(self.checkpoint_dir)
        failed = []
        for path, saved in checkpoint.generations(self.checkpoint_dir, self.checkpoint_limit(),
                                                  self.trust_checkpoint):
            if isinstance(saved, checkpoint.PickledCheckpoint):
                raise saved  # the user's call, not damage an older generation gets around
            if isinstance(saved, checkpoint.CheckpointError):
                failed.append(str(saved))
                continue
            self._check_compatible(saved)
            try:
                self._restore(saved)
            except Exception as err:  # any malformed payload: an older generation may be whole
                failed.append(f"{path}: does not restore ({type(err).__name__}: {err})")
                continue
            for reason in failed:
                log.warning("%s; resuming from the older %s instead", reason, path.name)
            self.resumed_from_epoch = self.loop.epoch
            log.info("resumed from checkpoint %s at epoch %d, update %d", path.name,
                     self.loop.epoch, self.loop.k)
            return
        if failed:  # damaged generations: restarting would silently discard their training
            raise checkpoint.CheckpointError(
                f"{self.checkpoint_dir}: no checkpoint restores ({'; '.join(failed)}); "
                "remove the folder to start the pack over")

    def _check_compatible(self, saved: dict[str, Any]) -> None:
        """Both generations are of one pack and one format: a mismatch is refused."""
        if saved.get("pack") != self.pack.to_dict():
            raise checkpoint.CheckpointError(
                f"{self.checkpoint_dir}: checkpoint of another pack; remove it to start over")
        if saved.get("format", 1) != CHECKPOINT_FORMAT:
            raise checkpoint.CheckpointError(
                f"{self.checkpoint_dir}: checkpoint of an older initmem (format "
                f"{saved.get('format', 1)}, this one reads {CHECKPOINT_FORMAT}); remove it to "
                "start the pack over")

    def _restore(self, saved: dict[str, Any]) -> None:
        self._keep(saved["members"])  # fewer than the pack's runs after a compaction
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        for name, variance in _batch_variances(self.model).items():
            variance.copy_(saved["batch_variances"][name])
        for gen, state in zip(self.order_gens + self.augment_gens,
                              saved["order_gens"] + saved["augment_gens"], strict=True):
            gen.set_state(state)
        self.loop.restore(saved, self.device)
        for state in self.loop.states:  # the workflow deletes a failed job's records: rewrite
            run_dir = self.out_dir / state.run.run_dir
            state.written = state.written and (run_dir / "summary.parquet").exists()


def run_weights(pack_weights: dict[str, Tensor], members: list[int],
                departed: dict[int, dict[str, Tensor]]) -> list[dict[str, Tensor]]:
    """Every run's parameters and buffers as one-run slices, in pack order: the pack's
    rows for its members (row i is run members[i]), as they left it for departed runs."""
    inside = {m: {name: t[i:i + 1] for name, t in pack_weights.items()}
              for i, m in enumerate(members)}
    return [inside[i] if i in inside else departed[i]
            for i in range(len(members) + len(departed))]


def saved_run_weights(saved: dict[str, Any]) -> list[dict[str, Tensor]]:
    """Every run's weights as evaluated in a checkpoint's payload (--keep-checkpoint keeps
    the final one), in pack order."""
    return run_weights(saved["evaluated"] or saved["model"], saved["members"],
                       saved["departed"])


def _rows(tensors: dict[str, Tensor], rows: list[int]) -> dict[str, Tensor]:
    """Each tensor's slices of the pack's `rows` (the leading run dimension)."""
    return {name: t[rows] for name, t in tensors.items()}


def _batch_variances(model: PackedNet) -> dict[str, Tensor]:
    """The BatchNorm layers' last training batch variances, by buffer name: not in the
    state_dict (a measurement), so checkpoints keep them apart."""
    return {name: t for name, t in model.named_buffers() if name.endswith("batch_variance")}


def determinism_settings(device: torch.device) -> str:
    """The kernel settings behind the numbers, as the records note them."""
    if device.type != "cuda":
        return "cpu: deterministic kernels (bitwise repeatable with the same threads)"
    b = torch.backends
    return (f"cuda: cudnn.deterministic={b.cudnn.deterministic}, "
            f"cudnn.benchmark={b.cudnn.benchmark}, tf32(conv)={b.cudnn.allow_tf32}, "
            f"tf32(matmul)={b.cuda.matmul.allow_tf32}, "
            f"deterministic_algorithms={torch.are_deterministic_algorithms_enabled()}")


def _progress_bar(total: int, enabled: bool, initial: int = 0):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="step", disable=not enabled,
                dynamic_ncols=True)
