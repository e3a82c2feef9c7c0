"""`initmem slurm-profile`: install this workflow's SLURM settings as the named profile
`slurm`, once per user, so that `snakemake --profile slurm all` works as typed.

Snakemake looks a profile name up in the working directory, then in the user's config
folder (`$XDG_CONFIG_HOME/snakemake`, by default `~/.config/snakemake` on Linux), then the
site's. The profile written there is `profiles/slurm/config.yaml` of this checkout plus
the site's account and partition as default resources of every job. An existing profile
that differs is kept unless `--force` says to replace it: it may be another workflow's.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import platformdirs
import yaml

from initmem.checkout import SLURM_TEMPLATE
from initmem.errors import InputError
from initmem.plan.inputs import load_yaml

TEMPLATE = SLURM_TEMPLATE
# SLURM account and partition names: letters, digits and _ . - (no spaces, no quotes)
SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def profile_dir(name: str = "slurm") -> Path:
    """Where Snakemake finds the user's profile `name` (the folder it searches after the
    working directory)."""
    return Path(platformdirs.user_config_dir("snakemake", "snakemake")) / name


def checked_name(value: str | None, what: str) -> str | None:
    """`value` if it is a SLURM `what` name (account, partition) or None; else InputError."""
    if value is not None and not SLURM_NAME.fullmatch(value):
        raise InputError(f"{what}={value!r} is not allowed; a SLURM {what} name is letters, "
                         "digits, '_', '.' and '-'")
    return value


def profile_text(template: Path, account: str | None, partition: str | None) -> str:
    """The profile: the template's settings with the site's resources added."""
    settings = load_yaml(template, "SLURM profile template")
    resources = dict(settings.get("default-resources") or {})
    for key, value in (("slurm_account", account), ("slurm_partition", partition)):
        if value is not None:
            resources[key] = value
    settings["default-resources"] = resources
    header = (f"# Written by `initmem slurm-profile` from {template}.\n"
              "# Rerun it (with --force) to change the account or partition.\n")
    return header + yaml.safe_dump(settings, sort_keys=False)


def install(dest: Path, text: str, force: bool) -> str:
    """Write the profile's config.yaml; what happened, in words."""
    target = dest / "config.yaml"
    if target.exists():
        if target.read_text() == text:
            return f"{target} is already this profile; left unchanged"
        if not force:
            raise InputError(f"{target} exists and differs from the profile to write; "
                             "keep it, or pass --force to replace it (with make: "
                             "make slurm-profile ... FORCE=1)")
    dest.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return f"wrote {target}"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem slurm-profile`."""
    parser.add_argument("--account", help="SLURM account every job is charged to")
    parser.add_argument("--partition", help="SLURM partition of the GPU nodes")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing profile that differs")
    parser.add_argument("--dest", type=Path, default=None,
                        help="profile folder (default: the user's snakemake/slurm, "
                             f"here {profile_dir()})")
    parser.add_argument("--template", type=Path, default=TEMPLATE,
                        help="settings to install (default: %(default)s)")


def main(args: argparse.Namespace) -> int:
    """`initmem slurm-profile`: install the profile, print it, and say what to run next."""
    text = profile_text(args.template, checked_name(args.account, "account"),
                        checked_name(args.partition, "partition"))
    print(install(args.dest or profile_dir(), text, args.force))
    print(text, end="")
    if args.account is None or args.partition is None:
        unset = [f"--{k}" for k in ("account", "partition") if getattr(args, k) is None]
        print(f"note: no {' or '.join(unset)}: jobs go to the cluster's default account and "
              "partition; to set them, rerun with them and --force (make slurm-profile "
              "ACCOUNT=... PARTITION=... FORCE=1)", file=sys.stderr)
    print("now run, from this checkout: snakemake --profile slurm all")
    return 0
