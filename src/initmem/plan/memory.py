"""A run's memory, bounded from below from its recipe alone, and the plan's check of it.

A width typed a few digits too long asks for 10^17 bytes. The bound counts only what
training cannot do without (float32 weights, their gradients and two optimizer moments,
as Adam keeps), from the networks' layer shapes in closed form, so the plan refuses such
a width before any spec is written (`initmem grid`, the workflow's config check) and
`initmem train` refuses it against the device it runs on (training.memory). A run it
passes may still run out of GPU memory: that case trains as halves
(training.command.halves_after_oom). tests/test_models.py holds the count to the
networks that training builds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from initmem.errors import InputError
from initmem.plan.architectures import ARCHITECTURES
from initmem.plan.bodies import body_of
from initmem.plan.schema import ConfigError
from initmem.plan.spec import Recipe

FLOAT_BYTES = 4
STATE_COPIES = 4  # weights, gradients, and an optimizer's first and second moments
NUM_CLASSES = 10
# The memory of the device class a config's jobs take a GPU of: an H100-class GPU, the
# device the built-in cost model is of.
GPU_CLASS_BYTES = 80 * 2**30


def parameter_count(recipe: Recipe) -> int:
    """Parameters and buffers of one run of the recipe's network, from its body's convs
    (initmem.plan.bodies): each conv's kernel and bias; BatchNorm's gamma, beta and two
    moving statistics per channel of a normalised conv (LayerNorm: gamma and beta); the
    dense layer on the body's features."""
    arch = ARCHITECTURES[recipe.arch]
    convs, features = body_of(arch).convs(arch, recipe.width)
    per_channel = 2 if arch.normalisation == "layer" else 4
    kernels = sum(c_in * c_out * k * k + c_out for c_in, c_out, k, _ in convs)
    norms = per_channel * sum(c_out for _, c_out, _, normalised in convs if normalised)
    return kernels + norms + (features + 1) * NUM_CLASSES


def least_bytes(recipe: Recipe) -> float:
    """A lower bound of the memory one run of the recipe needs to train; inf for a width
    whose count no float holds."""
    try:
        return float(parameter_count(recipe) * FLOAT_BYTES * STATE_COPIES)
    except OverflowError:  # round() of an infinite channel count, or float() of a huge one
        return math.inf


def check_fits(recipe: Recipe, have: int, device: str, remedy: str = "") -> None:
    """InputError naming the width when even one run needs more than `have` bytes of
    `device`; `remedy` adds another way out than a smaller width."""
    need = least_bytes(recipe)
    if need > have:
        needed = "more than any device has" if math.isinf(need) else f"at least {gib(need)}"
        raise InputError(f"width={recipe.width:g} is not allowed on {device}: one run of "
                         f"{recipe.arch} at this width needs {needed} for its parameters "
                         f"and optimizer state, and {device} has {gib(have)}; width must be "
                         f"smaller (1 is the paper's network){remedy}")


def check_config(config: dict[str, Any], recipes: Iterable[Recipe]) -> None:
    """ConfigError naming the family of the first recipe that needs more than the memory
    of the device class the config trains on: an H100-class GPU where its jobs take a
    GPU, else the job's execution.mem_mb."""
    execution = config["execution"]
    if execution["device"] == "cpu" or execution["gpus_per_job"] == 0:
        have, device = execution["mem_mb"] * 2**20, "a CPU training job"
        remedy = f", or execution.mem_mb (now {execution['mem_mb']}) larger"
    else:
        have, device, remedy = GPU_CLASS_BYTES, "an H100-class GPU", ""
    for recipe in recipes:
        try:
            check_fits(recipe, have, device, remedy)
        except InputError as err:
            raise ConfigError(f"families.{recipe.family}: {err}") from None


def gib(n: float) -> str:
    """`n` bytes in GiB, to three digits."""
    return f"{n / 2**30:.3g} GiB"
