"""Training throughput: packed runs vs the same runs one after another.

For ResNet-9 at b=16 and b=128 and ResNet-56 at b=128 (--cases adds others), and packs of
N = 1, 5, 25, it times the full training step (minibatch gather, uint8->float,
augmentation, forward, backward, optimizer) of one pack of N by each step path (PATHS:
eager or replayed as a CUDA graph, contiguous or channels_last activations), and of N
eager single runs stepped in turn (the paper's one run per GPU), in one invocation. They
are timed alternately, block by block, and each gets the median block, so background load
hits all alike; on a GPU the table ends with issue 6's targets (packed images/s at least
8x one eager single run's at b = 16, 3x at b = 128); each row notes the share of the
cores other processes used meanwhile (bench/quiet.py), and --wait-quiet waits for a quiet
machine before each row and measures a row again (up to 3 tries) when others used more
than 5%. Prints a table and writes it as CSV (one row per case, N and path) with the
device, precision and library versions; `python -m initmem cost --bench CSV`
projects the paper's device-hours from it.

Each row also counts the FLOPs of the step (initmem.training.models.train_flops_per_image: 2 x 3 x
the conv and dense multiply-adds per image and run) and, on a GPU this file knows, the
fraction of its peak (TF32 when allowed, as initmem's CUDA runs do, else float32).

    python bench/bench_training.py --quick            # CI-sized: CPU, width 1/8, ~2 min
    python bench/bench_training.py --widths 0.125 0.25  # the full CPU benchmark
    python bench/bench_training.py --device cuda      # full width on a GPU
"""

from __future__ import annotations

import argparse
import csv
import itertools
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import quiet
import torch

from initmem.plan.spec import Recipe
from initmem.training import data
from initmem.training.command import describe_device, resolve_device
from initmem.training.models import build_model, train_flops_per_image
from initmem.training.optimizers import build_optimizer
from initmem.training.step import WARMUP_STEPS, StepExecutor
from initmem.training.trainer import determinism_settings

CASES = (("resnet9", 16), ("resnet9", 128), ("resnet56", 128))
# eager: the plain step; graph: replayed as a CUDA graph; _cl: channels_last activations.
PATHS = ("eager", "eager_cl", "graph", "graph_cl")
# Issue 6's targets on a GPU: packed images/s over one eager single run's, by batch size.
TARGETS = {16: 8.0, 128: 3.0}
POOL = 4096  # random images the minibatches are drawn from (full batches only)

# Dense peak TFLOP/s (float32, TF32 tensor cores without sparsity) from NVIDIA's datasheets,
# which quote TF32 with 2:4 sparsity: halved here. The first key (lower case) contained in
# torch.cuda.get_device_name wins, so specific names come first. H100/H200 SXM: fp32 67,
# TF32 989 sparse; H100/H200 NVL: 60, 835; H100 PCIe: 51, 756; A100: 19.5, 312; L40S:
# 91.6, 366; L4: 30.3, 120; A10: 31.2, 125; RTX 4090: 82.6, 165.2; V100 and T4 lack TF32.
GPU_PEAK_TFLOPS: tuple[tuple[str, float, float], ...] = (
    ("h100 pcie", 51.0, 378.0), ("h100 nvl", 60.0, 417.5), ("h200 nvl", 60.0, 417.5),
    ("h100", 67.0, 494.5), ("h200", 67.0, 494.5), ("a100", 19.5, 156.0),
    ("l40s", 91.6, 183.0), ("l4", 30.3, 60.0), ("a10", 31.2, 62.5),
    ("rtx 4090", 82.6, 82.6), ("v100", 15.7, 15.7), ("t4", 8.1, 8.1),
)


def peak_tflops(device_name: str, tf32: bool) -> float | None:
    """The device's dense peak in TFLOP/s for the precision used; None when not listed."""
    for key, fp32, tf32_peak in GPU_PEAK_TFLOPS:
        if key in device_name.lower():
            return tf32_peak if tf32 else fp32
    return None


def make_runner(recipe: Recipe, n: int, device: torch.device, images: torch.Tensor,
                labels: torch.Tensor, path: str = "eager") -> Callable[[], None]:
    """A closure doing one training step of a pack of n runs on random minibatches, by
    one of PATHS (eager or CUDA graph, contiguous or channels_last)."""
    model = build_model(recipe, n)
    model.init_([1.0] * n, [torch.Generator().manual_seed(i) for i in range(n)])
    model.to(device).train()
    model.channels_last = path.endswith("_cl")
    optimizer = build_optimizer(recipe, model)

    def batch(idx: torch.Tensor, draws: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return data.augment(data.as_float(images[idx]), draws), labels[idx]

    executor = StepExecutor(model, optimizer, 0.0, recipe.b, batch,
                            cuda_graph=path.startswith("graph"))
    gens = [data.run_generators(i, device) for i in range(n)]
    # As the trainer: each run's order and augmentation drawn for a whole "epoch" of the
    # pool, then sliced per step
    order = data.epoch_permutations(len(images), [g["order"] for g in gens])
    augmentations = data.epoch_augmentations(len(images), [g["augment"] for g in gens])
    batches = itertools.cycle(list(data.minibatches(recipe.b, order, augmentations))[:-1])

    def step() -> None:
        executor(1e-3, *next(batches))

    return step


def median_seconds(fns: Sequence[Callable[[], None]], device: torch.device, warmup: int,
                   repeats: int, block: int) -> list[float]:
    """Median seconds per call of each function: `repeats` timed blocks of `block` calls,
    the functions alternating block by block, after `warmup` untimed calls of each."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            sync()
            start = time.perf_counter()
            for _ in range(block):
                fn()
            sync()
            spent.append((time.perf_counter() - start) / block)
    return [statistics.median(spent) for spent in times]


def measure(arch: str, b: int, n: int, width: float, device: torch.device, paths: Sequence[str],
            warmup: int, repeats: int, block: int) -> list[dict]:
    """One row per path: its packed step against N eager single runs stepped in turn (the
    paper's one run per GPU), all timed side by side."""
    recipe = Recipe(family="bench", arch=arch, optimizer="adam", b=b, epochs=1, width=width,
                    augment=True)
    images = torch.randint(0, 256, (POOL, 3, 32, 32), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 10, (POOL,), device=device)
    packed = [make_runner(recipe, n, device, images, labels, path) for path in paths]
    singles = [make_runner(recipe, 1, device, images, labels) for _ in range(n)]

    def sequential() -> None:
        for single in singles:
            single()

    t_seq, *t_packed = median_seconds([sequential, *packed], device, warmup, repeats, block)
    return [{"arch": arch, "b": b, "N": n, "width": width, "path": path,
             "packed_s_per_step": t, "sequential_s_per_step": t_seq,
             "packed_images_per_s": n * b / t, "sequential_images_per_s": n * b / t_seq,
             "packed_over_sequential": t_seq / t, "target": TARGETS.get(b)}
            for path, t in zip(paths, t_packed, strict=True)]


def environment(device: torch.device) -> dict:
    """Device, precision and library versions, as every CSV row repeats them."""
    cuda = device.type == "cuda"
    tf32 = cuda and torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    return {"device": device.type,
            "device_name": torch.cuda.get_device_name(device) if cuda else cpu_name(),
            "precision": "float32 (TF32 allowed)" if tf32 else "float32",
            "determinism": determinism_settings(device),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "cuda": torch.version.cuda or "", "cudnn": torch.backends.cudnn.version() or "",
            "numpy": np.__version__, "python": platform.python_version()}


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def add_flops(row: dict, env: dict) -> dict:
    """Achieved TFLOP/s of packed and sequential steps, and their fraction of the peak."""
    flops = train_flops_per_image(row["arch"], row["width"])
    tf32 = "TF32" in env["precision"]
    peak = peak_tflops(env["device_name"], tf32) if env["device"] == "cuda" else None
    row["train_gflop_per_image"] = flops / 1e9
    row["peak_tflops"] = peak
    for mode in ("packed", "sequential"):
        achieved = flops * row[f"{mode}_images_per_s"] / 1e12
        row[f"{mode}_tflops"] = achieved
        row[f"{mode}_peak_fraction"] = achieved / peak if peak else None
    return row


def run_benchmark(device: torch.device, widths: Sequence[float], packs: Sequence[int],
                  cases: Sequence[tuple[str, int]], paths: Sequence[str], warmup: int,
                  repeats: int, block: int, wait_quiet: bool = False) -> list[dict]:
    """Every (width, case, N, path) row, printed as measured."""
    env = environment(device)
    rows = []
    for width in widths:
        for arch, b in cases:
            for n in packs:
                try:
                    measured, share = measure_quietly(
                        partial(measure, arch, b, n, width, device, paths, warmup, repeats,
                                block), wait_quiet)
                except torch.cuda.OutOfMemoryError:  # all paths at once did not fit: go on
                    print(f"{arch} b={b} N={n} width={width:g}: out of device memory with "
                          f"paths {', '.join(paths)} side by side; skipped",
                          file=sys.stderr, flush=True)
                    torch.cuda.empty_cache()
                    continue
                for row in measured:
                    rows.append({**add_flops(row, env), **env, "warmup": warmup,
                                 "repeats": repeats, "block": block,
                                 "others_cpu_share": share})
                    print(format_row(rows[-1]), file=sys.stderr, flush=True)
    return rows


def measure_quietly(measure_rows: Callable[[], list[dict]],
                    wait_quiet: bool) -> tuple[list[dict], float | None]:
    """Rows and the CPU share others used; with wait_quiet, after waiting for a quiet
    machine, and again (up to 3 tries) while others used more than quiet.QUIET_SHARE."""
    for _ in range(3 if wait_quiet else 1):
        if wait_quiet:
            quiet.wait_until_quiet()
        rows, share = quiet.others_share(measure_rows)
        if share is None or share < quiet.QUIET_SHARE:
            break
    return rows, share


HEADER = (f"{'arch':<10} {'b':>4} {'N':>3} {'width':>6} {'path':<8} {'packed ms':>10} "
          f"{'seq ms':>9} "
          f"{'packed img/s':>12} {'seq img/s':>10} {'ratio':>6} {'TFLOP/s':>8} {'peak':>6}")


def format_row(r: dict) -> str:
    fraction = r["packed_peak_fraction"]
    return (f"{r['arch']:<10} {r['b']:>4} {r['N']:>3} {r['width']:>6.3g} {r['path']:<8} "
            f"{1e3 * r['packed_s_per_step']:>10.1f} {1e3 * r['sequential_s_per_step']:>9.1f} "
            f"{r['packed_images_per_s']:>12,.0f} {r['sequential_images_per_s']:>10,.0f} "
            f"{r['packed_over_sequential']:>6.2f} {r['packed_tflops']:>8.3f} "
            + (f"{fraction:>6.1%}" if fraction is not None else f"{'-':>6}"))


def format_table(rows: list[dict]) -> str:
    """The table, a line on the environment, and where packing was the slower."""
    env = rows[0]
    lines = [f"device {env['device']} ({env['device_name']}), {env['precision']}, "
             f"{env['threads']} threads, torch {env['torch']}; ratio = sequential time / "
             "packed time (> 1: packing is faster); TFLOP/s and peak of the packed step",
             HEADER, *map(format_row, rows)]
    slower = [f"{r['arch']} b={r['b']} N={r['N']} width={r['width']:g} {r['path']} "
              f"({r['packed_over_sequential']:.2f})" for r in rows
              if r["N"] > 1 and r["packed_over_sequential"] < 1]
    lines.append("packing slower than sequential at: " + ("; ".join(slower) or "none"))
    if env["device"] == "cuda":
        lines += map(target_line, [r for r in rows if r["target"]])
    return "\n".join(lines)


def target_line(r: dict) -> str:
    ratio = r["packed_over_sequential"]
    verdict = "met" if ratio >= r["target"] else "NOT met"
    return (f"target {r['arch']} b={r['b']} N={r['N']} width={r['width']:g} {r['path']}: "
            f"{ratio:.2f}x one eager single run's images/s (target {r['target']:g}x: {verdict})")


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def parse_case(text: str) -> tuple[str, int]:
    arch, _, b = text.partition(":")
    if not b.isdigit():
        raise argparse.ArgumentTypeError(f"case {text!r} is not allowed; write ARCH:B, "
                                         "e.g. resnet56:16")
    return arch, int(b)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--quick", action="store_true",
                        help="CI-sized: width 1/8, packs of 1 and 5, 1 warm-up + 3 steps")
    parser.add_argument("--widths", type=float, nargs="+", default=None,
                        help="channel multipliers (default 1/8 on CPU, 1 on a GPU)")
    parser.add_argument("--packs", type=int, nargs="+", default=None, help="pack sizes N")
    parser.add_argument("--cases", type=parse_case, nargs="+", default=list(CASES),
                        metavar="ARCH:B", help="default: resnet9:16 resnet9:128 resnet56:128")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=None,
                        help="step paths of the packed runs (default: all on a GPU; eager "
                             "and eager_cl on CPU, where CUDA graphs do not exist)")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="on CUDA, let cuDNN pick the fastest kernels (as train's flag)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's; the demo's jobs use 1)")
    parser.add_argument("--wait-quiet", action="store_true",
                        help="before each row wait until other processes leave the CPUs "
                             "idle; measure a row again when they did not")
    parser.add_argument("--repeats", type=int, default=None, help="timed blocks per mode")
    parser.add_argument("--out", type=Path, default=Path("results/bench/training.csv"))
    args = parser.parse_args(argv)
    device = resolve_device(args.device, deterministic=not args.nondeterministic)
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    widths = args.widths or [1.0 if cuda and not args.quick else 0.125]
    packs = args.packs or ([1, 5] if args.quick else [1, 5, 25])
    paths = args.paths or (PATHS if cuda else PATHS[:2])
    if not cuda and any(p.startswith("graph") for p in paths):
        parser.error(f"paths {', '.join(paths)} are not allowed on {device}: graph paths "
                     "need a CUDA device")
    warmup, repeats, block = (1, 3, 1) if args.quick else (5, 5, 10) if cuda else (2, 5, 1)
    if cuda:  # a graph path warms up, then captures and checks its capture, before timing
        warmup = max(warmup, WARMUP_STEPS + 2)
    print(describe_device(device), file=sys.stderr)
    rows = run_benchmark(device, widths, packs, args.cases, paths, warmup,
                         args.repeats or repeats, block, args.wait_quiet)
    if not rows:
        sys.exit("nothing was measured: every case ran out of device memory")
    print(format_table(rows))
    write_csv(rows, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
