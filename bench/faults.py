"""The fault matrix: each fault of a cluster at each phase of a training job, on
.ci/local_slurm.sh's two-node cluster, through the named profile (tests/cluster_faults.py
says what each fault and phase is and how each column is measured).

    .venv/bin/python bench/faults.py [--faults F ...] [--phases P ...] [--epochs 120]
                                     [--markdown results/faults.md]      (root)

Each row is a fresh sweep of config/test.yaml's two packs (SGD, Adam) at --epochs,
faulted once at the phase's first sight; its columns: whether the phase was caught, the
final records against the same config trained here without faults (equal to the last
bit, less where and when they were made), finished records that vanished at any moment
(watched every 20 ms), whole epochs of the faulted pack trained twice, and the sweep's
exit status (of the rerun too, where the fault reruns it). A row takes 2 to 4 minutes;
the 25 about an hour and a half on two quiet cores. The cluster this machine had before
(one node, or none) is restored afterwards.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from cluster_faults import (  # noqa: E402
    AGGREGATE,
    FAULTS,
    PHASES,
    checkout_with,
    inject,
    local_slurm,
    sweep_config,
)
from workflow_helpers import typed  # noqa: E402

COLUMNS = ("fault", "phase", "caught", "records equal", "deleted", "epochs twice",
           "exit status", "wall s", "note")


def single_node_up() -> bool:
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.split()) and \
        not done.stdout.startswith("imnode")


def reference(where: Path, epochs: int) -> Path:
    """The config trained here in one go, without SLURM: what every row must equal."""
    checkout = checkout_with(where, sweep_config(epochs))
    done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), AGGREGATE,
                           "--cores", "2", "--configfile", "config/sweep.yaml"],
                          cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the reference did not train:\n{(done.stdout + done.stderr)[-3000:]}")
    return checkout


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument("--epochs", type=int, default=120)
    parser.add_argument("--markdown", type=Path, default=None,
                        help="also write the table here (docs/workflow.md's)")
    args = parser.parse_args(argv)
    restore = single_node_up()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"XDG_CONFIG_HOME": f"{tmp}/xdg"}
        typed("initmem slurm-profile", ROOT, env)
        golden = reference(Path(tmp) / "reference", args.epochs)
        try:
            local_slurm("stop")
            local_slurm("start", "--nodes", "2")
            for fault in args.faults:
                for phase in args.phases:
                    row = inject(fault, phase, Path(tmp) / f"{fault}-{phase}", golden, env,
                                 args.epochs)
                    rows.append([row.fault, row.phase, "yes" if row.caught else "no",
                                 "yes" if row.same_records else "NO", str(row.deleted),
                                 str(row.epochs_twice), row.exit_status,
                                 f"{row.wall_s:.0f}", row.note])
                    print("  ".join(rows[-1]), flush=True)
        finally:
            local_slurm("stop")
            if restore:
                local_slurm("start")
    table = markdown(rows)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    failed = [r for r in rows if r[2] == "yes" and (r[3] != "yes" or r[4] != "0" or
                                                   int(r[5]) not in (0, 1) or
                                                   any(s.split()[-1] != "0"
                                                       for s in r[6].split(", ")))]
    print(f"{len(rows)} rows, {sum(r[2] == 'yes' for r in rows)} caught, "
          f"{len(failed)} breaking a rule")


if __name__ == "__main__":
    main()
