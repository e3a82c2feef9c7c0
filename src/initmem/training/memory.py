"""A pack's memory, bounded from below before anything is allocated.

A width typed a few digits too long asks for 10^17 bytes; the bound turns that into one
line naming the width instead of an allocation failure deep in torch. It counts only
what training cannot do without (float32 weights, their gradients and two optimizer
moments, as Adam keeps), so a pack it passes may still run out of GPU memory: that case
trains as halves (command.halves_after_oom).
"""

from __future__ import annotations

import math
import os

import torch

from initmem.errors import InputError
from initmem.plan.spec import Recipe
from initmem.training.models import build_model, state_numel

FLOAT_BYTES = 4
STATE_COPIES = 4  # weights, gradients, and an optimizer's first and second moments


def parameter_count(recipe: Recipe, n_runs: int) -> float:
    """Parameters and persistent buffers of the recipe's network for n_runs, counted on
    the meta device (shapes only, no memory); inf when one tensor would pass torch's 2^63
    bytes."""
    try:
        with torch.device("meta"):
            model = build_model(recipe, n_runs)
    except RuntimeError:  # "Storage size calculation overflowed": no device holds it
        return math.inf
    return state_numel(model)


def least_bytes(recipe: Recipe, n_runs: int) -> float:
    """A lower bound of the memory n_runs of the recipe need to train."""
    return parameter_count(recipe, n_runs) * FLOAT_BYTES * STATE_COPIES


def device_bytes(device: torch.device) -> int:
    """The memory of the device: the GPU's, or the machine's physical memory on CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(recipe: Recipe, device: torch.device) -> None:
    """InputError naming the width when even one run cannot fit in the device's memory."""
    need, have = least_bytes(recipe, 1), device_bytes(device)
    if need > have:
        needed = _gib(need) if math.isinf(need) else f"at least {_gib(need)}"
        raise InputError(f"width={recipe.width:g} is not allowed on {device}: one run of "
                         f"{recipe.arch} at this width needs {needed} for its "
                         f"parameters and optimizer state, and {device} has {_gib(have)}; "
                         "width must be smaller (1 is the paper's network)")


def _gib(n: float) -> str:
    return "more than torch can address" if math.isinf(n) else f"{n / 2**30:.3g} GiB"
