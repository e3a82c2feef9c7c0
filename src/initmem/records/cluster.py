"""What SLURM says: the job this process runs in, and a snapshot of the cluster's jobs
and nodes, by which a heartbeat from another host is judged (records.heartbeat).

A snapshot asks at most two commands, and only when first consulted: `squeue -h -a -o
'%i|%T|%N'` (every user's jobs: id, state, compressed node list) and `sinfo -h -N -o
'%N|%T'` (each node's state). A job's node list is expanded (`scontrol show hostnames`)
only when it is consulted and compressed (`gpu[1-3]`). Where squeue is missing, fails or
times out, SLURM's answer is unknown (None) and heartbeats are judged by their age alone;
where only sinfo or scontrol fails, the rules that need it are left out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cached_property

TIMEOUT_S = 20.0  # a controller that does not answer in this long counts as absent
RUNNING = "RUNNING"
SQUEUE = ["squeue", "-h", "-a", "-o", "%i|%T|%N"]
SINFO = ["sinfo", "-h", "-N", "-o", "%N|%T"]


def ask(command: list[str]) -> str | None:
    """A SLURM command's output; None when it is not installed, fails or times out."""
    if shutil.which(command[0]) is None:
        return None
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):  # no controller, no accounting
        return None


@dataclass(frozen=True)
class Job:
    """The SLURM job a process runs in, from the environment SLURM gives it."""

    id: str
    node: str | None  # SLURMD_NODENAME: the node as SLURM names it (may not be the hostname)
    restarts: int  # SLURM_RESTART_COUNT: how often it was requeued (0: first start)


def this_job() -> Job | None:
    """The SLURM job of this process, or None outside SLURM."""
    job_id = os.environ.get("SLURM_JOB_ID") or None
    if job_id is None:
        return None
    restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
    return Job(job_id, os.environ.get("SLURMD_NODENAME") or None,
               int(restarts) if restarts.isdigit() else 0)


def job_id() -> str | None:
    """SLURM_JOB_ID, or None outside SLURM."""
    job = this_job()
    return None if job is None else job.id


class Snapshot:
    """The cluster's jobs and down nodes, asked on first use and then kept: one snapshot
    serves one decision (or one `initmem status`), however many heartbeats it judges."""

    def __init__(self) -> None:
        """A snapshot that has asked SLURM nothing yet."""
        self._expansions: dict[str, frozenset[str] | None] = {}

    @cached_property
    def jobs(self) -> dict[str, tuple[str, str]] | None:
        """Job id -> (state, compressed node list); None: SLURM's answer is unknown."""
        out = ask(SQUEUE)
        if out is None:
            return None
        jobs = {}
        for line in out.splitlines():
            job, state, nodes = (line.strip().split("|") + ["", ""])[:3]
            if job:
                jobs[job] = (state, nodes)
        return jobs

    @cached_property
    def down(self) -> frozenset[str] | None:
        """The nodes sinfo shows down (down, down*, down~...); None where it did not answer."""
        out = ask(SINFO)
        if out is None:
            return None
        return frozenset(node for node, _, state in (line.strip().partition("|")
                                                     for line in out.splitlines())
                         if state.lower().startswith("down"))

    def nodes(self, job: str) -> frozenset[str] | None:
        """The nodes a listed job runs on; None where its list does not expand."""
        compressed = self.jobs[job][1] if self.jobs and job in self.jobs else ""
        return self._expanded(compressed)

    def _expanded(self, compressed: str) -> frozenset[str] | None:
        if "[" not in compressed:
            return frozenset(n for n in compressed.split(",") if n)
        if compressed not in self._expansions:
            out = ask(["scontrol", "show", "hostnames", compressed])
            self._expansions[compressed] = None if out is None else frozenset(out.split())
        return self._expansions[compressed]
