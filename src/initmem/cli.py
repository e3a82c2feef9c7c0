"""Command line: `initmem COMMAND ...` (or `python -m initmem`), one command per stage.

The commands in the order of the data's path: plan (grid, cost), training (train),
records (aggregate, archive, verify, synthetic-records), analysis (table, figure, macros,
scorecard, claims), the paper and its HTML report. Each command module provides
`configure_parser(parser)` and `main(args)`; only the chosen module is imported, so `train`
does not pay for matplotlib and `figure` not for torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from initmem.errors import InputError, describe_os_error
from initmem.markup import InertStream, terminal

INPUT_EXIT = 2  # bad input: argparse's status for bad arguments
IO_EXIT = 74  # EX_IOERR: a read or write failed (full disk, read-only folder, missing file)

# command -> (module, help), by stage in the order of the data's path
STAGES: dict[str, dict[str, tuple[str, str]]] = {
    "plan": {"grid": ("plan.grid", "expand a config into its runs and packs"),
             "cost": ("plan.cost", "project the GPU-hours of a config"),
             "slurm-profile": ("plan.slurm_profile", "install the SLURM profile once: "
                               "then `snakemake --profile slurm all`"),
             "results": ("plan.results", "check that results/ holds this config's outputs "
                         "or none")},
    "training": {"train": ("training.command", "train one pack of runs from a spec file"),
                 "cifar10-copy": ("training.cifar_copy", "build the offline CIFAR-10 copy "
                                  "from ../shared, with the manifest that verifies it")},
    "records": {
        "aggregate": ("records.aggregate", "gather run records into runs/epochs tables"),
        "archive": ("records.archive", "pack or unpack the raw run records"),
        "verify": ("records.verify", "report damaged, missing and stale records of a config's "
                   "runs, in run folders or an archive"),
        "status": ("records.status", "a config's sweep while it trains: runs by state, "
                   "trainers, device-hours, ETA"),
        "tensorboard": ("records.tensorboard", "TensorBoard event files of run records or "
                        "an archive: learning curves, HParams"),
        "synthetic-records": ("records.synthetic", "generate plausible fake run records")},
    "analysis": {
        "table": ("analysis.tables", "render one of Tables 1-7 as LaTeX"),
        "figure": ("analysis.figures", "draw one of Figures 1-9"),
        "macros": ("analysis.macros", "write the numbers quoted in the paper's prose"),
        "scorecard": ("analysis.scorecard", "compare reproduced and published numbers"),
        "claims": ("analysis.claims_command", "judge the paper's claims on runs tables or "
                   "archives, or plan what a config can judge (--plan)")},
    "paper": {"paper": ("paper", "write the paper's run status, or build its PDF"),
              "report": ("paper.report", "the HTML report's pages, or check it in Chromium")},
}
COMMANDS = {name: (f"initmem.{module}", text)
            for commands in STAGES.values() for name, (module, text) in commands.items()}


def main(argv: list[str] | None = None) -> int:
    """Run `initmem COMMAND ...` (`argv`, default sys.argv[1:]): the command's exit status, or
    2 for bad input and 74 for a failed read or write, each said in one line."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="initmem", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # prints usage and the allowed commands, then exits
    module = importlib.import_module(COMMANDS[argv[0]][0])
    command = argparse.ArgumentParser(prog=f"initmem {argv[0]}",
                                      description=COMMANDS[argv[0]][1])
    module.configure_parser(command)
    args = command.parse_args(argv[1:])
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(sys.stdout), InertStream(sys.stderr)
    try:
        return _run(module, args, argv[0])
    finally:
        sys.stdout, sys.stderr = streams


def _run(module: object, args: argparse.Namespace, name: str) -> int:
    """The command's status; its bad input and failed reads or writes as one line each."""
    try:
        return int(module.main(args) or 0)
    except InputError as err:
        print(f"initmem {name}: error: {terminal(err)}", file=sys.stderr)
        return INPUT_EXIT
    except BrokenPipeError:  # the reader left (`| head`): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:
        print(f"initmem {name}: error: {terminal(describe_os_error(err))}", file=sys.stderr)
        return IO_EXIT
