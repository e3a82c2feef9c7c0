"""Stand-ins for the tests: hand-made run records (simple, known values per epoch) and a
CPU stand-in for the CUDA-graph step."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from initmem.plan.spec import Run
from initmem.records.files import history_frame, summarize, write_records
from initmem.training import step


def fake_history(run: Run, epochs: int) -> pd.DataFrame:
    """Accuracy rising 0.5 + 0.1 * epoch (capped at 1), loss falling, clocks counting,
    BatchNorm's variance ratio falling to 1."""
    rows = [{"run_id": run.run_id, "epoch": e, "train_loss": 2.0 / e,
             "train_acc": min(1.0, 0.5 + 0.1 * e), "val_loss": 2.0 / e + 0.1,
             "val_acc": min(0.9, 0.4 + 0.1 * e), "test_loss": 2.0 / e + 0.2,
             "test_acc": min(0.9, 0.4 + 0.1 * e) - 0.01, "kernel_fro_norm": 10 * run.sigma_w,
             "bn_var_ratio": 1 + 10 / e, "lr": run.recipe.lr0, "T_SGD": 0.1 * e,
             "T_L2": 0.0, "T_adapt": 0.01 * e}
            for e in range(1, epochs + 1)]
    return history_frame(rows)


def write_fake_run(root: str | Path, run: Run, epochs: int | None = None) -> None:
    """Records of one run under root/<run_dir>/, record_source "generated"."""
    history = fake_history(run, epochs or run.recipe.epochs)
    summary = summarize(run, history, kernel_fro_norm_init=10 * run.sigma_w,
                        diverged_epoch=None, early_stopped=False, wall_time_s=1.0,
                        device="cpu", record_source="generated")
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
