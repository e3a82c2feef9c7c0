"""Fuzz every reader a stranger's file reaches, for longer than make test does.

    nice -n 10 .venv/bin/python bench/fuzz.py [--seconds 60] [--readers archive,heartbeat]
        [--findings DIR]

For each reader of tests/fuzz_readers.py (archive, summary, history, heartbeat,
checkpoint, config, spec), draws inputs from its strategies for --seconds, each read in a
child under 5 s and 1 GB, and prints the cases tried, how many read and how many were
refused, and every finding (another exception, a hang, a dead child), the input saved
under --findings. Exit status 1 when there is a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzz_readers import READ, READERS, REFUSED, Outcome, check  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

BATCH = 50  # examples per hypothesis run; runs repeat until the reader's time is up


def fuzz(name: str, seconds: float, findings: Path) -> Counter:
    """Outcomes of `name`'s cases tried for `seconds`; each finding printed and saved."""
    reader, counts = READERS[name], Counter()
    found: list[tuple[Outcome, bytes]] = []

    @settings(max_examples=BATCH, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(reader.inputs())
    def one(data: bytes) -> None:
        outcome = check(reader, data)
        counts[outcome.kind] += 1
        if outcome.kind not in (READ, REFUSED):
            found.append((outcome, data))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        one()
    for outcome, data in found:
        path = findings / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}"
        findings.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"  finding: {name} {outcome.kind} ({path}): {outcome.detail[-400:]}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="per reader")
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--findings", type=Path, default=Path("/tmp/initmem-fuzz-findings"))
    args = parser.parse_args()
    total = Counter()
    for name in args.readers.split(","):
        started = time.monotonic()
        counts = fuzz(name, args.seconds, args.findings)
        total.update(counts)
        tried = sum(counts.values())
        print(f"{name:<10} {tried:>6} cases in {time.monotonic() - started:.0f} s: "
              f"{counts[READ]} read, {counts[REFUSED]} refused, "
              f"{tried - counts[READ] - counts[REFUSED]} findings", flush=True)
    bad = sum(total.values()) - total[READ] - total[REFUSED]
    print(f"all        {sum(total.values()):>6} cases: {bad} findings")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
