"""Seconds for `snakemake -n` to parse the workflow and build the DAG of a config.

    .venv/bin/python bench/bench_dryrun.py [--config config.yaml] [--cores 2] [--repeat 3]

Runs in an empty working directory (nothing trained: every job is pending), so the figure
is the worst case: all 8,325 runs of the paper's config. The target is < 20 s on 2 cores.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dry_run_seconds(config: Path, cores: int, workdir: Path) -> tuple[float, str]:
    cmd = [str(Path(sys.executable).with_name("snakemake")), "all", "-n", "--quiet", "rules",
           "--cores", str(cores), "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(config.resolve())]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"dry run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    total = [line for line in (done.stdout + done.stderr).splitlines()
             if line.startswith("total")]
    return seconds, total[-1].split()[-1] if total else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(args.repeat):
            seconds, jobs = dry_run_seconds(args.config, args.cores, Path(workdir))
            times.append(seconds)
    print(f"dry run of {args.config.name}: {jobs} jobs, best {min(times):.1f} s, "
          f"median {sorted(times)[len(times) // 2]:.1f} s over {args.repeat} "
          f"(--cores {args.cores}; target < 20 s)")


if __name__ == "__main__":
    main()
