"""How two training jobs share this machine's cores (issue 26: the laptop study trains two
packs at once on two cores). Times `initmem train` of one small pack four ways:

  alone-1t       one pack, one thread
  two-unpinned   two packs at once, one thread each, the OS places them
  two-pinned     two packs at once, one thread each, pinned to cores 0 and 1 (taskset)
  alone-2t       one pack, two threads

and prints each way's wall seconds and its throughput (packs per second) relative to
running alone-1t twice in turn. Packs of generated images (dataset: synthetic), so no data
set is needed; the arithmetic per update is CIFAR-10's.

    python bench/bench_sharing.py [--epochs 3] [--repeats 2] [--wait-quiet]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quiet

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"recipe": {"family": "bench", "arch": "resnet9", "optimizer": "sgd", "b": 16,
                   "epochs": 3, "width": 0.125, "dataset": "synthetic",
                   "train_subset": 256, "eval_subset": 128},
        "runs": [{"sigma_w": s, "seed": 0} for s in (0.1, 0.5, 1.0, 1.8, 2.5)]}


def train_command(spec: Path, out: Path, cores: str | None) -> list[str]:
    command = [sys.executable, "-m", "initmem", "train", str(spec), str(out), "--device",
               "cpu", "--no-progress"]
    return ["taskset", "-c", cores, *command] if cores else command


def timed(jobs: list[tuple[list[str], int]], scratch: Path) -> float:
    """Wall seconds of the given (command, threads) jobs started together."""
    started = time.monotonic()
    processes = []
    for i, (command, threads) in enumerate(jobs):
        shutil.rmtree(scratch / f"out{i}", ignore_errors=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    for p in processes:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"training failed: {err.strip().splitlines()[-1]}")
    return time.monotonic() - started


def ways(spec: Path, scratch: Path) -> dict[str, tuple[list[tuple[list[str], int]], int]]:
    """Each way: its jobs and how many packs it trains."""
    out = [scratch / f"out{i}" for i in range(2)]
    return {
        "alone-1t": ([(train_command(spec, out[0], None), 1)], 1),
        "two-unpinned": ([(train_command(spec, out[i], None), 1) for i in range(2)], 2),
        "two-pinned": ([(train_command(spec, out[i], str(i)), 1) for i in range(2)], 2),
        "alone-2t": ([(train_command(spec, out[0], None), 2)], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--wait-quiet", action="store_true")
    args = parser.parse_args()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        raise SystemExit("needs taskset and two cores")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        spec = scratch / "pack.json"
        spec.write_text(json.dumps({**SPEC, "recipe": {**SPEC["recipe"],
                                                       "epochs": args.epochs}}))
        results = {}
        for name, (jobs, packs) in ways(spec, scratch).items():
            if args.wait_quiet:
                quiet.wait_until_quiet()
            seconds, share = quiet.others_share(
                lambda jobs=jobs: min(timed(jobs, scratch) for _ in range(args.repeats)))
            results[name] = (seconds, packs, share)
    base = results["alone-1t"][0]
    print(f"{'way':<14} {'wall s':>8} {'packs':>6} {'throughput vs alone-1t in turn':>31} "
          f"{'others':>7}")
    for name, (seconds, packs, share) in results.items():
        relative = (packs / seconds) / (1 / base)
        others = "?" if share is None else f"{share:.0%}"
        print(f"{name:<14} {seconds:>8.1f} {packs:>6} {relative:>30.2f}x {others:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
