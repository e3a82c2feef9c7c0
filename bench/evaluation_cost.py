"""What evaluating an optimizer at its declared evaluation weights costs (trainer.
evaluation_state: BatchNorm re-estimated there every epoch): one epoch of a small pack on
CPU with Adam (evaluated at its parameters) and with Schedule-Free AdamW (at x), and the
re-estimation alone.

    OMP_NUM_THREADS=1 .venv/bin/python bench/evaluation_cost.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from initmem.plan.spec import Pack, Recipe, Run
from initmem.training import data
from initmem.training.trainer import PackTrainer, evaluation_state

RECIPE = dict(family="bench", arch="resnet9", b=32, epochs=1, width=0.125,
              dataset="synthetic", train_subset=2000, eval_subset=500)


def main() -> None:
    torch.set_num_threads(1)
    device = torch.device("cpu")
    splits = data.load_splits(Recipe(optimizer="adam", **RECIPE), root=None, device="cpu")
    for optimizer, schedule in (("adam", "cosine"), ("schedule_free_adamw", "constant")):
        recipe = Recipe(optimizer=optimizer, schedule=schedule, **RECIPE)
        pack = Pack(recipe, (Run(recipe, 1.0, 0), Run(recipe, 2.0, 1)))
        with tempfile.TemporaryDirectory() as out:
            trainer = PackTrainer(pack, splits, Path(out), device, progress=False)
            start = time.perf_counter()
            trainer.run()
            epoch = time.perf_counter() - start
            start = time.perf_counter()
            evaluation_state(trainer.model, trainer.optimizer, splits.train_x, recipe.b)
            alone = time.perf_counter() - start
        print(f"{optimizer}: one epoch {epoch:.1f} s, evaluation_state alone {alone:.2f} s")


if __name__ == "__main__":
    main()
