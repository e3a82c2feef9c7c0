"""The `cifar10-copy` command: the offline CIFAR-10 copy built from ../shared, with its
manifest.

The team's builder (../shared/data/make_cifar10_batches.py) writes the torchvision layout
from JPEG files, so the copy cannot match the official MD5 sums. This command runs it,
checks every batch file's layout and writes the SHA-256 of each file to the copy's
manifest (data.MANIFEST): training then verifies the copy against it, without
--allow-unverified.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from initmem import checkout
from initmem.training import data

SHARED_BUILDER = checkout.SHARED / "data" / "make_cifar10_batches.py"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem cifar10-copy`."""
    parser.add_argument("root", type=Path, help="writes ROOT/cifar-10-batches-py/")
    parser.add_argument("--builder", type=Path, default=SHARED_BUILDER,
                        help=f"the builder script (default {SHARED_BUILDER})")


def main(args: argparse.Namespace) -> int:
    """`initmem cifar10-copy`: run the builder into ROOT, then write the copy's manifest."""
    if not args.builder.is_file():
        raise data.DataError(f"builder {args.builder} does not exist; give the path of "
                             "make_cifar10_batches.py with --builder")
    done = subprocess.run([sys.executable, str(args.builder), str(args.root)], check=False)
    if done.returncode:
        raise data.DataError(f"{args.builder} {args.root} failed with exit status "
                             f"{done.returncode} (its output above says why)")
    manifest = data.write_manifest(args.root / data.FOLDER, args.builder.name)
    print(f"{manifest}: the SHA-256 of the copy's {len(data.MD5)} files; training verifies "
          "the copy against it")
    return 0
