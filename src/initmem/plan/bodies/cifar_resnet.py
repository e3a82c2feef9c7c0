"""He et al.'s CIFAR ResNet of depth 6n + 2 (16-32-64 channels, BatchNorm), as Keras'
resnet_v1 example builds it: conv-BN-ReLU, then n blocks per stage of conv-BN-ReLU-conv-BN
+ shortcut, ReLU; the shortcut is a 1x1 conv (no BN) where a block strides or widens."""

from __future__ import annotations

from typing import Any

from initmem.plan.bodies import Conv, channels

CHANNELS = (16, 32, 64)  # at width 1 (the paper's)


def _blocks(arch: Any, width: float) -> list[tuple[int, int, int]]:
    """(c_in, c_out, stride) of every block."""
    stages = [channels(c, width) for c in CHANNELS]
    blocks, c_in = [], stages[0]
    for stage, c_out in enumerate(stages):
        for block in range((arch.depth - 2) // 6):
            blocks.append((c_in, c_out, 2 if stage > 0 and block == 0 else 1))
            c_in = c_out
    return blocks


def convs(arch: Any, width: float) -> tuple[list[Conv], int]:
    """(c_in, c_out, kernel, normalised) of every conv in creation order, the 1x1 shortcuts
    included, and the features before the dense layer."""
    first = channels(CHANNELS[0], width)
    shapes: list[Conv] = [(3, first, 3, True)]
    for c_in, c_out, stride in _blocks(arch, width):
        shapes += [(c_in, c_out, 3, True), (c_out, c_out, 3, True)]
        shapes += [(c_in, c_out, 1, False)] if stride != 1 or c_in != c_out else []
    return shapes, shapes[-1][1]


def build(kit: Any, n: int, arch: Any, width: float) -> tuple[Any, int]:
    """The packed body for n runs (the first conv, then the basic blocks) and its features."""
    first = channels(CHANNELS[0], width)
    blocks = _blocks(arch, width)
    layers = [kit.conv_norm(n, 3, first, "batch"),
              *(kit.basic_block(n, c_in, c_out, stride) for c_in, c_out, stride in blocks)]
    return kit.sequential(*layers), blocks[-1][1]


def keras(net: Any, layers: Any, x: Any, arch: Any) -> Any:
    """Keras' resnet_v1 example (its 'he_normal' init replaced by the paper's)."""
    filters = net.channels(CHANNELS[0])
    x = net.conv_norm(x, filters)
    for stack in range(3):
        for block in range(arch.depth // 6):  # (depth - 2) / 6 blocks per stack
            stride = 2 if stack > 0 and block == 0 else 1
            y = net.conv_norm(x, filters, stride=stride)
            y = net.conv_norm(y, filters, relu=False)
            if stride == 2:  # linear projection shortcut: 1x1 conv, no BN, no activation
                x = net.conv(x, filters, kernel=1, stride=stride)
            x = layers.ReLU()(layers.Add()([x, y]))
        filters *= 2
    x = layers.GlobalAveragePooling2D()(x)  # AveragePooling2D(8) + Flatten on 8x8 maps
    return net.dense(x)
