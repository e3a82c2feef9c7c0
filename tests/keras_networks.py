"""The paper's networks written in Keras 3 from its description, for differential tests.

Each network family's Keras twin is its module's `keras` (initmem.plan.bodies), written
from the paper (Appendix A) and the Keras recipe (README, "The recipe, as Keras runs it")
with Keras' layers, not from `initmem.training.models`: the DAWNBench ResNet-9, Keras'
`resnet_v1` CIFAR ResNets, VGG-11 with BatchNorm; this file is the builder they create
their weighted layers with. Every conv and dense has a bias; kernels ~ N(0, sigma_w^2 / fan_in),
biases ~ N(0, 0.2^2), BatchNorm gamma 1, beta 0. Which of the two it builds, at which
depth, normalisation and pooling, is read from the network's declaration
(initmem.plan.architectures), so every declared network has its Keras reference.

`keras_network` returns the model and its weighted layers in the order the network
creates them; `load_into_pack` writes their weights into one run of a pack (the two
sides share parameter *order*, checked by shape, never names). `keras_trajectory` and
`our_trajectory` step both from the same weights on the same batches, in whatever dtype
the caller set (keras.config.set_floatx, torch.set_default_dtype).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # plain Eigen kernels, deterministic
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from keras_arguments import keras_kwargs  # noqa: E402

from initmem.plan.architectures import ARCHITECTURES  # noqa: E402
from initmem.plan.bodies import body_of  # noqa: E402
from initmem.plan.spec import Recipe  # noqa: E402
from initmem.training import data, step  # noqa: E402
from initmem.training.models import (  # noqa: E402
    KerasBatchNorm,
    KerasLayerNorm,
    PackedConv2d,
    PackedDense,
    PackedNet,
    build_model,
)
from initmem.training.optimizers import build_optimizer  # noqa: E402
from initmem.training.optimizers.muon import MUON_EXCLUDE_LAYERS  # noqa: E402

layers = keras.layers
BIAS_STD = 0.2
# Keras' weights of each layer kind, in get_weights() order, and our attribute for each
OUR_NAMES = {"Conv2D": ("kernel", "bias"), "Dense": ("kernel", "bias"),
             "BatchNormalization": ("gamma", "beta", "moving_mean", "moving_variance"),
             "LayerNormalization": ("gamma", "beta")}


class _Builder:
    """Creates the layers of one network, keeping those with weights in creation order."""

    def __init__(self, sigma_w: float, width: float, seed: int, l2: float, norm: str):
        self.sigma_w, self.width, self.l2, self.norm = sigma_w, width, l2, norm
        self.seed = seed * 1000  # one seed per initializer, distinct across runs
        self.weighted: list[layers.Layer] = []

    def _next_seed(self) -> int:
        self.seed += 1
        return self.seed

    def _normal(self, std: float) -> keras.initializers.Initializer:
        return keras.initializers.RandomNormal(0.0, std, seed=self._next_seed())

    def _keep(self, layer: layers.Layer) -> layers.Layer:
        self.weighted.append(layer)
        return layer

    def channels(self, c: int) -> int:
        return max(1, round(c * self.width))

    def conv(self, x, c_out: int, kernel: int = 3, stride: int = 1):
        fan_in = x.shape[-1] * kernel * kernel
        reg = keras.regularizers.L2(self.l2) if self.l2 else None
        return self._keep(layers.Conv2D(
            c_out, kernel, strides=stride, padding="same", kernel_regularizer=reg,
            kernel_initializer=self._normal(self.sigma_w / math.sqrt(fan_in)),
            bias_initializer=self._normal(BIAS_STD)))(x)

    def norm_layer(self, x):
        layer = (layers.BatchNormalization(momentum=0.99, epsilon=1e-3) if self.norm == "batch"
                 else layers.LayerNormalization(axis=-1, epsilon=1e-3))
        return self._keep(layer)(x)

    def conv_norm(self, x, c_out: int, stride: int = 1, relu: bool = True):
        x = self.norm_layer(self.conv(x, c_out, stride=stride))
        return layers.ReLU()(x) if relu else x

    def dense(self, x):
        reg = keras.regularizers.L2(self.l2) if self.l2 else None
        return self._keep(layers.Dense(
            10, kernel_regularizer=reg,
            kernel_initializer=self._normal(self.sigma_w / math.sqrt(x.shape[-1])),
            bias_initializer=self._normal(BIAS_STD)))(x)


def keras_network(arch: str, sigma_w: float, width: float = 1.0, seed: int = 0,
                  l2: float = 0.0) -> tuple[keras.Model, list[layers.Layer]]:
    """The declared network `arch` in Keras (floatx decides its dtype), and its weighted
    layers: its family's Keras twin (initmem.plan.bodies), with its declaration's depth,
    normalisation and pooling. A family that declares no twin skips the calling test."""
    declared = ARCHITECTURES[arch]
    family = body_of(declared)
    if family.keras is None:
        pytest.skip(f"{arch}: no Keras twin ({family.NO_KERAS_TWIN})")
    net = _Builder(sigma_w, width, seed, l2, declared.normalisation)
    inputs = keras.Input((32, 32, 3))
    return keras.Model(inputs, family.keras(net, layers, inputs, declared)), net.weighted


def _to_ours(kind: str, name: str, value: np.ndarray) -> np.ndarray:
    """Keras layout -> ours: conv HWIO -> OIHW, dense (in, out) -> (out, in)."""
    if name != "kernel":
        return value
    return value.transpose(3, 2, 0, 1) if kind == "Conv2D" else value.T


def _to_keras(kind: str, name: str, value: np.ndarray) -> np.ndarray:
    if name != "kernel":
        return value
    return value.transpose(2, 3, 1, 0) if kind == "Conv2D" else value.T


def set_keras_weights(weighted: list[layers.Layer], weights: list[np.ndarray]) -> None:
    """The inverse of keras_weights (cast to each layer's dtype)."""
    values = iter(weights)
    for layer in weighted:
        kind = type(layer).__name__
        layer.set_weights([_to_keras(kind, name, next(values)) for name in OUR_NAMES[kind]])


def keras_weights(weighted: list[layers.Layer]) -> list[np.ndarray]:
    """Every weight and BatchNorm statistic of a Keras network, in our layout and order."""
    return [_to_ours(type(layer).__name__, name, value)
            for layer in weighted
            for name, value in zip(OUR_NAMES[type(layer).__name__], layer.get_weights(),
                                   strict=True)]


def pack_tensors(model: PackedNet, run: int) -> list[torch.Tensor]:
    """The same list for one run of a pack, as views into its parameters and buffers."""
    kinds = {PackedConv2d: "Conv2D", PackedDense: "Dense", KerasBatchNorm: "BatchNormalization",
             KerasLayerNorm: "LayerNormalization"}
    return [getattr(m, name)[run] for m in model.modules() if type(m) in kinds
            for name in OUR_NAMES[kinds[type(m)]]]


def pack_weights(model: PackedNet, run: int) -> list[np.ndarray]:
    return [t.detach().cpu().numpy().copy() for t in pack_tensors(model, run)]


@torch.no_grad()
def load_into_pack(model: PackedNet, run: int, weights: list[np.ndarray]) -> None:
    """Write keras_weights(...) of one network into run `run` of a pack: both sides list
    their weights in creation order, so a layer out of order is a shape mismatch."""
    targets = pack_tensors(model, run)
    if len(targets) != len(weights):
        raise ValueError(f"the pack has {len(targets)} weight tensors, Keras {len(weights)}")
    for i, (target, value) in enumerate(zip(targets, weights, strict=True)):
        if tuple(target.shape) != value.shape:
            raise ValueError(f"weight {i}: ours {tuple(target.shape)}, Keras {value.shape}")
        target.copy_(torch.from_numpy(value))


def keras_optimizer(recipe: Recipe):
    """(CosineDecay, the Keras optimizer its declaration names, built from the recipe)."""
    schedule = keras.optimizers.schedules.CosineDecay(recipe.lr0, recipe.total_steps,
                                                      alpha=recipe.cosine_alpha)
    kwargs = keras_kwargs(recipe)
    if recipe.declaration.keras == "Muon":  # the paper's exclude_layers: the output dense
        kwargs["exclude_layers"] = list(MUON_EXCLUDE_LAYERS)
    return schedule, getattr(keras.optimizers, recipe.declaration.keras)(schedule, **kwargs)


def batches(run: int, steps: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 images (NHWC), labels and each step's slots, different for every run."""
    rng = np.random.default_rng(100 + run)
    images = rng.integers(0, 256, (steps * b, 32, 32, 3), dtype=np.uint8)
    return images, rng.integers(0, 10, steps * b), rng.permutation(steps * b).reshape(steps, b)


def keras_trajectory(recipe: Recipe, sigma_ws: tuple[float, ...], steps: int,
                     initial: list[list[np.ndarray]] | None = None):
    """Keras trains each run alone, from the paper's init (seeded by the run) or from
    `initial`. Returns the initial weights, the weights after every update ([step][run]),
    the losses (run, step) and the rates."""
    start, weights, losses = [], [], []
    for run, sigma_w in enumerate(sigma_ws):
        model, weighted = keras_network(recipe.arch, sigma_w, recipe.width, seed=run,
                                        l2=recipe.l2)
        if initial is not None:
            set_keras_weights(weighted, initial[run])
        schedule, optimizer = keras_optimizer(recipe)
        model.compile(optimizer=optimizer, jit_compile=False, run_eagerly=True,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        start.append(keras_weights(weighted))
        images, labels, slots = batches(run, steps, recipe.b)
        run_losses, run_weights = [], []
        for s in slots:
            run_losses.append(float(model.train_on_batch(images[s] / 255, labels[s])))
            run_weights.append(keras_weights(weighted))
        losses.append(run_losses)
        weights.append(run_weights)
    rates = [float(schedule(k)) for k in range(steps)]
    return start, [list(w) for w in zip(*weights, strict=True)], np.array(losses), rates


def our_trajectory(recipe: Recipe, initial: list[list[np.ndarray]], rates: list[float],
                   executor: type[step.StepExecutor] = step.StepExecutor):
    """The pack from `initial`, stepped by `executor` at `rates` on keras_trajectory's
    batches. Returns the weights after every update ([step][run]) and the losses."""
    n, steps = len(initial), len(rates)
    model = build_model(recipe, n).train()
    for run, weights in enumerate(initial):
        load_into_pack(model, run, weights)
    runs = [batches(run, steps, recipe.b) for run in range(n)]
    images = torch.from_numpy(np.stack([r[0] for r in runs]).transpose(0, 1, 4, 2, 3).copy())
    labels = torch.from_numpy(np.stack([r[1] for r in runs]))
    offsets = torch.arange(n)[:, None] * images.shape[1]

    def batch(idx):  # the trainer's _batch, over each run's own images
        flat = (idx + offsets).flatten()
        x = data.as_float(images.flatten(0, 1)[flat]).view(*idx.shape, 3, 32, 32)
        return x, labels.flatten()[flat].view(idx.shape)

    run_step = executor(model, build_optimizer(recipe, model), recipe.l2, recipe.b, batch)
    slots = torch.from_numpy(np.stack([r[2] for r in runs]))
    weights, losses = [], []
    for k, lr in enumerate(rates):
        losses.append(run_step(lr, slots[:, k])[0].tolist())
        weights.append([pack_weights(model, run) for run in range(n)])
    return weights, np.array(losses).T
