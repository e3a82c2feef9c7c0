"""Packs whose runs stop at different epochs, for the compaction tests.

PACK (float64, data made in float64): patience 2 on 128 synthetic images; four of the
five runs early-stop at epoch 3 and leave the pack, and sigma_w = 0.1 goes on alone
until it stops at epoch 4. In float32 all five stop at epoch 3 together.
DIVERGING (float32): plain SGD at a huge rate; the run with huge initial logits diverges
in epoch 1 and leaves, the other three train all 4 epochs as a pack of 3.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from initmem.plan.spec import Pack, Recipe, Run
from initmem.records.files import PROVENANCE_COLUMNS, read_records

RECIPE = Recipe(family="test", arch="resnet9", optimizer="sgd_momentum", b=32,
                epochs=8, lr0=0.05, width=0.125, dataset="synthetic", train_subset=128,
                eval_subset=64, patience=2)
PACK = Pack(RECIPE, tuple(Run(RECIPE, s, seed) for s, seed in
                          ((0.1, 3), (0.5, 0), (1.0, 1), (2.0, 2), (2.5, 4))))
STOP_EPOCHS = (4, 3, 3, 3, 3)  # in float64, by run
DIVERGING_RECIPE = Recipe(family="test", arch="resnet9", optimizer="sgd", b=32, epochs=4,
                          lr0=0.5, width=0.125, dataset="synthetic", train_subset=256,
                          eval_subset=64)
DIVERGING = Pack(DIVERGING_RECIPE, tuple(Run(DIVERGING_RECIPE, s, seed) for s, seed in
                                         ((1.0, 0), (0.5, 1), (1e20, 0), (2.0, 2))))


def records(out: Path, pack: Pack = PACK) -> list[pd.DataFrame]:
    """Every run's history and summary, without what differs between two identical
    trainings (provenance: wall time, host, resume) or between step paths (the
    determinism note)."""
    frames = []
    for run in pack.runs:
        history, summary = read_records(out / run.run_dir)
        frames += [history, summary.drop(columns=[*PROVENANCE_COLUMNS, "determinism"])]
    return frames


def assert_same_records(a: Path, b: Path, pack: Pack = PACK) -> None:
    for left, right in zip(records(a, pack), records(b, pack), strict=True):
        pd.testing.assert_frame_equal(left, right, check_exact=True)
