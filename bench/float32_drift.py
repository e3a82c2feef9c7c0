"""How far float32 trajectories are from the float64 one, ours and Keras' alike.

For each network and sigma_w, one float64 trajectory (Keras; ours equals it to 1e-10,
tests/test_keras_networks.py) and two float32 ones from the same initial weights on the
same batches: Keras-float32 and ours (the StepExecutor path training uses). Printed:
the distance of each float32 run from float64 after k = 1..10 updates, as
||w32_k - w64_k|| / ||w64_k - w0|| over every weight and BatchNorm statistic (1 means
the float32 run is as far from the float64 one as the float64 run has moved; ours also
with oneDNN off), and the
error of one conv layer's float32 weight gradient against float64 with PyTorch's CPU
kernels (default oneDNN, the native im2col path, deterministic algorithms) and
TensorFlow's.

    OMP_NUM_THREADS=1 .venv/bin/python bench/float32_drift.py [--steps 10] [--width-resnet9 0.5]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torchvision.datasets  # noqa: F401  (before TensorFlow: see tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # plain Eigen kernels, as the tests
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import keras_networks as kn  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from initmem.plan.spec import Recipe  # noqa: E402


def in_dtype(dtype: str, fn, *args):
    keras.config.set_floatx(dtype)
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        return fn(*args)
    finally:
        keras.config.set_floatx("float32")
        torch.set_default_dtype(torch.float32)


def distance(w: list[np.ndarray], ref: list[np.ndarray], start: list[np.ndarray]) -> float:
    diff = sum(np.square(a.astype(np.float64) - b).sum() for a, b in zip(w, ref, strict=True))
    moved = sum(np.square(b - s).sum() for b, s in zip(ref, start, strict=True))
    return float(np.sqrt(diff / moved))


def drift(arch: str, width: float, sigma_ws: tuple[float, ...], steps: int, b: int,
          lr0: float) -> dict[str, np.ndarray]:
    """(run, k) distances from float64 of Keras-float32 and ours-float32 (with PyTorch's
    default oneDNN CPU kernels, and with its native ones)."""
    recipe = Recipe(family="bench", arch=arch, optimizer="sgd", lr0=lr0, schedule="constant",
                    b=b, epochs=1, train_subset=steps * b, width=width, dataset="synthetic")
    start, ref, _, rates = in_dtype("float64", kn.keras_trajectory, recipe, sigma_ws, steps)
    start32 = [[w.astype(np.float32) for w in run] for run in start]
    keras32 = in_dtype("float32", kn.keras_trajectory, recipe, sigma_ws, steps, start32)[1]
    ours32 = in_dtype("float32", kn.our_trajectory, recipe, start32, rates)[0]
    with torch.backends.mkldnn.flags(enabled=False):  # PyTorch's native CPU conv kernels
        native32 = in_dtype("float32", kn.our_trajectory, recipe, start32, rates)[0]
    runs = (("Keras float32", keras32), ("ours float32", ours32),
            ("ours float32, oneDNN off", native32))
    return {name: np.array([[distance(traj[k][run], ref[k][run], start[run])
                             for k in range(steps)] for run in range(len(sigma_ws))])
            for name, traj in runs}


def weight_gradient_errors(seed: int = 0) -> dict[str, float]:
    """||g32 - g64|| / ||g64|| of a 3x3 conv's kernel gradient (ResNet-9's 128-channel
    residual layer at 16x16, batch 16) by each kernel family."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(16, 128, 16, 16))
    w = rng.normal(size=(128, 128, 3, 3)) / np.sqrt(128 * 9)
    up = rng.normal(size=(16, 128, 16, 16))

    def torch_grad(dtype, **flags) -> np.ndarray:
        kernel = torch.tensor(w, dtype=dtype, requires_grad=True)
        with torch.backends.mkldnn.flags(enabled=flags.get("mkldnn", True)):
            F.conv2d(torch.tensor(x, dtype=dtype), kernel, padding=1).mul(
                torch.tensor(up, dtype=dtype)).sum().backward()
        return kernel.grad.double().numpy()

    def tf_grad() -> np.ndarray:
        kernel = tf.Variable(w.transpose(2, 3, 1, 0).astype(np.float32))
        with tf.GradientTape() as tape:
            out = tf.nn.conv2d(x.transpose(0, 2, 3, 1).astype(np.float32), kernel, 1, "SAME")
            loss = tf.reduce_sum(out * up.transpose(0, 2, 3, 1).astype(np.float32))
        return tape.gradient(loss, kernel).numpy().astype(np.float64).transpose(3, 2, 0, 1)

    exact = torch_grad(torch.float64)
    grads = {"torch CPU default (oneDNN)": torch_grad(torch.float32),
             "torch CPU native (mkldnn off)": torch_grad(torch.float32, mkldnn=False)}
    torch.use_deterministic_algorithms(True)
    try:
        grads["torch deterministic algorithms"] = torch_grad(torch.float32)
    finally:
        torch.use_deterministic_algorithms(False)
    grads["TensorFlow CPU (Eigen)"] = tf_grad()
    return {name: float(np.linalg.norm(g - exact) / np.linalg.norm(exact))
            for name, g in grads.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--b", type=int, default=16)
    parser.add_argument("--lr0", type=float, default=1e-3, help="SGD's rate (the paper's)")
    parser.add_argument("--sigma-ws", type=float, nargs="+", default=[0.1, 2.5])
    parser.add_argument("--width-resnet9", type=float, default=0.5)
    parser.add_argument("--width-resnet56", type=float, default=1.0)
    args = parser.parse_args(argv)
    for name, err in weight_gradient_errors().items():
        print(f"conv weight gradient, float32 vs float64, {name}: {err:.2g}", flush=True)
    ks = list(range(1, args.steps + 1))
    print("| network | width | sigma_w | float32 run | " + " | ".join(f"k={k}" for k in ks)
          + " |")
    print("| --- " * (4 + len(ks)) + "|")
    for arch in ("resnet9", "resnet56"):
        width = getattr(args, f"width_{arch}")
        result = drift(arch, width, tuple(args.sigma_ws), args.steps, args.b, args.lr0)
        for run, sigma_w in enumerate(args.sigma_ws):
            for name, table in result.items():
                cells = " | ".join(f"{d:.2g}" for d in table[run])
                print(f"| {arch} | {width:g} | {sigma_w:g} | {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
