"""Seconds for `snakemake TARGET -n` to parse the workflow and build the DAG of a config.

    .venv/bin/python bench/bench_dryrun.py [--config config.yaml] [--target tables] [--repeat 3]

Runs the dry run as a user types it (every job printed; the workflow's profile read by
itself) in an empty working directory, so nothing is trained and every job is pending:
for config.yaml the worst case, all 8,325 runs. Prints wall and CPU seconds (the CPU
figure is the one a busy machine does not inflate much). Target: < 5 s for `tables`.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def dry_run_seconds(config: Path, target: str, workdir: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, number of jobs) of one dry run."""
    cmd = [str(Path(sys.executable).with_name("snakemake")), target, "-n",
           "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(config.resolve())]
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"dry run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    total = [line for line in (done.stdout + done.stderr).splitlines()
             if line.startswith("total")]
    return wall, cpu, total[-1].split()[-1] if total else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--target", default="tables")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeat):
            wall, cpu, jobs = dry_run_seconds(args.config, args.target, Path(workdir))
            walls.append(wall)
            cpus.append(cpu)
    mid = len(walls) // 2
    print(f"snakemake {args.target} -n on {args.config.name}: {jobs} jobs; wall best "
          f"{min(walls):.1f} s, median {sorted(walls)[mid]:.1f} s; CPU best {min(cpus):.1f} s, "
          f"median {sorted(cpus)[mid]:.1f} s over {args.repeat} (target < 5 s)")


if __name__ == "__main__":
    main()
