"""Network families, each declared once, in its own module: `<body>.py` here is the body
an Architecture names (`body: <body>`; initmem.plan.architectures). Torch-free, so the
plan reads it; each module holds, in one place:

    convs(arch, width)    (c_in, c_out, kernel, normalised) of every conv in creation order,
                          and the features before the dense layer: the parameter count
                          (initmem.plan.memory) follows from it
    build(kit, n, arch, width)
                          the packed body for n runs and its features, composed of the
                          layers `kit` offers (initmem.training.models.LAYERS: passed in,
                          so planning never loads torch)
    keras(net, layers, x, arch)
                          its Keras twin on input x, from the tests' builder `net` and
                          keras.layers (tests/keras_networks.py), creating its weighted
                          layers in `build`'s order; or None, with NO_KERAS_TWIN saying
                          why (the Keras reference tests then skip it)

An Architecture whose body has no module here is refused in one line wherever it is
used (body_of): never a fallback to another network.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from types import ModuleType

from initmem.errors import InputError

BODY_DIR = Path(__file__).resolve().parent
Conv = tuple[int, int, int, bool]  # c_in, c_out, kernel, followed by a normalisation


def channels(c: int, width: float) -> int:
    """A layer's channels at the width multiplier (at least one)."""
    return max(1, round(c * width))


@cache
def bodies() -> dict[str, ModuleType]:
    """body -> its module, in name order; InputError naming a module that does not
    declare what a family declares."""
    names = sorted(p.stem for p in BODY_DIR.glob("*.py") if not p.stem.startswith("_"))
    return {name: _checked(importlib.import_module(f"{__name__}.{name}")) for name in names}


def _checked(module: ModuleType) -> ModuleType:
    missing = [f for f in ("convs", "build", "keras") if not hasattr(module, f)]
    if missing or (module.keras is None and not getattr(module, "NO_KERAS_TWIN", None)):
        raise InputError(f"{module.__file__}: {', '.join(missing) or 'NO_KERAS_TWIN'} "
                         "missing; a network family defines convs, build and keras (or "
                         "keras = None and NO_KERAS_TWIN, the reason)")
    return module


def body_of(arch: object) -> ModuleType:
    """The family module of an Architecture's body; InputError naming it when none is."""
    body = getattr(arch, "body", None)
    if body not in bodies():
        raise InputError(f"arch {getattr(arch, 'name', arch)!r} has body={body!r}, which is "
                         f"not allowed; body must be one of {', '.join(bodies())} "
                         f"(a module in {BODY_DIR})")
    return bodies()[body]
