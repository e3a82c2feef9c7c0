"""Command line: `python -m initmem COMMAND ...`, one command per pipeline stage.

Each stage module provides `configure_parser(parser)` and `run(args)`; only the chosen
module is imported, so `train` does not pay for matplotlib and `figure` not for torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import InputError

COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("initmem.run_pack", "train one pack of runs from a spec file"),
    "grid": ("initmem.grid", "expand a config into its runs and packs"),
    "aggregate": ("initmem.aggregate", "gather run records into runs/epochs tables"),
    "archive": ("initmem.archive", "pack or unpack the raw run records"),
    "table": ("initmem.tables", "render one of Tables 1-7 as LaTeX"),
    "figure": ("initmem.figures", "draw one of Figures 1-9"),
    "macros": ("initmem.macros", "write the numbers quoted in the paper's prose"),
    "scorecard": ("initmem.scorecard", "compare reproduced and published numbers"),
    "synthetic-records": ("initmem.synthetic", "generate plausible fake run records"),
    "cost": ("initmem.cost", "project the GPU-hours of a config"),
}


def main(argv: list[str] | None = None) -> int:
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
    try:
        return int(module.run(args) or 0)
    except InputError as err:
        print(f"initmem {argv[0]}: error: {err}", file=sys.stderr)
        return 2
