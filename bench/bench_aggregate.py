"""Seconds to aggregate the main grid: 6,250 runs x 300 epochs of record files.

    .venv/bin/python bench/bench_aggregate.py [--root /tmp/initmem-bench-records]

Writes fake records for the main family of config.yaml under --root once (reused on later
calls), then times initmem.aggregate reading them and writing runs.parquet and
epochs.parquet. The target is < 30 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import write_fake_run  # noqa: E402

from initmem.plan import grid  # noqa: E402
from initmem.records import aggregate  # noqa: E402


def aggregate_seconds(root: Path) -> tuple[int, int, float]:
    """(runs, epoch rows, seconds) of aggregating the main family's fake records under root
    (written first where missing; that is not timed)."""
    runs = grid.family_runs(grid.load_config(ROOT / "config.yaml"), "main")
    todo = [r for r in runs if not (root / r.run_dir / "summary.parquet").exists()]
    if todo:
        start = time.perf_counter()
        for run in todo:
            write_fake_run(root, run)
        print(f"wrote {len(todo)} fake runs in {time.perf_counter() - start:.0f} s")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        table, epochs = aggregate.aggregate(runs, *aggregate.read_folder_records(root, runs))
        aggregate.write_tables(table, epochs, Path(out) / "runs.parquet",
                               Path(out) / "epochs.parquet")
        return len(table), epochs.num_rows, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/initmem-bench-records"))
    args = parser.parse_args()
    runs, epochs, seconds = aggregate_seconds(args.root)
    print(f"aggregated {runs} runs, {epochs:,} epochs in {seconds:.1f} s (target < 30 s)")

if __name__ == "__main__":
    main()
