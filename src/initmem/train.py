"""Train one pack: N runs of one recipe, each with its own sigma_w and seed, at once.

Per epoch and run it logs what Keras' `fit` logs (training metrics as running means in
training mode; validation and test in inference mode), ||W||_F, the rate and the clocks
T_SGD, T_L2, T_adapt. Metrics accumulate on the device and are read once per epoch.
A run whose loss turns non-finite is recorded as diverged and stops; a run that early-stops
stops; its records are written at once. The other runs go on.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from . import data
from .models import PackedNet, build_model
from .optim import Optimizer, build_optimizer, learning_rate
from .records import history_frame, summarize, write_records
from .spec import Pack, Run

log = logging.getLogger("initmem.train")
EVAL_BATCH = 1000


def train_step(model: PackedNet, optimizer: Optimizer, x: Tensor, y: Tensor, lr: float,
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


def l2_penalty(model: PackedNet, l2: float) -> Tensor | float:
    """Keras L2(l) on kernels: l * sum(W^2) per run (so its gradient 2 l W is coupled)."""
    return l2 * model.kernel_fro_norm().square() if l2 else 0.0


@torch.no_grad()
def evaluate(model: PackedNet, x: Tensor, y: Tensor, l2: float) -> tuple[Tensor, Tensor]:
    """Per-run loss (+ L2 penalty, as Keras' val_loss) and accuracy in inference mode."""
    model.eval()
    loss_sum = torch.zeros(model.n, device=x.device)
    correct = torch.zeros(model.n, device=x.device)
    for start in range(0, len(x), EVAL_BATCH):
        xb = data.as_float(x[start:start + EVAL_BATCH])
        yb = y[start:start + EVAL_BATCH].expand(model.n, -1)
        logits = model(xb)
        loss_sum += cross_entropy(logits, yb) * len(xb)
        correct += (logits.argmax(-1) == yb).sum(1)
    model.train()
    return loss_sum / len(x) + l2_penalty(model, l2), correct / len(x)


METRICS = ("train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc",
           "kernel_fro_norm")


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

    @property
    def active(self) -> bool:
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
        self.T_SGD += lr * lr / b
        self.T_L2 += lam * lr
        self.T_adapt += lr


@dataclass
class TrainedPack:
    summaries: list[dict[str, Any]]
    model: PackedNet


def train_pack(pack: Pack, splits: data.Splits, out_dir: Path, device: torch.device,
               progress: bool = True) -> TrainedPack:
    """Train every run of the pack; write each run's records as it ends."""
    recipe, runs = pack.recipe, pack.runs
    started = time.perf_counter()
    model = build_model(recipe, len(runs))
    model.init_([r.sigma_w for r in runs],
                [data.run_generators(r.seed, "cpu")["init"] for r in runs])
    model.to(device).train()
    optimizer = build_optimizer(recipe, model)
    gens = [data.run_generators(r.seed, device) for r in runs]
    order_gens, augment_gens = [g["order"] for g in gens], [g["augment"] for g in gens]
    kernel_fro_norm_init = model.kernel_fro_norm().tolist()
    states = [RunState(r, recipe.patience) for r in runs]
    clocks, k, lam = Clocks(), 0, recipe.l2 + recipe.weight_decay
    n_train = len(splits.train_x)
    if n_train != recipe.n_train:
        raise ValueError(f"the data has {n_train} training images but the recipe counts "
                         f"{recipe.n_train} (train_subset={recipe.train_subset}); K and the "
                         "clocks would be wrong")
    bar = _progress_bar(recipe.epochs * recipe.steps_per_epoch, enabled=progress)
    summaries: list[dict[str, Any]] = []

    def finish(i: int) -> None:
        state = states[i]
        history = history_frame(state.history)
        summary = summarize(state.run, history, kernel_fro_norm_init=kernel_fro_norm_init[i],
                            diverged_epoch=state.diverged_epoch,
                            early_stopped=state.early_stopped,
                            wall_time_s=time.perf_counter() - started, device=str(device))
        write_records(out_dir / state.run.run_dir, history, summary)
        summaries.append(summary)

    for epoch in range(1, recipe.epochs + 1):
        epoch_start = time.perf_counter()
        loss_sum = torch.zeros(len(runs), device=device)
        correct = torch.zeros(len(runs), device=device)
        order = data.epoch_permutations(n_train, order_gens)
        for idx in data.minibatches(order, recipe.b):
            x = data.as_float(splits.train_x[idx])
            if recipe.augment:
                x = data.augment_packed(x, augment_gens)
            lr = learning_rate(recipe, k)
            loss, hits = train_step(model, optimizer, x, splits.train_y[idx], lr, recipe.l2)
            loss_sum += loss * idx.shape[1]
            correct += hits
            clocks.tick(lr, recipe.b, lam)
            k += 1
            bar.update(1)
        val = evaluate(model, splits.val_x, splits.val_y, recipe.l2)
        test = evaluate(model, splits.test_x, splits.test_y, recipe.l2)
        columns = torch.stack([loss_sum / n_train, correct / n_train, *val, *test,
                               model.kernel_fro_norm().detach()])
        rows = columns.T.tolist()  # the epoch's one host synchronisation
        for i, (state, row) in enumerate(zip(states, rows, strict=True)):
            if state.active:
                state.record(epoch, {**dict(zip(METRICS, row, strict=True)), "lr": lr,
                                     **vars(clocks)})
                if not state.active:
                    finish(i)
        images_per_s = len(runs) * n_train / (time.perf_counter() - epoch_start)
        bar.set_postfix(epoch=epoch, loss=f"{rows[0][0]:.3f}", acc=f"{rows[0][1]:.3f}",
                        img_s=f"{images_per_s:.0f}")
        if not any(s.active for s in states):
            break
    bar.close()
    for i, state in enumerate(states):
        if state.active:
            finish(i)
    return TrainedPack(summaries, model)


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="step", disable=not enabled, dynamic_ncols=True)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device=cuda asked for, but torch sees no CUDA device; "
                         "use --device cpu or auto")
    device = torch.device(name)
    if device.type == "cuda":
        # TensorFlow's and PyTorch's defaults on Ampere+: TF32 convolutions and matmuls.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        precision = "float32 (TF32 convolutions and matmuls allowed)"
    else:
        name, precision = "cpu", "float32"
    return (f"device={device} ({name}), precision={precision}, "
            f"threads={torch.get_num_threads()}, torch={torch.__version__}")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="pack spec (YAML/JSON: recipe + runs)")
    parser.add_argument("out_dir", type=Path, help="records go to OUT_DIR/<run_dir>/")
    parser.add_argument("--data-root", type=Path, default=Path("data/cifar10"),
                        help="CIFAR-10 root in torchvision layout (default: data/cifar10)")
    parser.add_argument("--download", action="store_true",
                        help="download CIFAR-10 if the root lacks it")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="accept a CIFAR-10 copy that fails the official MD5 sums")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    pack = Pack.load(args.spec)
    device = resolve_device(args.device)
    log.info("%s", describe_device(device))
    splits = data.load_splits(pack.recipe, args.data_root, download=args.download,
                              allow_unverified=args.allow_unverified, device=device)
    log.info("pack of %d runs: %s, %d epochs x %d steps", len(pack.runs),
             pack.recipe.recipe_id, pack.recipe.epochs, pack.recipe.steps_per_epoch)
    result = train_pack(pack, splits, args.out_dir, device, progress=not args.no_progress)
    for s in result.summaries:
        log.info("%s: %s, tau_best=%s, test_acc_best=%.4f", s["run_id"], s["status"],
                 s["tau_best"], s["test_acc_best"])
    return 0
