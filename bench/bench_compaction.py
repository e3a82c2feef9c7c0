"""Compaction on CPU: a depth-like pack whose runs early-stop at different epochs, trained
with and without compaction, side by side.

    .venv/bin/python bench/bench_compaction.py [--arch resnet56] [--width 0.25] [--patience 2]

One pack of ResNet-56 (default 1/4 width, SGD with momentum, b = 32, 256 synthetic training
and 128 validation/test images) over the paper's five sigma_w, with a small patience so
that its runs stop within a few epochs. Both trainings run in this process, one after the
other, on one thread. Printed per mode: wall and CPU seconds, run-updates computed (the
updates of every run in the pack at each update: what compaction saves), the epoch each
run stopped at, and where the two trainings' records first differ (float32: bitwise
until the first compaction; then the smaller pack's convolutions round differently and
training amplifies it, see tests/test_train.py; --dtype float64: bitwise throughout).
Timings carry the CPU share other processes used meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from initmem.plan.architectures import ARCHITECTURES, CIFAR_RESNET
from initmem.plan.spec import Pack, Recipe, Run
from initmem.records.files import read_records
from initmem.training import data
from initmem.training.trainer import PackTrainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quiet import others_share, own_cpu_s  # noqa: E402

# the declared CIFAR ResNets: the networks the paper early-stops (patience)
CIFAR_RESNETS = tuple(a.name for a in ARCHITECTURES.values() if a.body == CIFAR_RESNET)
SIGMA_W = (0.1, 0.5, 1.0, 1.8, 2.5)


def bench_pack(args: argparse.Namespace) -> Pack:
    recipe = Recipe(family="depth", arch=args.arch, optimizer="sgd_momentum",
                    b=args.b, epochs=args.epochs, lr0=args.lr0, width=args.width,
                    dataset="synthetic", train_subset=args.train, eval_subset=args.eval,
                    patience=args.patience)
    return Pack(recipe, tuple(Run(recipe, s, seed) for seed, s in enumerate(SIGMA_W)))


def train(pack: Pack, splits: data.Splits, out: Path, compaction: bool) -> dict[str, object]:
    """One training of the pack: its timings, run-updates and stop epochs."""
    def run():
        return PackTrainer(pack, splits, out, torch.device("cpu"), progress=False,
                           compaction=compaction).run()

    cpu, start = own_cpu_s(), time.perf_counter()
    result, share = others_share(run)
    wall, cpu = time.perf_counter() - start, own_cpu_s() - cpu
    epochs = [int(read_records(out / r.run_dir)[1]["epochs_run"].iloc[0]) for r in pack.runs]
    return {"compaction": "on" if compaction else "off", "wall_s": wall, "cpu_s": cpu,
            "others_cpu_share": share, "run_updates": result.run_updates,
            "stop_epochs": " ".join(map(str, epochs))}


def difference(pack: Pack, a: Path, b: Path) -> str:
    """Where the two trainings' per-epoch metrics first differ, and by how much at most."""
    largest, first, metric = 0.0, None, ""
    for run in pack.runs:
        (h_a, _), (h_b, _) = read_records(a / run.run_dir), read_records(b / run.run_dir)
        numbers = h_a.select_dtypes("number").columns
        diff = (h_a[numbers] - h_b[numbers]).abs().fillna(0.0)
        differing = h_a["epoch"][(diff > 0).any(axis=1)]
        if len(differing):
            first = min(first or differing.iloc[0], differing.iloc[0])
        if diff.max().max() > largest:
            largest, metric = float(diff.max().max()), str(diff.max().idxmax())
    if first is None:
        return "bitwise equal"
    return (f"bitwise equal until epoch {first - 1}, then at most {largest:.3g} apart "
            f"(in {metric})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="resnet56", choices=CIFAR_RESNETS)
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--b", type=int, default=32)
    parser.add_argument("--lr0", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--train", type=int, default=256, help="synthetic training images")
    parser.add_argument("--eval", type=int, default=128, help="validation and test images")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="float64: records bitwise equal (tests/test_train.py)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_default_dtype(getattr(torch, args.dtype))
    pack = bench_pack(args)
    splits = data.load_splits(pack.recipe, None, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [train(pack, splits, Path(tmp) / mode, mode == "on") for mode in ("on", "off")]
        diff = difference(pack, Path(tmp) / "on", Path(tmp) / "off")
    frame = pd.DataFrame(rows).set_index("compaction")
    print(f"{pack.recipe.recipe_id} b={pack.recipe.b}, {len(pack.runs)} runs, sigma_w "
          f"{', '.join(map(str, SIGMA_W))}, 1 thread")
    print(frame.to_string(float_format=lambda x: f"{x:.3g}"))
    on, off = rows
    print(f"compaction saves {1 - on['run_updates'] / off['run_updates']:.0%} of the "
          f"run-updates and {1 - on['wall_s'] / off['wall_s']:.0%} of the wall time "
          f"({1 - on['cpu_s'] / off['cpu_s']:.0%} of the CPU time)")
    print(f"records ({args.dtype}): {diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
