"""The paper's ResNet-9 (DAWNBench): prep 64; 128 + max-pool + residual; 256 + max-pool;
512 + max-pool + residual; every conv 3x3 -> norm (the declaration's: BatchNorm or
LayerNorm) -> ReLU; a residual is x + f(x), no activation after the sum."""

from __future__ import annotations

from typing import Any

from initmem.plan.bodies import Conv, channels

CHANNELS = (64, 128, 256, 512)  # at width 1 (the paper's)


def convs(arch: Any, width: float) -> tuple[list[Conv], int]:
    """(c_in, c_out, kernel, normalised) of every conv in creation order (all 3x3, normalised),
    and the features before the dense layer."""
    c64, c128, c256, c512 = (channels(c, width) for c in CHANNELS)
    shapes = [(3, c64), (c64, c128), (c128, c128), (c128, c128), (c128, c256), (c256, c512),
              (c512, c512), (c512, c512)]
    return [(c_in, c_out, 3, True) for c_in, c_out in shapes], c512


def build(kit: Any, n: int, arch: Any, width: float) -> tuple[Any, int]:
    """The packed body for n runs, normalised as the declaration says, and its features."""
    c64, c128, c256, c512 = (channels(c, width) for c in CHANNELS)

    def block(c_in: int, c_out: int) -> Any:
        return kit.conv_norm(n, c_in, c_out, arch.normalisation)

    body = kit.sequential(
        block(3, c64),
        block(c64, c128), kit.max_pool(2),
        kit.residual(block(c128, c128), block(c128, c128)),
        block(c128, c256), kit.max_pool(2),
        block(c256, c512), kit.max_pool(2),
        kit.residual(block(c512, c512), block(c512, c512)),
    )
    return body, c512


def keras(net: Any, layers: Any, x: Any, arch: Any) -> Any:
    """The Keras twin on input x: `build`'s layers in order, global pooling, the dense layer."""
    c64, c128, c256, c512 = (net.channels(c) for c in CHANNELS)
    x = net.conv_norm(x, c64)
    x = layers.MaxPooling2D(2)(net.conv_norm(x, c128))
    x = layers.Add()([x, net.conv_norm(net.conv_norm(x, c128), c128)])
    x = layers.MaxPooling2D(2)(net.conv_norm(x, c256))
    x = layers.MaxPooling2D(2)(net.conv_norm(x, c512))
    x = layers.Add()([x, net.conv_norm(net.conv_norm(x, c512), c512)])
    pooled = (layers.GlobalMaxPooling2D() if arch.pooling == "max"
              else layers.GlobalAveragePooling2D())
    return net.dense(pooled(x))
