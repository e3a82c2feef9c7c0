"""Stand-ins for the tests: hand-made run records (simple, known values per epoch), a
tiny CIFAR-10 copy, a CPU stand-in for the CUDA-graph step and SLURM's commands."""

from __future__ import annotations

import pickle
import shlex
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from initmem.plan.spec import Run
from initmem.records.files import history_frame, summary_record, write_records
from initmem.training import data, step

# Images per fake CIFAR-10 batch file (100 training, 20 test images): the official layout
# scaled down, so a test sets data.IMAGES_PER_FILE to it.
PER_BATCH = 20


def write_batch(path: Path, label: str, images: np.ndarray, labels: list[int]) -> None:
    with open(path, "wb") as fh:
        pickle.dump({"batch_label": label, "labels": labels, "data": images,
                     "filenames": [f"{i}.png" for i in range(len(labels))]}, fh)


def fake_cifar(root: Path) -> dict[str, np.ndarray]:
    """Write a tiny CIFAR-10 copy in torchvision's layout (each file with its official
    batch_label and every class twice, in random order); return its images per file."""
    folder = root / data.FOLDER
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = {}
    for name, label in data.BATCH_LABELS.items():
        images[name] = rng.integers(0, 256, (PER_BATCH, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.permutation(np.arange(PER_BATCH) % 10)]
        write_batch(folder / name, label, images[name], labels)
    with open(folder / "batches.meta", "wb") as fh:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, fh)
    return images


def swap(folder, a: str, b: str) -> None:
    (folder / a).rename(folder / "swap")
    (folder / b).rename(folder / a)
    (folder / "swap").rename(folder / b)


def foreign(folder) -> None:
    """data_batch_2 replaced by a file of the right size and label, but three classes."""
    write_batch(folder / "data_batch_2", data.BATCH_LABELS["data_batch_2"],
                np.zeros((PER_BATCH, 3072), np.uint8), [i % 3 for i in range(PER_BATCH)])


def truncated(folder) -> None:
    """data_batch_3 cut off mid-pickle."""
    path = folder / "data_batch_3"
    path.write_bytes(path.read_bytes()[:500])


def shortened(folder) -> None:
    """data_batch_5 a whole pickle with one image fewer than the layout's."""
    write_batch(folder / "data_batch_5", data.BATCH_LABELS["data_batch_5"],
                np.zeros((PER_BATCH - 1, 3072), np.uint8), [i % 10 for i in range(PER_BATCH - 1)])


# A copy damaged as a hostile user would: name -> (how, what the one line must say).
DAMAGED_COPIES = {
    "swapped": (lambda f: swap(f, "data_batch_1", "test_batch"),
                ["data_batch_1 is labelled 'testing batch 1 of 1'",
                 "test_batch is labelled 'training batch 1 of 5'"]),
    "renamed": (lambda f: swap(f, "data_batch_2", "data_batch_3"),
                ["data_batch_2 is labelled 'training batch 3 of 5'"]),
    "foreign": (foreign, ["data_batch_2 holds 0.0% to 35.0% of a class"]),
    "truncated": (truncated, ["data_batch_3 is corrupt or truncated"]),
    "shortened": (shortened, ["data_batch_5 holds 19 images, not 20"]),
}


def fake_history(run: Run, epochs: int, offset: float = 0.0, clocks: float = 1.0
                 ) -> pd.DataFrame:
    """Accuracy rising 0.5 + 0.1 * epoch (capped at 1; validation and test shifted by
    `offset`), loss falling, clocks counting (times `clocks`), BatchNorm's variance ratio
    falling to 1."""
    rows = [{"run_id": run.run_id, "epoch": e, "train_loss": 2.0 / e,
             "train_acc": min(1.0, 0.5 + 0.1 * e), "val_loss": 2.0 / e + 0.1,
             "val_acc": min(0.9, 0.4 + 0.1 * e) + offset, "test_loss": 2.0 / e + 0.2,
             "test_acc": min(0.9, 0.4 + 0.1 * e) - 0.01 + offset,
             "kernel_fro_norm": 10 * run.sigma_w,
             "bn_var_ratio": 1 + 10 / e, "lr": run.recipe.lr0, "T_SGD": 0.1 * e * clocks,
             "T_L2": 0.0, "T_adapt": 0.01 * e * clocks}
            for e in range(1, epochs + 1)]
    return history_frame(rows)


def write_fake_run(root: str | Path, run: Run, epochs: int | None = None,
                   offset: float = 0.0, clocks: float = 1.0, **provenance: object) -> None:
    """Records of one run under root/<run_dir>/, record_source "generated": `epochs` of
    history (at most the recipe's; all of them by default); `provenance`: host,
    slurm_job_id, resumed_from_epoch."""
    history = fake_history(run, epochs or run.recipe.epochs, offset, clocks)
    summary = summary_record(run, history, kernel_fro_norm_init=10 * run.sigma_w,
                             diverged_epoch=None, early_stopped=False, wall_time_s=1.0,
                             device="cpu", record_source="generated", **provenance)
    write_records(Path(root) / run.run_dir, history, summary)


class FakeGraph(step.StepExecutor):
    """StepExecutor with torch.cuda's graph calls replaced by CPU stand-ins."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{**kwargs, "cuda_graph": True})
        self.calls = {"warmup": 0, "capture": 0, "replay": 0}

    def _warmup(self, *inputs):
        self.calls["warmup"] += 1
        return self._eager(*inputs)

    def _capture(self):
        self.calls["capture"] += 1
        self.model.zero_grad(set_to_none=True)
        self.graph = "recorded"
        n = self.model.n
        self.outputs = (torch.full((n,), float("nan")), torch.full((n,), -1))

    def _replay(self):
        self.calls["replay"] += 1
        for out, new in zip(self.outputs, self._eager(*self.inputs), strict=True):
            out.copy_(new)


class FakeSlurm:
    """squeue, sinfo and scontrol as shell scripts in a folder that is the whole PATH (so
    no real SLURM answers, even where one is installed): each prints the lines it was
    given and exits with its status, or hangs; every call is logged. A command never
    given is missing."""

    def __init__(self, folder: Path):
        self.bin, self.log = folder, folder / "calls.log"
        folder.mkdir(parents=True)

    def answer(self, name: str, lines: Sequence[str] = (), status: int = 0,
               hang: bool = False) -> None:
        body = ("exec /bin/sleep 60" if hang
                else f"printf '%s\\n' {' '.join(map(shlex.quote, lines))}\nexit {status}")
        tool = self.bin / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> {shlex.quote(str(self.log))}\n'
                        f"{body}\n")
        tool.chmod(0o755)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []
