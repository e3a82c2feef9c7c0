"""`initmem results --config FILE`: whether results/ holds this config's outputs (or none).

results/ holds one config's outputs at a time: the workflow writes the experiment part of
the config it ran to results/config.yaml. `make demo`, `make laptop` and `make report` ask
first, so that the tables of one config never sit beside another's PDF and report.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from initmem import checkout
from initmem.errors import InputError
from initmem.plan.grid import experiment_config, load_config
from initmem.plan.inputs import parse_yaml


def check(config_path: Path, root: Path) -> str:
    """What results/ holds, in words; InputError when it is another config's."""
    written = root / "config.yaml"
    if not written.exists():
        return f"{root}/ holds no config's outputs yet"
    if parse_yaml(written.read_text(), written) != experiment_config(load_config(config_path)):
        raise InputError(f"{root}/ holds the outputs of another config than {config_path} "
                         f"({written} differs): run `make clean` first (it keeps "
                         f"{root}/laptop/), or move {root}/ away")
    return f"{root}/ holds {config_path}'s outputs"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem results`."""
    parser.add_argument("--config", type=Path, required=True, help="the config to run")
    parser.add_argument("--root", type=Path, default=checkout.RESULTS)


def main(args: argparse.Namespace) -> int:
    """`initmem results`: say what results/ holds; InputError when it is another config's."""
    print(check(args.config, args.root))
    return 0
