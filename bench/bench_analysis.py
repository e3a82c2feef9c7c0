"""Time the analysis stages at full size, on synthetic records of the whole config.

Each stage runs as the workflow runs it (`python -m initmem ...` in its own process, so
imports and Parquet reads count) and the script prints seconds per stage and per group.
Target: every table and figure of the paper in under 60 s on 2 cores. Besides the sum of
the stages (one process at a time) it prints the makespan of the analysis stages on 2
workers, longest first (what `snakemake --cores 2` can reach, ignoring contention).

    .venv/bin/python bench/bench_analysis.py [--config config.yaml] [--work DIR]

To time more stages, add (group, name, argv) entries to STAGES; argv may use {config},
{work}, {runs} and {epochs}.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from initmem.plan import artifacts

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ["--runs", "{runs}", "--epochs", "{epochs}", "--config", "{config}"]

STAGES: list[tuple[str, str, list[str]]] = [
    ("records", "synthetic-records",
     ["synthetic-records", "--config", "{config}", "--out-dir", "{work}/aggregate"]),
    *(("tables", f"table {n}", ["table", str(n), *INPUTS, "--out",
                                f"{{work}}/tables/table{n}.tex"]) for n in artifacts.TABLES),
    *(("figures", f"figure {n}", ["figure", str(n), *INPUTS, "--pdf",
                                  f"{{work}}/figures/fig{n}.pdf", "--png",
                                  f"{{work}}/figures/fig{n}.png"]) for n in artifacts.FIGURES),
    ("prose", "macros", ["macros", *INPUTS, "--out", "{work}/paper/macros.tex"]),
    ("prose", "scorecard", ["scorecard", "--runs", "{runs}", "--published",
                            str(ROOT / "paper" / "published"), "--out-csv",
                            "{work}/scorecard/scorecard.csv", "--out-tex",
                            "{work}/scorecard/scorecard.tex"]),
]


def run_stage(argv: list[str], fields: dict[str, str]) -> float:
    """Seconds of one `python -m initmem` call; a failing stage stops the benchmark."""
    args = [a.format(**fields) for a in argv]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "initmem", *args], cwd=ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"initmem {' '.join(args)} failed:\n{done.stderr}")
    return seconds


def time_stages(config: Path, work: Path) -> list[tuple[str, str, float]]:
    """(group, stage, seconds) of every stage, run one after another in `work`."""
    fields = {"config": str(config.resolve()), "work": str(work),
              "runs": str(work / "aggregate" / "runs.parquet"),
              "epochs": str(work / "aggregate" / "epochs.parquet")}
    timings = []
    for group, name, argv in STAGES:
        timings.append((group, name, run_stage(argv, fields)))
        print(f"{name:<20} {timings[-1][2]:7.2f} s", flush=True)
    return timings


def makespan(seconds: list[float], workers: int) -> float:
    """Wall time of the jobs on `workers` processes, longest job first to the idlest."""
    loads = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--work", type=Path, help="output folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as tmp:
        timings = time_stages(args.config, args.work or Path(tmp))
    totals: dict[str, float] = defaultdict(float)
    for group, _, seconds in timings:
        totals[group] += seconds
    print("-" * 30)
    for group, seconds in totals.items():
        print(f"{group + ' total':<20} {seconds:7.2f} s")
    analysis = [s for g, _, s in timings if g != "records"]
    print(f"{'analysis total':<20} {sum(analysis):7.2f} s sequential, one process at a time; "
          f"{makespan(analysis, 2):.2f} s on 2 workers (target: tables + figures < 60 s on "
          "2 cores)")

if __name__ == "__main__":
    main()
