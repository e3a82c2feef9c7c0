"""Idle core-time of a training sweep, read from Snakemake's own logs.

    python bench/idle_cores.py .snakemake/log/2026-...snakemake.log [more sittings' logs]

Each training job (rules train_*) holds its `threads` cores (1 unless the log says more)
from the time stamp before its block to the one before "Finished jobid". From the first
training start to the last training end of a log, the cores Snakemake was given ("Provided
cores") that held no training job are idle. A job still running where a log ends (a cut
sitting) counts until the log's last time stamp. Prints one line per log and the total:
wall time, core-time busy, core-time idle and its share.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
RULE = re.compile(r"^(?:local)?rule (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
THREADS = re.compile(r"^\s+threads: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")
CORES = re.compile(r"^Provided cores: (\d+)$")
TRAINING = "train_"


@dataclass
class Job:
    start: datetime
    end: datetime | None = None
    threads: int = 1


def training_jobs(lines: list[str]) -> tuple[int, list[Job], datetime | None]:
    """(cores provided, training jobs, last time stamp) of one log."""
    cores, stamp, last, rule, jobs = 1, None, None, None, {}
    for line in lines:
        if match := CORES.match(line):
            cores = int(match[1])
        elif match := STAMP.match(line):
            stamp = last = datetime.strptime(match[1], "%a %b %d %H:%M:%S %Y")
            rule = None  # a stamp opens each job's block
        elif match := RULE.match(line):
            rule = match[1]
        elif (match := JOBID.match(line)) and rule and rule.startswith(TRAINING):
            jobs[match[1]] = Job(stamp)
        elif (match := THREADS.match(line)) and rule and rule.startswith(TRAINING):
            jobs[list(jobs)[-1]].threads = int(match[1])
        elif (match := FINISHED.match(line)) and match[1] in jobs:
            jobs[match[1]].end = stamp
    return cores, list(jobs.values()), last


def idle(cores: int, jobs: list[Job], last: datetime) -> tuple[float, float, float]:
    """(wall s, busy core-s, idle core-s) from the first training start to the last end;
    cores busy at once are capped at the cores provided."""
    events = sorted([(j.start, j.threads) for j in jobs]
                    + [(j.end or last, -j.threads) for j in jobs])
    busy_s, held, previous = 0.0, 0, events[0][0]
    for when, change in events:
        busy_s += min(held, cores) * (when - previous).total_seconds()
        held, previous = held + change, when
    wall = (events[-1][0] - events[0][0]).total_seconds()
    return wall, busy_s, cores * wall - busy_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    totals = [0.0, 0.0, 0.0]
    for path in parser.parse_args().logs:
        cores, jobs, last = training_jobs(path.read_text().splitlines())
        if not jobs:
            print(f"{path}: no training job")
            continue
        figures = idle(cores, jobs, last)
        totals = [t + f for t, f in zip(totals, figures, strict=True)]
        print(_line(f"{path.name} ({len(jobs)} jobs, {cores} cores)", *figures))
    print(_line("total", *totals))


def _line(name: str, wall: float, busy: float, idle_s: float) -> str:
    share = idle_s / (busy + idle_s) if wall else 0.0
    return (f"{name}: wall {wall / 3600:.2f} h, busy {busy / 3600:.2f} core-h, "
            f"idle {idle_s / 3600:.2f} core-h ({100 * share:.1f}% of the cores' time)")


if __name__ == "__main__":
    main()
