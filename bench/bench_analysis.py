"""Time the analysis stages at full size, on synthetic records of the whole config.

Each stage runs as the workflow runs it (`python -m initmem ...` in its own process, so
imports and Parquet reads count) and the script prints seconds per stage and per group.
Target: every table and figure of the paper in under 60 s on 2 cores.

    .venv/bin/python bench/bench_analysis.py [--config config.yaml] [--work DIR]

To time more stages (figures, say), add (group, name, argv) entries to STAGES; argv may
use {config}, {work}, {runs} and {epochs}.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ["--runs", "{runs}", "--epochs", "{epochs}", "--config", "{config}"]

STAGES: list[tuple[str, str, list[str]]] = [
    ("records", "synthetic-records",
     ["synthetic-records", "--config", "{config}", "--out-dir", "{work}/aggregate"]),
    *(("tables", f"table {n}", ["table", str(n), *INPUTS, "--out",
                                f"{{work}}/tables/table{n}.tex"]) for n in range(1, 8)),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--work", type=Path, help="output folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as tmp:
        work = args.work or Path(tmp)
        fields = {"config": str(args.config.resolve()), "work": str(work),
                  "runs": str(work / "aggregate" / "runs.parquet"),
                  "epochs": str(work / "aggregate" / "epochs.parquet")}
        totals: dict[str, float] = defaultdict(float)
        for group, name, argv in STAGES:
            seconds = run_stage(argv, fields)
            totals[group] += seconds
            print(f"{name:<20} {seconds:7.2f} s", flush=True)
        print("-" * 30)
        for group, seconds in totals.items():
            print(f"{group + ' total':<20} {seconds:7.2f} s")
        analysis = sum(s for g, s in totals.items() if g != "records")
        print(f"{'analysis total':<20} {analysis:7.2f} s sequential, one process at a time "
              f"(target: tables + figures < 60 s on 2 cores)")


if __name__ == "__main__":
    main()
