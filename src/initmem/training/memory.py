"""The memory of the device training runs on, against the plan's lower bound of a run's
(plan.memory): `initmem train` refuses a width that cannot fit before allocating anything.
"""

from __future__ import annotations

import os

import torch

from initmem.plan import memory
from initmem.plan.spec import Recipe


def device_bytes(device: torch.device) -> int:
    """The memory of the device: the GPU's, or the machine's physical memory on CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(recipe: Recipe, device: torch.device) -> None:
    """InputError naming the width when even one run cannot fit in the device's memory."""
    memory.check_fits(recipe, device_bytes(device), str(device))
