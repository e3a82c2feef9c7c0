"""Training throughput: packed runs vs the same runs one after another.

For ResNet-9 at b=16 and b=128 and ResNet-56 at b=128, and packs of N = 1, 5, 25, it
times the full training step (minibatch gather, uint8->float, optional augmentation,
forward, backward, optimizer) of one pack of N, and of N single runs stepped in turn,
in one invocation. Prints a table and writes it as CSV with the device, precision and
library versions.

    python bench/bench_training.py --quick          # CPU-sized: width 1/8, few steps
    python bench/bench_training.py --device cuda    # full width on a GPU
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
import time
from pathlib import Path

import torch

from initmem import data
from initmem.models import build_model
from initmem.optim import build_optimizer
from initmem.run_pack import describe_device, resolve_device
from initmem.spec import Recipe
from initmem.train import train_step

CASES = (("resnet9", 16), ("resnet9", 128), ("resnet56", 128))


def make_runner(recipe: Recipe, n: int, device: torch.device, images: torch.Tensor,
                labels: torch.Tensor):
    """A closure doing one training step of a pack of n runs on random minibatches."""
    model = build_model(recipe, n)
    model.init_([1.0] * n, [torch.Generator().manual_seed(i) for i in range(n)])
    model.to(device).train()
    optimizer = build_optimizer(recipe, model)
    gens = [data.run_generators(i, device)["augment"] for i in range(n)]

    def step() -> None:
        idx = torch.randint(0, len(images), (n, recipe.b), device=device)
        x = data.augment_packed(data.as_float(images[idx]), gens)
        train_step(model, optimizer, x, labels[idx], 1e-3, 0.0)

    return step


def seconds_per_step(steps_fn, device: torch.device, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        steps_fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        steps_fn()
    sync()
    return (time.perf_counter() - start) / repeats


def measure(arch: str, b: int, n: int, width: float, device: torch.device, warmup: int,
            repeats: int) -> dict:
    recipe = Recipe(family="bench", arch=arch, optimizer="adam", b=b, epochs=1, width=width,
                    augment=True)
    images = torch.randint(0, 256, (4096, 3, 32, 32), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 10, (4096,), device=device)
    packed = make_runner(recipe, n, device, images, labels)
    singles = [make_runner(recipe, 1, device, images, labels) for _ in range(n)]

    def sequential() -> None:
        for single in singles:
            single()

    t_packed = seconds_per_step(packed, device, warmup, repeats)
    t_seq = seconds_per_step(sequential, device, warmup, repeats)
    return {"arch": arch, "b": b, "N": n, "width": width,
            "packed_s_per_step": t_packed, "sequential_s_per_step": t_seq,
            "packed_images_per_s": n * b / t_packed, "sequential_images_per_s": n * b / t_seq,
            "packed_over_sequential": t_seq / t_packed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--quick", action="store_true",
                        help="CPU-sized: width 1/8, packs of 1 and 5, 2+3 steps")
    parser.add_argument("--width", type=float, default=None)
    parser.add_argument("--packs", type=int, nargs="+", default=None)
    parser.add_argument("--out", type=Path, default=Path("results/bench/training.csv"))
    args = parser.parse_args()
    device = resolve_device(args.device)
    width = args.width or (0.125 if args.quick or device.type == "cpu" else 1.0)
    packs = args.packs or ([1, 5] if args.quick else [1, 5, 25])
    warmup, repeats = (2, 3) if args.quick else (3, 10)
    print(describe_device(device), file=sys.stderr)
    rows = []
    for arch, b in CASES:
        for n in packs:
            row = measure(arch, b, n, width, device, warmup, repeats)
            row.update(device=str(device), precision="float32" + (
                " (TF32 allowed)" if device.type == "cuda" else ""),
                torch=torch.__version__, python=platform.python_version(),
                threads=torch.get_num_threads())
            rows.append(row)
            print(f"{arch:9s} b={b:<4d} N={n:<3d} packed {row['packed_images_per_s']:9.0f} img/s"
                  f"  sequential {row['sequential_images_per_s']:9.0f} img/s"
                  f"  ratio {row['packed_over_sequential']:5.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
