"""VGG with BatchNorm for CIFAR-10 (Simonyan & Zisserman 2015, configuration A with
BatchNorm after every conv, as CIFAR implementations build it): 3x3 conv -> BatchNorm ->
ReLU, max-pools where the configuration says, then one dense layer on the 512 features
(the global pooling of a 1x1 map is the identity). An extension the paper did not run,
and the example of a network family added by declaration only."""

from __future__ import annotations

from typing import Any

from initmem.errors import InputError
from initmem.plan.bodies import Conv, channels

POOL = "M"
# depth -> channels of each conv at width 1, POOL for a 2x2 max-pool
LAYOUTS = {11: (64, POOL, 128, POOL, 256, 256, POOL, 512, 512, POOL, 512, 512, POOL)}


def _layers(arch: Any, width: float) -> list[tuple[int, int] | str]:
    """(c_in, c_out) of each conv, POOL for each max-pool, in order."""
    if arch.depth not in LAYOUTS:
        raise InputError(f"arch {arch.name!r}: depth={arch.depth} is not allowed for a VGG; "
                         f"depth must be one of {', '.join(map(str, LAYOUTS))}")
    layers, c_in = [], 3
    for c in LAYOUTS[arch.depth]:
        layers.append(POOL if c == POOL else (c_in, channels(c, width)))
        c_in = c_in if c == POOL else channels(c, width)
    return layers


def convs(arch: Any, width: float) -> tuple[list[Conv], int]:
    """(c_in, c_out, kernel, normalised) of every conv in the configuration's order, and the
    features before the dense layer (the last conv's channels)."""
    shapes = [(c_in, c_out, 3, True) for c_in, c_out in
              (layer for layer in _layers(arch, width) if layer != POOL)]
    return shapes, shapes[-1][1]


def build(kit: Any, n: int, arch: Any, width: float) -> tuple[Any, int]:
    """The packed body for n runs (its convs and max-pools in order) and its features."""
    layers = [kit.max_pool(2) if layer == POOL
              else kit.conv_norm(n, *layer, arch.normalisation)
              for layer in _layers(arch, width)]
    return kit.sequential(*layers), convs(arch, width)[1]


def keras(net: Any, layers: Any, x: Any, arch: Any) -> Any:
    """The Keras twin on input x: `build`'s layers in order, global pooling, the dense layer."""
    for layer in _layers(arch, net.width):
        x = layers.MaxPooling2D(2)(x) if layer == POOL else net.conv_norm(x, layer[1])
    pooled = (layers.GlobalMaxPooling2D() if arch.pooling == "max"
              else layers.GlobalAveragePooling2D())
    return net.dense(pooled(x))
