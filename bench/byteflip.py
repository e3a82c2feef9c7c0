"""Single-byte corruptions of record files and of a runs archive: caught, harmless or silent.

    .venv/bin/python bench/byteflip.py [--positions 1500] [--seed 0]

Writes the records of config/test.yaml's runs (fake, 12 epochs each) and their runs
archive in a temporary folder, then for each of history.parquet, summary.parquet and the
archive XORs one byte at --positions random positions with a random non-zero mask and
reads it back as the pipeline does (read_records; read_archive). Each flip is
    caught     RecordError naming the file
    harmless   read back equal to the original (padding, statistics nothing reads)
    silent     read back different without an error: the target is 0
    crash      an error that does not name the file: the target is 0
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import write_fake_run  # noqa: E402

from initmem.plan import grid  # noqa: E402
from initmem.records import archive  # noqa: E402
from initmem.records.files import RecordError, read_records  # noqa: E402

EPOCHS = 12
OUTCOMES = ("caught", "harmless", "silent", "crash")


def sweep(path: Path, read: Callable[[], list[pd.DataFrame]], positions: int,
          rng: random.Random) -> Counter:
    """Outcomes of `positions` random one-byte flips of `path`, each undone after."""
    original, data = read(), path.read_bytes()
    outcomes: Counter = Counter()
    for _ in range(positions):
        position, mask = rng.randrange(len(data)), rng.randrange(1, 256)
        path.write_bytes(data[:position] + bytes([data[position] ^ mask]) + data[position + 1:])
        try:
            got = read()
        except RecordError as err:
            outcomes["caught" if str(path) in str(err) else "crash"] += 1
        except Exception:  # noqa: BLE001 (counted: a reader must name the file)
            outcomes["crash"] += 1
        else:
            same = all(g.equals(o) for g, o in zip(got, original, strict=True))
            outcomes["harmless" if same else "silent"] += 1
    path.write_bytes(data)
    return outcomes


def targets(folder: Path) -> dict[str, tuple[Path, Callable[[], list[pd.DataFrame]]]]:
    """name -> (file, its reader) for a run's two record files and the archive."""
    config = grid.load_config(ROOT / "config" / "test.yaml")
    config["families"]["main"]["recipe"]["epochs"] = EPOCHS  # a history of more is refused
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(folder / "runs", run)
    tar = folder / "runs.tar"
    archive.pack(config, folder / "runs", tar)
    run_dir = folder / "runs" / runs[0].run_dir

    def records() -> list[pd.DataFrame]:
        return list(read_records(run_dir))

    return {"history.parquet": (run_dir / "history.parquet", records),
            "summary.parquet": (run_dir / "summary.parquet", records),
            "runs.tar": (tar, lambda: [t.to_pandas() for t in archive.read_archive(tar)])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{'file':<16} {'bytes':>7} " + " ".join(f"{o:>8}" for o in OUTCOMES) + "  seconds")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, read) in targets(Path(tmp)).items():
            start = time.perf_counter()
            counts = sweep(path, read, args.positions, rng)
            print(f"{name:<16} {path.stat().st_size:>7} "
                  + " ".join(f"{counts[o]:>8}" for o in OUTCOMES)
                  + f"  {time.perf_counter() - start:7.1f}")
            bad += counts["silent"] + counts["crash"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
