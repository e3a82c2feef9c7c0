"""The whole Keras differential matrix of tests/test_keras_networks.py, with its numbers.

Every network x optimizer (CI runs a subset), float64, 3 updates, pack of 2 at sigma_w
0.1 and 2.5, eager step path: prints the worst |ours - Keras| of any weight or BatchNorm
statistic (relative to that tensor's largest entry), the worst relative loss difference,
the tolerance the test holds it to, and the CPU seconds of each case.

    OMP_NUM_THREADS=1 .venv/bin/python bench/keras_matrix.py [--width 1.0] [--arch resnet20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torchvision.datasets  # noqa: F401  (before TensorFlow: see tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import test_keras_networks as t  # noqa: E402
import torch  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=float, default=None,
                        help="channel width of every network (default: the test's)")
    parser.add_argument("--arch", nargs="+", choices=t.ARCHS, default=t.ARCHS,
                        help="these networks only (default: every one of the matrix)")
    args = parser.parse_args(argv)
    if args.width is not None:
        t.WIDTHS.update(dict.fromkeys(t.WIDTHS, args.width))
    t.keras.config.set_floatx("float64")
    torch.set_default_dtype(torch.float64)
    print("| network | width | optimizer | weights | losses | tolerance | CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for arch in args.arch:
        for case in filter(lambda c: t.compared(arch, c), t.CASES):
            cpu = time.process_time()
            initial, expected, keras_losses, rates = t.keras_trajectory(arch, case)
            got, losses = t.our_trajectory(arch, case, initial, rates, t.PATHS["eager"])
            tol = t.tolerance(case)
            print(f"| {arch} | {t.WIDTHS[arch]:g} | {case} | {t.worst(expected, got):.2g} | "
                  f"{np.abs(losses / keras_losses - 1).max():.2g} | {tol:g} | "
                  f"{time.process_time() - cpu:.0f} |", flush=True)


if __name__ == "__main__":
    main()
