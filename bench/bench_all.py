"""Every benchmark in one go, with one summary table against the targets.

    .venv/bin/python bench/bench_all.py --quick   # CI-sized training bench, ~3 min on 2 cores
    .venv/bin/python bench/bench_all.py           # the full CPU training bench (widths 1/8, 1/4)

Stages: training throughput, packed vs sequential (bench_training.py: its table and CSV);
`snakemake tables -n` of the paper's config (bench_dryrun.py, target < 5 s); aggregation of
6,250 runs x 300 epochs (bench_aggregate.py, < 30 s); every table, figure and prose stage
as the workflow runs them (bench_analysis.py, < 60 s on 2 cores). The summary goes to
stdout and to OUT_DIR/summary.csv; the training rows to OUT_DIR/training.csv. Each stage
notes the share of the cores other processes used meanwhile ("others"; bench/quiet.py):
above a few per cent its seconds are suspect. --wait-quiet waits for an idle machine
before each stage (and each training row).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from functools import partial
from pathlib import Path

import bench_aggregate
import bench_analysis
import bench_dryrun
import bench_training
import quiet

ROOT = Path(__file__).resolve().parents[1]


def training(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    sizing = ["--quick"] if args.quick else ["--widths", "0.125", "0.25"]
    rows = bench_training.main([*sizing, *(["--wait-quiet"] if args.wait_quiet else []),
                                "--device", args.device,
                                "--out", str(args.out_dir / "training.csv")])
    ratios = [r["packed_over_sequential"] for r in rows if r["N"] > 1]
    slower = [f"{r['arch']} b={r['b']} N={r['N']} w={r['width']:g} {r['path']}" for r in rows
              if r["N"] > 1 and r["packed_over_sequential"] < 1]
    return {"stage": f"training ({rows[0]['device']}, {len(rows)} rows)",
            "seconds": time.perf_counter() - start,
            "measured": f"packed/sequential {min(ratios):.2f}-{max(ratios):.2f}",
            "target": "packed >= sequential",
            "verdict": "ok" if not slower else "slower at " + "; ".join(slower)}


def dry_run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        timings = [bench_dryrun.dry_run_seconds(ROOT / "config.yaml", "tables", Path(workdir))
                   for _ in range(1 if args.quick else 3)]
    seconds = min(wall for wall, _, _ in timings)
    return {"stage": "dry run (snakemake tables -n)", "seconds": seconds,
            "measured": f"{timings[0][2]} jobs, {min(c for _, c, _ in timings):.1f} s CPU",
            "target": "< 5 s", "verdict": _within(seconds, 5)}


def aggregation(args: argparse.Namespace) -> dict:
    runs, epochs, seconds = bench_aggregate.aggregate_seconds(args.records)
    return {"stage": "aggregation", "seconds": seconds,
            "measured": f"{runs:,} runs, {epochs:,} epochs", "target": "< 30 s",
            "verdict": _within(seconds, 30)}


def analysis(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as work:
        timings = bench_analysis.time_stages(ROOT / "config.yaml", Path(work))
    stages = [s for group, _, s in timings if group != "records"]
    seconds = sum(stages)
    return {"stage": f"tables + figures + prose ({len(stages)})", "seconds": seconds,
            "measured": f"{bench_analysis.makespan(stages, 2):.1f} s on 2 workers",
            "target": "< 60 s", "verdict": _within(seconds, 60)}


def _within(seconds: float, target: float) -> str:
    return "ok" if seconds < target else f"over target by {seconds - target:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="CI-sized training bench and a single dry run")
    parser.add_argument("--wait-quiet", action="store_true",
                        help="wait for other processes to leave the CPUs idle before each "
                             "stage (on a shared machine)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--records", type=Path, default=Path("/tmp/initmem-bench-records"),
                        help="fake records for the aggregation bench (written once)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "results" / "bench")
    args = parser.parse_args()
    summary = []
    for stage in (training, dry_run, aggregation, analysis):
        if args.wait_quiet:
            quiet.wait_until_quiet()
        result, share = quiet.others_share(partial(stage, args))
        summary.append({**result, "others_cpu_share": share})
    print(f"\n{'stage':<34} {'seconds':>8}  {'measured':<32} {'target':<21} {'others':>6}  "
          "verdict")
    for s in summary:
        others = "?" if s["others_cpu_share"] is None else f"{s['others_cpu_share']:.0%}"
        print(f"{s['stage']:<34} {s['seconds']:>8.1f}  {s['measured']:<32} {s['target']:<21} "
              f"{others:>6}  {s['verdict']}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / "summary.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)


if __name__ == "__main__":
    main()
