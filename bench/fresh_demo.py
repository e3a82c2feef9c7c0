"""Seconds from a fresh clone to a finished `make demo`, phase by phase (target < 5 min).

    .venv/bin/python bench/fresh_demo.py [--wait-quiet] [--keep DIR]

Clones this checkout's HEAD into an empty folder, links the team's offline CIFAR-10 copy
beside it when this checkout has one (../shared, as on the project's machines), gives uv
an empty cache of its own (a cold install, without touching the user's cache), then runs
`make demo` as a newcomer types it. Prints the wall time of each phase, read from the
files each one leaves (the venv's marker, CIFAR-10's last batch, the paper PDF), how much
of the training the cores spent idle (bench/idle_cores.py on the demo's Snakemake log)
and other processes' share of the cores meanwhile (bench/quiet.py): above a few per cent
the seconds are suspect. The clone is deleted afterwards unless --keep names a folder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import idle_cores
import quiet

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 300.0
# The file each phase writes last, in order: its mtime ends the phase.
PHASES = (("venv (uv, cold cache)", ".venv/.installed"),
          ("CIFAR-10", "data/cifar10/cifar-10-batches-py/test_batch"),
          ("workflow (train, tables, figures, PDF)", "results/paper/paper.pdf"))


def clone(into: Path) -> Path:
    """This checkout's HEAD in into/initmem, with ../shared linked beside it if we have one."""
    checkout = into / "initmem"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (into / "shared").symlink_to(shared.resolve())
    return checkout


def make_demo(checkout: Path, log: Path) -> float:
    """Runs `make demo` there (its output to log); its start as a Unix time."""
    env = {**os.environ, "UV_CACHE_DIR": str(checkout.parent / "uv-cache")}
    env.pop("VIRTUAL_ENV", None)  # the clone makes its own venv
    start = time.time()
    with log.open("w") as out:
        done = subprocess.run(["make", "demo"], cwd=checkout, env=env, stdout=out,
                              stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"make demo failed (exit {done.returncode}); its output: {log}")
    return start


def phase_lines(checkout: Path, start: float) -> list[str]:
    lines, previous = [], start
    for name, marker in PHASES:
        end = (checkout / marker).stat().st_mtime
        lines.append(f"  {name:<40} {end - previous:6.0f} s")
        previous = end
    total = previous - start
    verdict = "within" if total < TARGET_S else "OVER"
    lines.append(f"  {'fresh clone to finished demo':<40} {total:6.0f} s "
                 f"({total / 60:.1f} min, {verdict} the {TARGET_S / 60:.0f}-minute target)")
    return lines


def idle_line(checkout: Path) -> str:
    (log,) = sorted((checkout / ".snakemake" / "log").glob("*.snakemake.log"))[-1:]
    cores, jobs, last = idle_cores.training_jobs(log.read_text().splitlines())
    wall, busy, idle_s = idle_cores.idle(cores, jobs, last)
    return (f"  training: {len(jobs)} jobs on {cores} cores, {wall:.0f} s wall, "
            f"cores idle {100 * idle_s / (busy + idle_s):.1f}% of it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait-quiet", action="store_true",
                        help="wait for other processes to leave the CPUs idle first")
    parser.add_argument("--keep", type=Path, help="clone into this (new) folder and keep it")
    args = parser.parse_args()
    if args.wait_quiet:
        quiet.wait_until_quiet()
    if args.keep:
        args.keep.mkdir(parents=True)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fresh-demo-"))
    try:
        checkout = clone(folder)
        start, others = quiet.others_share(lambda: make_demo(checkout, folder / "demo.log"))
        shown = "unknown" if others is None else f"{others:.0%}"
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout,
                                capture_output=True, text=True).stdout.strip()
        print(f"make demo from a fresh clone at {commit} "
              f"(other processes: {shown} of the cores)")
        print("\n".join([*phase_lines(checkout, start), idle_line(checkout)]))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
