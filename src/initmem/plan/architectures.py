"""The networks, each declared once: every stage reads its facts here (torch-free).

A network is a body of a declared family (initmem.plan.bodies: one module per family
holds its builder, its conv shapes, whence its parameter count, and its Keras twin):
    resnet9        the paper's ResNet-9 (64-128-256-512 channels; BatchNorm or LayerNorm)
    cifar_resnet   He et al.'s CIFAR ResNet of depth 6n + 2 (16-32-64 channels, BatchNorm)
    vgg            VGG with BatchNorm (depth 11), one dense layer
then a global pooling and a dense layer. Adding a network of a declared family is one
entry here (and its config entry); its parameter count, cost, labels, Table 5 row and
Figs. 5 and 7 curve follow (config/resnet20.yaml and tests/test_extension_network.py:
ResNet-20); a new family is its module in initmem/plan/bodies/ and an entry here (VGG-11).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

RESNET9, CIFAR_RESNET = "resnet9", "cifar_resnet"


@dataclass(frozen=True)
class Architecture:
    """A declared network: its body's family and depth, its labels and curve style, and what
    the cost model and the synthetic records assume of it."""
    name: str  # the config's `arch`
    label: str  # tables and figures
    body: str  # its family: a module of initmem.plan.bodies (RESNET9, CIFAR_RESNET, "vgg")
    depth: int  # 9, the CIFAR ResNet's 6n + 2, the VGG's configuration (11)
    layers: int  # weight layers the cost model counts (with a CIFAR ResNet's 1x1 shortcuts)
    normalisation: str = "batch"  # batch | layer
    pooling: str = "avg"  # the global pooling before the dense layer: avg | max
    macro: str | None = None  # its name in the paper's macros, where the paper quotes it
    gpu_seconds_per_image: float = 6e-5  # the built-in cost model's training step, width 1
    # the synthetic records' stand-ins: ||W_init||_F / sigma_w, test accuracy, and how far
    # below 1 the training accuracy plateaus at large sigma_w and full memory
    synthetic_norm_per_sigma: float = 47.0
    synthetic_accuracy: float = 0.85
    synthetic_plateau_drop: float = 0.0
    # the paper's depth study (Table 5's rows, Figs. 5 and 7's curves) shows it with or
    # without runs; any other network shows there when the config's depth family has it
    depth_study: bool = False
    colour: str = "#7f7f7f"  # its curve in Figs. 5 and 7
    linestyle: str = "-"
    cpu_channels_last: bool = False  # its CPU steps measured faster with NHWC activations


ARCHITECTURES = {a.name: a for a in (
    Architecture("resnet9", "ResNet-9", RESNET9, 9, 9, pooling="max", macro="ResNetNine",
                 synthetic_accuracy=0.88, depth_study=True, colour="#1f77b4",
                 cpu_channels_last=True),
    Architecture("r9_avgpool", "R9-AvgPool", RESNET9, 9, 9, synthetic_accuracy=0.82,
                 synthetic_plateau_drop=0.25, depth_study=True, colour="#17becf",
                 linestyle="--", cpu_channels_last=True),
    Architecture("resnet9_ln", "ResNet-9-LN", RESNET9, 9, 9, normalisation="layer",
                 pooling="max", gpu_seconds_per_image=9e-5, synthetic_accuracy=0.86,
                 colour="#9467bd"),
    # Not in the paper: the smallest of He et al.'s CIFAR ResNets (n = 3), declared here
    # and nowhere else. layers: 6n + 2 plus the two 1x1 shortcuts, as ResNet-56/110 count.
    # Step time: ResNet-56's scaled by layers (22/58 of 5e-5 s), unmeasured. Stand-ins:
    # ||W_init||_F / sigma_w is sqrt(sum of the kernels' output channels) = sqrt(794),
    # scaled as ResNet-56's (35 for sqrt(2,138)); accuracy a point above ResNet-56's (a
    # shallower net trains more easily without augmentation); the CIFAR ResNets' plateau.
    Architecture("resnet20", "ResNet-20", CIFAR_RESNET, 20, 22, gpu_seconds_per_image=2e-5,
                 synthetic_norm_per_sigma=21.0, synthetic_accuracy=0.81,
                 synthetic_plateau_drop=0.25, colour="#2ca02c"),
    Architecture("resnet56", "ResNet-56", CIFAR_RESNET, 56, 58, macro="ResNetFiftySix",
                 gpu_seconds_per_image=5e-5, synthetic_norm_per_sigma=35.0,
                 synthetic_accuracy=0.80, synthetic_plateau_drop=0.25, depth_study=True,
                 colour="#ff7f0e"),
    Architecture("resnet110", "ResNet-110", CIFAR_RESNET, 110, 112, macro="ResNetOneHundredTen",
                 gpu_seconds_per_image=1e-4, synthetic_norm_per_sigma=50.0,
                 synthetic_accuracy=0.79, synthetic_plateau_drop=0.25, depth_study=True,
                 colour="#d62728"),
    # Not in the paper: VGG-11 with BatchNorm, a network family of its own (plan/bodies/
    # vgg.py). 9,231,114 trainable parameters at width 1, as CIFAR implementations count
    # it (tests/test_models.py). layers: 8 convs and the dense. Step time: ResNet-9's scaled
    # by the forward multiply-adds (153 M against ResNet-9's 306 M), unmeasured. Stand-ins:
    # ||W_init||_F / sigma_w is sqrt(2,762) = 53 (the kernels' output channels and the
    # dense's 10); accuracy ResNet-9-LN's; no plateau.
    Architecture("vgg11", "VGG-11", "vgg", 11, 9, gpu_seconds_per_image=3e-5,
                 synthetic_norm_per_sigma=53.0, synthetic_accuracy=0.86, colour="#8c564b"),
)}
ARCHS = tuple(ARCHITECTURES)
ARCH_LABELS = {a.name: a.label for a in ARCHITECTURES.values()}
BATCHNORM_ARCHS = tuple(a.name for a in ARCHITECTURES.values() if a.normalisation == "batch")
CPU_CHANNELS_LAST = tuple(a.name for a in ARCHITECTURES.values() if a.cpu_channels_last)


def depth_study(depth_family: Iterable[str] = ()) -> tuple[str, ...]:
    """Table 5's rows and Figs. 5 and 7's curves, in declaration order: the paper's depth
    study, and every other network of `depth_family` (the depth family's archs)."""
    present = set(depth_family)
    return tuple(a.name for a in ARCHITECTURES.values() if a.depth_study or a.name in present)
