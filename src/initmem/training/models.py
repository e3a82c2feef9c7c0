"""Packed ResNets with Keras semantics: N independent networks in one module.

Every parameter has a leading run dimension N. Runs never mix: convolutions are grouped
(groups=N over channel-stacked inputs), normalisation is per run and channel, and the
dense layer is a batched matmul. So a pack of N equals N runs trained alone, and N=1 is
the same code path.

Activations are (B, N*C, H, W): run i owns channels [i*C, (i+1)*C).
Keras details kept: every conv/dense has a bias; BatchNormalization momentum 0.99,
epsilon 1e-3 and *biased* batch variance in the moving average; LayerNormalization over
the channels of each pixel, epsilon 1e-3; "same" padding as TensorFlow computes it
(for stride 2, the extra row/column goes at the bottom/right).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from initmem.plan.architectures import ARCHITECTURES
from initmem.plan.bodies import body_of
from initmem.plan.memory import NUM_CLASSES
from initmem.plan.spec import Recipe
from initmem.vocabulary import BN_MOMENTUM

NORM_EPSILON = 1e-3
BIAS_STD = 0.2


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow 'same': total pad so that out = ceil(size / stride), extra at the end."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class PackedConv2d(nn.Module):
    """N runs' conv layers as one grouped convolution: kernel (N, C_out, C_in, k, k), a bias per
    run and channel, TensorFlow's 'same' padding."""
    def __init__(self, n: int, c_in: int, c_out: int, kernel: int = 3, stride: int = 1):
        """Uninitialised parameters of n runs' kernel x kernel convs from c_in to c_out channels."""
        super().__init__()
        self.n, self.stride = n, stride
        self.kernel = nn.Parameter(torch.empty(n, c_out, c_in, kernel, kernel))
        self.bias = nn.Parameter(torch.empty(n, c_out))

    def forward(self, x: Tensor) -> Tensor:
        """(B, N*C_in, H, W) -> (B, N*C_out, H', W'): each run's channels through its own kernel."""
        k = self.kernel.shape[-1]
        top, bottom = same_padding(x.shape[-2], k, self.stride)
        left, right = same_padding(x.shape[-1], k, self.stride)
        if (top, left) == (bottom, right):
            padding = (top, left)
        else:
            x, padding = F.pad(x, (left, right, top, bottom)), (0, 0)
        weight = self.kernel.flatten(0, 1)
        return F.conv2d(x, weight, self.bias.flatten(), self.stride, padding, groups=self.n)


class PackedDense(nn.Module):
    """N runs' dense layers as one batched matmul: kernel (N, d_out, d_in), a bias per run."""
    def __init__(self, n: int, d_in: int, d_out: int):
        """Uninitialised parameters of n runs' dense layers from d_in to d_out features."""
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(n, d_out, d_in))
        self.bias = nn.Parameter(torch.empty(n, d_out))

    def forward(self, x: Tensor) -> Tensor:  # (B, N, d_in) -> (N, B, d_out)
        """Each run's features through its own dense layer."""
        return torch.baddbmm(self.bias.unsqueeze(1), x.transpose(0, 1),
                             self.kernel.transpose(1, 2))


class KerasBatchNorm(nn.Module):
    """Keras BatchNormalization per run and channel (moving stats use biased variance)."""

    def __init__(self, n: int, channels: int):
        """n runs' BatchNorm of `channels`: gamma 1, beta 0, moving mean 0, moving variance 1."""
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n, channels))
        self.beta = nn.Parameter(torch.zeros(n, channels))
        self.register_buffer("moving_mean", torch.zeros(n, channels))
        self.register_buffer("moving_variance", torch.ones(n, channels))
        # The last training batch's variance, to judge whether the moving variance has
        # converged (bn_variance_ratio). A measurement, not state: non-persistent, so
        # neither state_dict nor the parameter count holds it; NaN until a training step.
        self.register_buffer("batch_variance", torch.full((n, channels), math.nan),
                             persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """Training: normalise by the batch's statistics and move the moving ones toward them;
        inference: normalise by the moving statistics."""
        if not self.training:
            return F.batch_norm(x, self.moving_mean.flatten(), self.moving_variance.flatten(),
                                self.gamma.flatten(), self.beta.flatten(), False, 0.0,
                                NORM_EPSILON)
        with torch.no_grad():
            var, mean = torch.var_mean(x, dim=(0, 2, 3), correction=0)
            self.moving_mean.lerp_(mean.view_as(self.moving_mean), 1 - BN_MOMENTUM)
            self.moving_variance.lerp_(var.view_as(self.moving_variance), 1 - BN_MOMENTUM)
            self.remember_batch_variance(var)
        return F.batch_norm(x, None, None, self.gamma.flatten(), self.beta.flatten(), True,
                            0.0, NORM_EPSILON)

    def remember_batch_variance(self, var: Tensor) -> None:
        """Keep the batch's variance for bn_variance_ratio (in place: CUDA graphs)."""
        self.batch_variance.copy_(var.view_as(self.batch_variance))


class KerasLayerNorm(nn.Module):
    """Keras LayerNormalization on NHWC maps: over the channels of each pixel, per run."""

    def __init__(self, n: int, channels: int):
        """n runs' LayerNorm of `channels`: gamma 1, beta 0."""
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n, channels))
        self.beta = nn.Parameter(torch.zeros(n, channels))

    def forward(self, x: Tensor) -> Tensor:
        """Normalise each run's channels at each pixel, then scale and shift per run and channel."""
        batch, _, h, w = x.shape
        n, c = self.gamma.shape
        x = x.view(batch, n, c, h, w)
        var, mean = torch.var_mean(x, dim=2, keepdim=True, correction=0)
        x = (x - mean) * torch.rsqrt(var + NORM_EPSILON)
        x = x * self.gamma.view(1, n, c, 1, 1) + self.beta.view(1, n, c, 1, 1)
        return x.view(batch, n * c, h, w)


class ConvNormReLU(nn.Sequential):
    """A packed conv, its normalisation (BatchNorm or LayerNorm) and, unless relu=False, a ReLU."""
    def __init__(self, n: int, c_in: int, c_out: int, norm: str, kernel: int = 3,
                 stride: int = 1, relu: bool = True):
        """n runs' conv from c_in to c_out channels, then `norm` ("batch" or "layer")."""
        norm_layer = KerasBatchNorm if norm == "batch" else KerasLayerNorm
        layers = [PackedConv2d(n, c_in, c_out, kernel, stride), norm_layer(n, c_out)]
        super().__init__(*layers, *([nn.ReLU()] if relu else []))


class Residual(nn.Module):
    """ResNet-9's residual: x + f(x), no activation after the sum."""

    def __init__(self, *layers: nn.Module):
        """The branch f: `layers` in sequence."""
        super().__init__()
        self.f = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """x + f(x)."""
        return x + self.f(x)


class BasicBlock(nn.Module):
    """Keras resnet_v1 block: conv-BN-ReLU-conv-BN, + shortcut (1x1 conv at stage change), ReLU."""

    def __init__(self, n: int, c_in: int, c_out: int, stride: int):
        """n runs' block from c_in to c_out channels, its first conv at `stride`."""
        super().__init__()
        self.f = nn.Sequential(ConvNormReLU(n, c_in, c_out, "batch", stride=stride),
                               ConvNormReLU(n, c_out, c_out, "batch", relu=False))
        self.shortcut = (PackedConv2d(n, c_in, c_out, 1, stride)
                         if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: Tensor) -> Tensor:
        """ReLU(f(x) + shortcut(x))."""
        return F.relu(self.f(x) + self.shortcut(x))


class PackedNet(nn.Module):
    """N runs' networks in one module: a packed body, global pooling (average or max) and a
    packed dense layer to the classes."""
    def __init__(self, n: int, body: nn.Module, pool: str, features: int):
        """n runs of `body` (`features` channels out), pooled by `pool`, then the dense layer."""
        super().__init__()
        self.n, self.pool = n, pool
        # NHWC activations (NVIDIA advises them for cuDNN's tensor cores). Layout only, the
        # values are the same (tests/test_step.py); the trainer sets it (docs/performance.md).
        self.channels_last = False
        self.body = body
        self.dense = PackedDense(n, features, NUM_CLASSES)

    def forward(self, x: Tensor) -> Tensor:
        """x: (N, B, 3, H, W), one batch per run, or (B, 3, H, W) shared; -> (N, B, 10)."""
        shared = x.dim() == 4
        x = x.repeat(1, self.n, 1, 1) if shared else x.transpose(0, 1).flatten(1, 2)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        x = self.body(x)
        x = x.amax(dim=(2, 3)) if self.pool == "max" else x.mean(dim=(2, 3))
        return self.dense(x.view(x.shape[0], self.n, -1))

    def kernels(self, tensors: dict[str, Tensor] | None = None) -> list[Tensor]:
        """Conv and dense kernels: what ||W||_F, L2 and the init scale sigma_w act on; of
        `tensors` (the network's state by name, e.g. its evaluation state) if given."""
        named = self.named_parameters() if tensors is None else tensors.items()
        return [p for name, p in named if name.endswith("kernel")]

    def kernel_sq_norm(self, tensors: dict[str, Tensor] | None = None) -> Tensor:
        """sum of squared kernel entries per run, shape (N,): what Keras' L2 penalises."""
        return torch.stack([k.flatten(1).square().sum(1) for k in self.kernels(tensors)]).sum(0)

    def kernel_fro_norm(self, tensors: dict[str, Tensor] | None = None) -> Tensor:
        """||W||_F per run, shape (N,)."""
        return self.kernel_sq_norm(tensors).sqrt()

    @torch.no_grad()
    def init_(self, sigma_ws: Sequence[float], generators: Sequence[torch.Generator]) -> None:
        """Kernels ~ N(0, sigma_w^2 / fan_in), biases ~ N(0, 0.2^2), drawn per run from its
        own generator (on the CPU, so the draws do not depend on the training device)."""
        for i, (sigma_w, gen) in enumerate(zip(sigma_ws, generators, strict=True)):
            for name, p in self.named_parameters():
                if name.endswith("kernel"):
                    fan_in = p[i].shape[1:].numel()
                    std = sigma_w / math.sqrt(fan_in)
                elif name.endswith("bias"):
                    std = BIAS_STD
                else:
                    continue
                draw = torch.randn(p[i].shape, generator=gen, dtype=torch.float32)
                p[i].copy_(draw * std)


# What a network family's builder composes (initmem.plan.bodies: the torch-free family
# modules get it passed in).
LAYERS = SimpleNamespace(conv_norm=ConvNormReLU, conv=PackedConv2d, residual=Residual,
                         basic_block=BasicBlock, sequential=nn.Sequential,
                         max_pool=nn.MaxPool2d)


def build_model(recipe: Recipe, n_runs: int) -> PackedNet:
    """The recipe's architecture (its declaration, its body's family module) for a pack of
    n_runs (parameters uninitialised)."""
    arch = ARCHITECTURES[recipe.arch]
    body, features = body_of(arch).build(LAYERS, n_runs, arch, recipe.width)
    return PackedNet(n_runs, body, arch.pooling, features)


@torch.no_grad()
def batchnorm_statistics(model: PackedNet, tensors: dict[str, Tensor],
                         batches: Sequence[Tensor]) -> dict[str, Tensor]:
    """Every BatchNorm layer's moving statistics for the network at `tensors` (its state by
    name): the mean over `batches` (images (B, 3, H, W), shared by the runs) of each
    batch's mean and biased variance in training mode, the quantities Keras' moving
    averages follow. Neither `tensors` nor the model's buffers change. {}: no BatchNorm."""
    layers = {name: m for name, m in model.named_modules() if isinstance(m, KerasBatchNorm)}
    sums: dict[str, list[Tensor]] = {}

    def recorder(name: str):
        def record(_module: nn.Module, args: tuple[Tensor, ...]) -> None:
            var, mean = torch.var_mean(args[0], dim=(0, 2, 3), correction=0)
            sums[name] = [mean, var] if name not in sums else [sums[name][0] + mean,
                                                                sums[name][1] + var]
        return record

    # the training-mode forward updates whatever buffers it is given: give it copies
    scratch = {**tensors, **{name: t.clone() for name, t in model.named_buffers()}}
    handles = [m.register_forward_pre_hook(recorder(name)) for name, m in layers.items()]
    training = model.training
    try:
        model.train()
        for x in batches if layers else ():
            functional_call(model, scratch, (x,))
    finally:
        model.train(training)
        for handle in handles:
            handle.remove()
    return {f"{name}.{buffer}": (total / len(batches)).view_as(layers[name].moving_mean)
            for name, (mean, var) in sums.items()
            for buffer, total in (("moving_mean", mean), ("moving_variance", var))}


def bn_variance_ratio(model: PackedNet) -> Tensor:
    """Per run, shape (N,): over the BatchNorm layers, r = mean moving variance / mean
    variance of the last training batch (means over channels), the r farthest from 1 in
    log terms. Far from 1, inference mode normalises with statistics the network no
    longer has (momentum 0.99 forgets the initial 1 only as 0.99^k). NaN without
    BatchNorm or before a training step."""
    layers = [m for m in model.modules() if isinstance(m, KerasBatchNorm)]
    if not layers:
        return torch.full((model.n,), math.nan, device=model.dense.bias.device)
    ratios = torch.stack([bn.moving_variance.mean(1) / bn.batch_variance.mean(1)
                          for bn in layers])  # (layers, N)
    farthest = ratios.log().abs().argmax(0, keepdim=True)
    return ratios.gather(0, farthest).squeeze(0)


def state_numel(model: PackedNet) -> int:
    """Entries of the parameters and persistent buffers, the state a checkpoint saves
    (not the last batch's variance, a measurement)."""
    return sum(t.numel() for t in model.state_dict().values())


def keras_param_count(model: PackedNet) -> int:
    """Parameters of one run as Keras prints them: trainable plus BatchNorm moving stats."""
    return state_numel(model) // model.n


def train_flops_per_image(arch: str, width: float) -> int:
    """FLOPs of one training step per image and run: 2 x 3 x the multiply-adds of the
    forward conv and dense layers (backward costs about twice the forward). Normalisation,
    activations, pooling and the optimizer are not counted, as is usual for peak fractions."""
    model = build_model(Recipe(family="flops", arch=arch, optimizer="sgd", b=1, epochs=1,
                               width=width), 1).eval()
    macs = 0

    def count(module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
        nonlocal macs  # outputs of the one image, times the weights behind each output
        macs += output[0].numel() * module.kernel[0, 0].numel()

    for module in model.modules():
        if isinstance(module, PackedConv2d | PackedDense):
            module.register_forward_hook(count)
    with torch.no_grad():
        model(torch.zeros(1, 3, 32, 32))
    return 2 * 3 * macs
