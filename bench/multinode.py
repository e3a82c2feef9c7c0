"""Wall time of config/test.yaml's whole sweep on a two-node SLURM against a one-node one.

    .venv/bin/python bench/multinode.py [--repeats 2] [--wait-quiet]     (root)

Runs, as the README types it, `snakemake --profile slurm all --configfile
config/test.yaml` (plus the flags a cluster without accounting needs, and a 2 s first
status check so the plugin's polling adds little) in a fresh scratch folder, on
.ci/local_slurm.sh's one-node cluster and on its two-node one (`--nodes 2`), alternately,
and prints each wall time and the ratio of the medians. Both clusters share this
machine's cores (a two-node cluster halves each node's), so the ratio measures what two
nodes cost in overhead (namespaces, a second slurmd, jobs on both), not a speed-up. The
cluster this machine had before (one node, or none) is restored afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quiet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from workflow_helpers import TEST_CONFIG, scratch_checkout, typed  # noqa: E402

LOCAL_SLURM = str(ROOT / ".ci" / "local_slurm.sh")
SWEEP = ("snakemake --profile slurm all --configfile config/test.yaml --slurm-no-account "
         "--slurm-status-command squeue --slurm-init-seconds-before-status-checks 2")


def cluster(*args: str) -> None:
    subprocess.run([LOCAL_SLURM, *args], check=True, capture_output=True, text=True)


def single_node_up() -> bool:
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.split()) and \
        not done.stdout.startswith("imnode")


def sweep_seconds(nodes: int, folder: Path, env: dict[str, str]) -> float:
    """The sweep's wall time on a fresh cluster of `nodes` nodes, in a fresh folder."""
    cluster("stop")
    cluster("start", *(["--nodes", str(nodes)] if nodes > 1 else []))
    checkout = scratch_checkout(folder, TEST_CONFIG)
    start = time.monotonic()
    done = typed(SWEEP, checkout, env, timeout=1800)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"the sweep failed on {nodes} node(s):\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--wait-quiet", action="store_true",
                        help="wait until other processes leave the cores idle first")
    args = parser.parse_args(argv)
    restore = single_node_up()
    seconds: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        env = {"XDG_CONFIG_HOME": f"{tmp}/xdg"}
        typed("initmem slurm-profile", ROOT, env)
        try:
            for i in range(args.repeats):
                for nodes in (1, 2):
                    if args.wait_quiet:
                        quiet.wait_until_quiet()
                    seconds[nodes].append(sweep_seconds(nodes, Path(tmp) / f"{nodes}-{i}", env))
                    print(f"{nodes} node(s), run {i + 1}: {seconds[nodes][-1]:.1f} s", flush=True)
        finally:
            cluster("stop")
            if restore:
                cluster("start")
    one, two = (statistics.median(seconds[n]) for n in (1, 2))
    print(f"median wall: 1 node {one:.1f} s, 2 nodes {two:.1f} s; 2-node / 1-node = "
          f"{two / one:.2f} (the nodes share this machine's cores: overhead, not speed-up)")


if __name__ == "__main__":
    main()
