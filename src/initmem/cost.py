"""GPU time of packs: SLURM time limits, and the bill shown before a big launch on a CPU.

A rough model, not a measurement: one update of a pack costs STEP_OVERHEAD_S plus
n_runs x b images at SECONDS_PER_IMAGE[arch] (one H100-class GPU, width 1; the cost per
image scales with width^2), and each epoch evaluates validation and test images at a third
of the training cost per image. Time limits add SAFETY on top. Recalibrate the constants
from a real pack's wall_time_s when a GPU is at hand.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from pathlib import Path

from .spec import Pack, Recipe

SECONDS_PER_IMAGE = {"resnet9": 6e-5, "r9_avgpool": 6e-5, "resnet9_ln": 9e-5,
                     "resnet56": 5e-5, "resnet110": 1e-4}
STEP_OVERHEAD_S = 3e-3  # kernel launches and bookkeeping per update: dominates at b = 16
EVAL_IMAGES = 20_000  # validation + test, per run and epoch, without eval_subset
SAFETY = 1.5
CONFIRM_ABOVE_GPU_HOURS = 1.0  # a local launch without GPU beyond this needs confirming


def pack_seconds(pack: Pack) -> float:
    """Estimated GPU seconds to train every run of the pack, all epochs."""
    r = pack.recipe
    per_image = SECONDS_PER_IMAGE[r.arch] * r.width ** 2
    n = len(pack.runs)
    step = STEP_OVERHEAD_S + n * r.b * per_image
    evaluation = n * _eval_images(r) * per_image / 3
    return r.epochs * (r.steps_per_epoch * step + evaluation)


def _eval_images(recipe: Recipe) -> int:
    return 2 * recipe.eval_subset if recipe.eval_subset else EVAL_IMAGES


def runtime_minutes(pack: Pack, floor: int) -> int:
    """SLURM time limit of the pack's job: the estimate with a safety margin, at least floor."""
    return max(floor, math.ceil(SAFETY * pack_seconds(pack) / 60))


def gpu_hours(packs: Iterable[Pack]) -> float:
    return sum(pack_seconds(p) for p in packs) / 3600


def gpu_available() -> bool:
    """Whether this machine could train on a GPU (imports torch only when asked)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cpu_launch_warning(packs: list[Pack], confirmed: bool) -> str | None:
    """Why launching these packs here needs confirming (no GPU, more than an hour of GPU
    work), or None. The message says what it would cost and how to go ahead."""
    hours = gpu_hours(packs)
    if confirmed or hours <= CONFIRM_ABOVE_GPU_HOURS or gpu_available():
        return None
    runs = sum(len(p.runs) for p in packs)
    return (f"this machine has no GPU, and the workflow would train {runs:,} runs in "
            f"{len(packs):,} packs here: about {hours:,.0f} GPU-hours on one H100-class "
            "GPU, and many times that on this CPU. To train here anyway add "
            "`--config confirm_cpu_full=true`; to use a cluster add `--profile "
            "workflow/profiles/slurm`; to rebuild tables and figures without training "
            "add `--config archive=PATH` (a runs archive, `snakemake archive`).")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))


def run(args: argparse.Namespace) -> int:
    from .grid import load_config, make_packs

    config = load_config(args.config)
    packs = list(make_packs(config).values())
    print(f"{'family':<12} {'runs':>6} {'packs':>6} {'GPU-hours':>10} {'longest job':>12}")
    for fam in config["families"]:
        own = [p for p in packs if p.recipe.family == fam]
        longest = max(runtime_minutes(p, 1) for p in own) / 60
        print(f"{fam:<12} {sum(len(p.runs) for p in own):>6} {len(own):>6} "
              f"{gpu_hours(own):>10,.0f} {longest:>10.1f} h")
    print(f"{'total':<12} {sum(len(p.runs) for p in packs):>6} {len(packs):>6} "
          f"{gpu_hours(packs):>10,.0f}")
    return 0
