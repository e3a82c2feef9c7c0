"""Other processes' share of the CPUs, so that timings on a shared machine can be trusted.

Linux only (/proc/stat); elsewhere the share is unknown (None) and nothing waits.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
QUIET_SHARE = 0.05  # others may use at most this fraction of all cores during a measurement


def machine_cpu_s() -> float | None:
    """CPU seconds every process has used since boot (not idle, not I/O wait), or None."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the stages that
    run `python -m initmem` or snakemake wait for them)."""
    return sum(u.ru_utime + u.ru_stime for u in map(
        resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


def others_share(fn: Callable[[], T]) -> tuple[T, float | None]:
    """fn's result, and the fraction of all cores other processes used while it ran."""
    machine, own, start = machine_cpu_s(), own_cpu_s(), time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    after = machine_cpu_s()
    if machine is None or after is None or wall <= 0:
        return result, None
    others = (after - machine) - (own_cpu_s() - own)
    return result, max(others, 0.0) / (wall * (os.cpu_count() or 1))


def wait_until_quiet(poll_s: float = 3.0, timeout_s: float = 3600.0) -> None:
    """Return once other processes use under QUIET_SHARE of the cores over poll_s seconds
    (or when the share is unknown, or after timeout_s)."""
    deadline, said = time.monotonic() + timeout_s, 0.0
    while time.monotonic() < deadline:
        _, share = others_share(lambda: time.sleep(poll_s))
        if share is None or share < QUIET_SHARE:
            return
        if time.monotonic() - said > 60:  # a line a minute, so a wait never looks hung
            print(f"waiting for a quiet machine: other processes use {share:.0%} of the cores "
                  f"(waiting for under {QUIET_SHARE:.0%})", file=sys.stderr, flush=True)
            said = time.monotonic()
