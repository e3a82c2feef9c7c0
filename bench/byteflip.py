"""Single-byte corruptions of record files and of a runs archive: caught, harmless or not.

    .venv/bin/python bench/byteflip.py [--positions 1500] [--seed 0]

Writes the records of config/test.yaml's runs (fake, 12 epochs each) and their runs
archive in a temporary folder, then for each of history.parquet, summary.parquet and the
archive XORs one byte at --positions random positions with a random non-zero mask and
reads it back as the pipeline does, each in a child process (tests/byte_flips.py says what
each outcome means). Targets: silent, unnamed and died all 0.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from byte_flips import OUTCOMES, flip_outcomes  # noqa: E402
from fakes import write_fake_run  # noqa: E402

from initmem.plan import grid  # noqa: E402
from initmem.records import archive  # noqa: E402

EPOCHS = 12


def sweep(kind: str, path: Path, positions: int, rng: random.Random) -> Counter:
    """Outcomes of `positions` random one-byte flips of `path`."""
    size = path.stat().st_size
    flips = [(rng.randrange(size), rng.randrange(1, 256)) for _ in range(positions)]
    return Counter(result for result, _ in flip_outcomes(kind, path, flips))


def targets(folder: Path) -> dict[str, tuple[str, Path]]:
    """name -> (reader kind, file) for a run's two record files and the archive."""
    config = grid.load_config(ROOT / "config" / "test.yaml")
    config["families"]["main"]["recipe"]["epochs"] = EPOCHS  # a history of more is refused
    runs = grid.expand_runs(config)
    for run in runs:
        write_fake_run(folder / "runs", run)
    tar = folder / "runs.tar"
    archive.pack(config, folder / "runs", tar)
    run_dir = folder / "runs" / runs[0].run_dir
    return {"history.parquet": ("run", run_dir / "history.parquet"),
            "summary.parquet": ("run", run_dir / "summary.parquet"),
            "runs.tar": ("archive", tar)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"{'file':<16} {'bytes':>7} " + " ".join(f"{o:>8}" for o in OUTCOMES) + "  seconds")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, path) in targets(Path(tmp)).items():
            start = time.perf_counter()
            counts = sweep(kind, path, args.positions, rng)
            print(f"{name:<16} {path.stat().st_size:>7} "
                  + " ".join(f"{counts[o]:>8}" for o in OUTCOMES)
                  + f"  {time.perf_counter() - start:7.1f}")
            bad += sum(counts[o] for o in OUTCOMES if o not in ("caught", "harmless"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
