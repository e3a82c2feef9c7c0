"""Differential test: our layers + optimizers + training step against Keras 3 itself.

The same small network (conv -> BN -> ReLU -> max-pool -> conv -> BN -> ReLU -> global
max-pool -> dense) is built in Keras and from initmem.models, given identical weights
and identical batches, and trained a few updates under CosineDecay with each optimizer.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # plain Eigen kernels, deterministic
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from initmem.plan.schedule import learning_rate  # noqa: E402
from initmem.plan.spec import Recipe  # noqa: E402
from initmem.training.models import ConvNormReLU, PackedNet  # noqa: E402
from initmem.training.optimizers import build_optimizer  # noqa: E402
from initmem.training.optimizers.muon import Muon  # noqa: E402
from initmem.training.step import train_step  # noqa: E402

tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed (pip install "
                         "-e .[keras]); the Keras differential test needs it")
keras = pytest.importorskip("keras", reason="keras 3 is not installed (pip install -e .[keras])")
pytestmark = pytest.mark.keras

SIZE, BATCH, STEPS = 8, 16, 5
LAYERS = ("conv1", "bn1", "conv2", "bn2", "dense")
PARAM_NAMES = {"conv": ("kernel", "bias"), "dense": ("kernel", "bias"),
               "bn": ("gamma", "beta", "moving_mean", "moving_variance")}
# (optimizer, lr0, weight_decay, l2): each Keras optimizer as the recipe names it.
CASES = {
    "sgd": ("sgd", 0.1, 0.0, 0.0),
    "sgd_l2": ("sgd", 0.1, 0.0, 0.01),
    "sgd_momentum": ("sgd_momentum", 0.05, 0.0, 0.0),
    "adam": ("adam", 0.01, 0.0, 0.0),
    "adamw": ("adamw", 0.01, 0.05, 0.0),
    "muon": ("muon", 0.01, 0.05, 0.0),
}
# Measured worst |ours - Keras| after 5 updates (weights and BN statistics of order 0.01-1):
# 2.7e-7 in every case (1-4 float32 ulps); losses 1e-6 (values ~2.3); outputs 7e-7.
WEIGHT_TOL, OUTPUT_TOL = dict(rtol=1e-6, atol=5e-7), dict(rtol=1e-5, atol=2e-6)


def recipe_for(optimizer: str, lr0: float, weight_decay: float, l2: float) -> Recipe:
    return Recipe(family="test", arch="resnet9", optimizer=optimizer, b=BATCH, epochs=2,
                  lr0=lr0, hyperparameters={"weight_decay": weight_decay}, l2=l2,
                  dataset="synthetic", train_subset=4 * BATCH)


def keras_net(l2: float):
    reg = keras.regularizers.L2(l2) if l2 else None
    layers = keras.layers
    inputs = keras.Input((SIZE, SIZE, 3))
    x = layers.Conv2D(4, 3, padding="same", kernel_regularizer=reg, name="conv1")(inputs)
    x = layers.ReLU()(layers.BatchNormalization(momentum=0.99, epsilon=1e-3, name="bn1")(x))
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(6, 3, padding="same", kernel_regularizer=reg, name="conv2")(x)
    x = layers.ReLU()(layers.BatchNormalization(momentum=0.99, epsilon=1e-3, name="bn2")(x))
    x = layers.GlobalMaxPooling2D()(x)
    outputs = layers.Dense(10, kernel_regularizer=reg, name="dense")(x)
    return keras.Model(inputs, outputs)


def packed_net() -> tuple[PackedNet, dict[str, nn.Module]]:
    body = nn.Sequential(ConvNormReLU(1, 3, 4, "batch"), nn.MaxPool2d(2),
                         ConvNormReLU(1, 4, 6, "batch"))
    net = PackedNet(1, body, "max", 6)
    return net, dict(zip(LAYERS, (body[0][0], body[0][1], body[2][0], body[2][1], net.dense),
                         strict=True))


def to_ours(layer: str, name: str, value: np.ndarray) -> np.ndarray:
    """Keras layout -> one run of ours: conv HWIO -> OIHW, dense (in, out) -> (out, in)."""
    if name == "kernel":
        value = value.transpose(3, 2, 0, 1) if layer.startswith("conv") else value.T
    return value


def keras_state(model) -> dict[str, np.ndarray]:
    return {f"{layer}.{name}": to_ours(layer, name, value)
            for layer in LAYERS
            for name, value in zip(PARAM_NAMES[layer[:-1] if layer[-1].isdigit() else layer],
                                   model.get_layer(layer).get_weights(), strict=True)}


def our_state(modules: dict[str, nn.Module]) -> dict[str, np.ndarray]:
    return {f"{layer}.{name}": getattr(module, name).detach()[0].numpy().copy()
            for layer, module in modules.items()
            for name in PARAM_NAMES[layer[:-1] if layer[-1].isdigit() else layer]}


def copy_keras_to_ours(model, modules: dict[str, nn.Module]) -> None:
    with torch.no_grad():
        for key, value in keras_state(model).items():
            layer, name = key.split(".")
            getattr(modules[layer], name)[0].copy_(torch.from_numpy(value))


@pytest.fixture(scope="module")
def batches():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (STEPS + 1, BATCH, SIZE, SIZE, 3)).astype(np.float32)
    y = rng.integers(0, 10, (STEPS + 1, BATCH))
    return x, y


def keras_optimizer(optimizer: str, schedule, weight_decay: float):
    opt = keras.optimizers
    return {
        "sgd": lambda: opt.SGD(schedule),
        "sgd_momentum": lambda: opt.SGD(schedule, momentum=0.9),
        "adam": lambda: opt.Adam(schedule),
        "adamw": lambda: opt.AdamW(schedule, weight_decay=weight_decay),
        "muon": lambda: opt.Muon(schedule, weight_decay=weight_decay,
                                 adam_weight_decay=weight_decay, exclude_layers=["dense"]),
        "muon_dense": lambda: opt.Muon(schedule, weight_decay=weight_decay,
                                       adam_weight_decay=weight_decay, exclude_layers=[]),
    }[optimizer]()


def train_both(case: tuple, batches, keras_opt_name: str | None = None, ours_opt=None):
    """Train Keras (train_on_batch) and ours (train_step) side by side from equal weights.
    Returns the initial, Keras' and our states, both loss sequences, and both networks'
    outputs on a held-out batch in training mode (batch statistics) and inference mode."""
    optimizer, lr0, weight_decay, l2 = case
    recipe = recipe_for(optimizer, lr0, weight_decay, l2)
    keras.utils.set_random_seed(1)
    model = keras_net(l2)
    schedule = keras.optimizers.schedules.CosineDecay(lr0, recipe.total_steps, alpha=0.01)
    model.compile(optimizer=keras_optimizer(keras_opt_name or optimizer, schedule, weight_decay),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    net, modules = packed_net()
    copy_keras_to_ours(model, modules)
    initial = keras_state(model)
    net.train()
    opt = ours_opt(net) if ours_opt else build_optimizer(recipe, net)
    x, y = batches
    losses = np.zeros((2, STEPS))
    for k in range(STEPS):
        losses[0, k] = model.train_on_batch(x[k], y[k])
        xt = torch.from_numpy(x[k].transpose(0, 3, 1, 2))[None]
        loss, _ = train_step(net, opt, xt, torch.from_numpy(y[k])[None], learning_rate(recipe, k),
                             l2)
        losses[1, k] = loss[0]
    assert int(model.optimizer.iterations) == int(opt.iterations) == STEPS
    states = keras_state(model), our_state(modules)
    held_out = torch.from_numpy(x[STEPS].transpose(0, 3, 1, 2))
    outputs = {}
    for training in (False, True):  # inference first: training mode moves BN statistics
        net.train(training)
        outputs[training] = (model(x[STEPS], training=training).numpy(),
                             net(held_out)[0].detach().numpy())
    return initial, *states, losses, outputs


def adam_noise_keys(state: dict[str, np.ndarray]) -> set[str]:
    """Conv biases feeding BN (zero gradient up to rounding noise, which Adam normalises
    into lr-sized steps) and the moving means they shift: not comparable under Adam, and
    neither are inference-mode outputs, which see the bias through the moving mean."""
    return {k for k in state if k.startswith("conv") and k.endswith("bias")
            or k.endswith("moving_mean")}


def assert_agree(initial, expected, ours, skip: set[str]) -> None:
    for key in expected.keys() - skip:
        np.testing.assert_allclose(ours[key], expected[key], **WEIGHT_TOL, err_msg=key)
        conv_bias = key.startswith("conv") and key.endswith("bias")  # ~zero gradient
        assert conv_bias or np.abs(expected[key] - initial[key]).max() > 1e-4, key


@pytest.mark.parametrize("case", list(CASES))
def test_training_agrees_with_keras(case, batches):
    initial, expected, ours, losses, outputs = train_both(CASES[case], batches)
    adaptive = not CASES[case][0].startswith("sgd")
    assert_agree(initial, expected, ours, adam_noise_keys(expected) if adaptive else set())
    np.testing.assert_allclose(losses[1], losses[0], rtol=2e-6, atol=0)
    for training in ((True,) if adaptive else (True, False)):
        np.testing.assert_allclose(*outputs[training][::-1], **OUTPUT_TOL, err_msg=training)


def test_muon_update_path_agrees_with_keras(batches):
    """Keras Muon with nothing excluded orthogonalises the (2-D) dense kernel: our Muon
    path (momentum, Nesterov, Newton-Schulz, RMS scaling, decay) must do the same."""
    case = ("muon", 0.01, 0.05, 0.0)
    initial, expected, ours, losses, outputs = train_both(
        case, batches, "muon_dense", lambda net: Muon(net.named_parameters(), exclude_layers=(),
                                                      hyperparameters={"weight_decay": 0.05}))
    assert_agree(initial, expected, ours, adam_noise_keys(expected))
    np.testing.assert_allclose(*outputs[True][::-1], **OUTPUT_TOL)


def test_keras_logged_loss_is_cross_entropy_plus_l2(batches):
    """Keras' train loss with L2(l) = mean cross-entropy + l * sum of squared kernels."""
    l2 = 0.01
    keras.utils.set_random_seed(1)
    model = keras_net(l2)
    model.compile(optimizer=keras.optimizers.SGD(0.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    x, y = batches
    logits = model(x[0], training=True).numpy().astype(np.float64)
    log_z = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    cross_entropy = np.mean(log_z - logits[np.arange(BATCH), y[0]])
    penalty = l2 * sum(np.square(model.get_layer(name).kernel.numpy().astype(np.float64)).sum()
                       for name in ("conv1", "conv2", "dense"))
    logged = float(model.train_on_batch(x[0], y[0]))
    assert logged == pytest.approx(cross_entropy + penalty, rel=1e-6)
    assert penalty > 0.01 * cross_entropy  # the penalty is really in there, far above 1e-6


def test_schedule_agrees_with_keras_cosine_decay():
    """Keras evaluates CosineDecay in float32; ours is float64. Agree to float32 rounding."""
    recipe = recipe_for("sgd", 0.1, 0.0, 0.0)
    total = recipe.total_steps
    schedule = keras.optimizers.schedules.CosineDecay(0.1, total, alpha=0.01)
    for k in (0, 1, total // 2, total - 1, total, total + 3):
        assert learning_rate(recipe, k) == pytest.approx(float(schedule(k)), rel=1e-6), k
    long = Recipe(family="test", arch="resnet9", optimizer="sgd", b=16, epochs=300, lr0=1e-3)
    schedule = keras.optimizers.schedules.CosineDecay(1e-3, long.total_steps, alpha=0.01)
    ks = np.linspace(0, long.total_steps, 41).astype(int)
    ratio = np.array([learning_rate(long, k) / float(schedule(k)) for k in ks])
    assert np.abs(ratio - 1).max() < 3e-5
