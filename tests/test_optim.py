"""Optimizers and schedule against the formulas of the Keras recipe, recomputed in float64."""

import math
from functools import partial

import numpy as np
import pytest
import torch
from torch import nn

from initmem.plan.schedule import learning_rate
from initmem.plan.spec import Recipe
from initmem.training.models import KerasBatchNorm, PackedConv2d, PackedDense, build_model
from initmem.training.optimizers import build_optimizer
from initmem.training.optimizers.muon import Muon, newton_schulz

LRS = [0.05, 0.03, 0.01, 0.02]  # a moving rate, as under a schedule
B1, B2, EPS = 0.9, 0.999, 1e-7


def recipe(optimizer: str, **kw) -> Recipe:
    base = dict(family="test", arch="resnet9", optimizer=optimizer, b=10, epochs=2,
                train_subset=100, width=0.0625)  # K = 2 * ceil(100 / 10) = 20
    return Recipe(**{**base, **kw})


# the optimizers checked here by formula; what every optimizer shares is tested from the
# registry (tests/test_optimizer_registry.py)
RECIPES = {
    "sgd": recipe("sgd"),
    "sgd_momentum": recipe("sgd_momentum"),
    "adam": recipe("adam"),
    "adamw": recipe("adamw", hyperparameters={"weight_decay": 0.1}),
    "muon": recipe("muon", hyperparameters={"weight_decay": 0.1}),
    "muon_orthogonal": recipe("muon_orthogonal", hyperparameters={"weight_decay": 0.1}),
}


class Toy(nn.Module):
    """One layer of each kind, packed over n runs."""

    def __init__(self, n: int = 2, seed: int = 0):
        super().__init__()
        self.conv = PackedConv2d(n, 3, 4)
        self.bn = KerasBatchNorm(n, 4)
        self.dense = PackedDense(n, 4, 5)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))


def grad_sequence(model: nn.Module, steps: int, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [{n: torch.randn(p.shape, generator=gen) for n, p in model.named_parameters()}
            for _ in range(steps)]


def train(model: nn.Module, opt, grads: list[dict[str, torch.Tensor]], lrs=LRS) -> None:
    params = dict(model.named_parameters())
    for g, lr in zip(grads, lrs, strict=False):
        for n, p in params.items():
            p.grad = None if g.get(n) is None else g[n].clone()
        opt.step(lr)


def numpy_params(model: nn.Module) -> dict[str, np.ndarray]:
    return {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}


def assert_close(model: nn.Module, expected: dict[str, np.ndarray], rtol=2e-6, atol=1e-7):
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().double().numpy(), expected[n], rtol=rtol,
                                   atol=atol, err_msg=n)


# ---- float64 references, written from the formulas in the recipe notes ----

def ref_sgd(w, grads, lrs, mu, wd=0.0):
    v = {n: np.zeros_like(x) for n, x in w.items()}
    for g, lr in zip(grads, lrs, strict=False):
        for n in w:
            w[n] = w[n] - lr * wd * w[n]
            v[n] = mu * v[n] - lr * g[n].double().numpy()
            w[n] = w[n] + v[n]
    return w


def ref_adam(w, grads, lrs, wd=0.0):
    m = {n: np.zeros_like(x) for n, x in w.items()}
    v = {n: np.zeros_like(x) for n, x in w.items()}
    for t, (g, lr) in enumerate(zip(grads, lrs, strict=False), start=1):
        for n in w:
            if g.get(n) is None:
                continue
            gn = g[n].double().numpy()
            w[n] = w[n] - lr * wd * w[n]
            m[n] = B1 * m[n] + (1 - B1) * gn
            v[n] = B2 * v[n] + (1 - B2) * gn**2
            w[n] = w[n] - lr * bias_correction(t) * m[n] / (np.sqrt(v[n]) + EPS)
    return w


def bias_correction(t: int) -> float:
    """sqrt(1 - beta2^t) / (1 - beta1^t) with the powers and 1 - power in float32, as Keras
    computes them (1 - 0.999 in float32 is 1.3e-5 off, which Keras' numbers carry)."""
    one, t32 = np.float32(1), np.float32(t)
    return math.sqrt(one - np.float32(B2) ** t32) / (one - np.float32(B1) ** t32)


def ref_ns(x):
    """Newton-Schulz on one matrix, float64."""
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(5):
        a = x @ x.T
        x = 3.4445 * x + (-4.7750 * a + 2.0315 * a @ a) @ x
    return x.T if tall else x


def ref_muon_path(w, grads, lrs, wd):
    m = np.zeros_like(w)
    for g, lr in zip(grads, lrs, strict=False):
        w = w - lr * wd * w
        m = 0.95 * m + g
        u = g + 0.95 * m
        for i in range(w.shape[0]):  # each run alone
            mat = u[i].reshape(u.shape[1], -1)
            o = ref_ns(mat) * math.sqrt(max(mat.shape)) * 0.2
            w[i] = w[i] - lr * o.reshape(w[i].shape)
    return w


# ---- schedule ----

def test_cosine_schedule_at_known_steps():
    r = recipe("sgd", lr0=0.1, cosine_alpha=0.01)
    assert r.total_steps == 20
    assert learning_rate(r, 0) == pytest.approx(0.1, rel=1e-15)
    assert learning_rate(r, 10) == pytest.approx(0.1 * (0.01 + 0.99 * 0.5), rel=1e-15)
    assert learning_rate(r, 5) == pytest.approx(
        0.1 * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi / 4))), rel=1e-15)
    assert learning_rate(r, 20) == pytest.approx(0.1 * 0.01, rel=1e-12)
    assert learning_rate(r, 500) == learning_rate(r, 20)


def test_constant_schedule_and_bad_step():
    r = recipe("sgd", lr0=0.1, schedule="constant")
    assert [learning_rate(r, k) for k in (0, 10, 20, 10**6)] == [0.1] * 4
    with pytest.raises(ValueError, match="k=-1"):
        learning_rate(r, -1)


# ---- each optimizer, several steps by hand ----

@pytest.mark.parametrize("name, reference", [
    ("sgd", partial(ref_sgd, mu=0.0)), ("sgd_momentum", partial(ref_sgd, mu=0.9)),
    ("adam", partial(ref_adam, wd=0.0)), ("adamw", partial(ref_adam, wd=0.1)),
])
def test_optimizer_matches_keras_formula(name, reference):
    model = Toy()
    grads = grad_sequence(model, 4)
    expected = reference(numpy_params(model), grads, LRS)
    train(model, build_optimizer(RECIPES[name], model), grads)
    assert_close(model, expected)


def test_sgd_momentum_is_not_pytorch_form():
    """Keras keeps each step's rate inside the buffer; PyTorch rescales the buffer by eta_k."""
    model = Toy()
    grads = grad_sequence(model, 4)
    w0 = numpy_params(model)
    train(model, build_optimizer(RECIPES["sgd_momentum"], model), grads)
    torch_form = {n: x.copy() for n, x in w0.items()}
    buf = {n: np.zeros_like(x) for n, x in w0.items()}
    for g, lr in zip(grads, LRS, strict=True):
        for n in w0:
            buf[n] = 0.9 * buf[n] + g[n].double().numpy()
            torch_form[n] -= lr * buf[n]
    kernel = model.conv.kernel.detach().double().numpy()
    assert np.abs(kernel - torch_form["conv.kernel"]).max() > 1e-3


def test_adamw_decays_biases_and_norm_params():
    """With zero gradients Adam does not move; only the decoupled decay acts, on everything."""
    model = Toy()
    w0 = numpy_params(model)
    zero = [{n: torch.zeros_like(p) for n, p in model.named_parameters()}] * 3
    train(model, build_optimizer(RECIPES["adamw"], model), zero)
    factor = np.prod([1 - lr * 0.1 for lr in LRS[:3]])
    for name in ("conv.bias", "bn.gamma", "bn.beta", "dense.bias", "dense.kernel"):
        np.testing.assert_allclose(dict(model.named_parameters())[name].detach().numpy(),
                                   w0[name] * factor, rtol=1e-6, err_msg=name)


def test_missing_grad_is_skipped_but_counter_advances():
    """Keras filters None gradients (no decay, no update) yet counts the step for bias
    correction: a variable first updated at step 2 uses t = 2."""
    model = Toy()
    grads = grad_sequence(model, 3)
    grads[0] = {n: g for n, g in grads[0].items() if n != "dense.bias"}
    w0 = numpy_params(model)
    opt = build_optimizer(RECIPES["adamw"], model)
    train(model, opt, grads[:1])
    np.testing.assert_array_equal(model.dense.bias.detach().numpy(), w0["dense.bias"])
    train(model, opt, grads[1:], LRS[1:])
    expected = ref_adam(numpy_params(Toy()), grads, LRS, 0.1)
    assert_close(model, expected)
    assert int(opt.iterations) == 3


# ---- Muon routing ----

def test_paper_muon_is_adamw_step_for_step_on_resnet9():
    r = recipe("muon", hyperparameters={"weight_decay": 1e-3})
    models = [build_model(r, 2) for _ in range(2)]
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for ps in zip(*(m.parameters() for m in models), strict=True):
            init = torch.randn(ps[0].shape, generator=gen) * 0.1
            for p in ps:
                p.copy_(init)
    muon = build_optimizer(r, models[0])
    adamw = build_optimizer(recipe("adamw", hyperparameters={"weight_decay": 1e-3}), models[1])
    assert isinstance(muon, Muon) and muon.muon_names == []
    assert set(muon.adam_names) == {n for n, _ in models[0].named_parameters()}
    grads = grad_sequence(models[0], 3)
    train(models[0], muon, grads)
    train(models[1], adamw, grads)
    for p0, p1 in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(p0, p1)
    for key, t in adamw.state_dict()["slots"].items():
        assert torch.equal(muon.state_dict()["slots"][key], t)


def test_muon_routing_rule():
    """Per-run ndim 2 and not excluded -> Muon; conv kernels only when flattened."""
    toy = Toy()
    named = list(toy.named_parameters())
    assert Muon(named, exclude_layers=()).muon_names == ["dense.kernel"]
    assert Muon(named).muon_names == []
    assert Muon(named, flatten_conv=True).muon_names == ["conv.kernel"]


@pytest.mark.parametrize("flatten_conv", [False, True])
def test_muon_path_matches_formula(flatten_conv):
    model = Toy()
    grads = grad_sequence(model, 3)
    name = "conv.kernel" if flatten_conv else "dense.kernel"  # dense (5, 4) is tall
    exclude = ("dense",) if flatten_conv else ()
    w0 = numpy_params(model)
    opt = Muon(model.named_parameters(), exclude, flatten_conv, {"weight_decay": 0.1})
    assert opt.muon_names == [name]
    train(model, opt, grads)
    expected = ref_muon_path(w0[name], [g[name].double().numpy() for g in grads], LRS, 0.1)
    np.testing.assert_allclose(dict(model.named_parameters())[name].detach().numpy(),
                               expected, rtol=1e-5, atol=1e-6)


def test_muon_orthogonal_differs_from_adamw():
    a, b = Toy(), Toy()
    grads = grad_sequence(a, 2)
    train(a, build_optimizer(RECIPES["muon_orthogonal"], a), grads)
    train(b, build_optimizer(RECIPES["adamw"], b), grads)
    assert not torch.allclose(a.conv.kernel, b.conv.kernel, atol=1e-3)
    torch.testing.assert_close(a.dense.kernel, b.dense.kernel, rtol=0, atol=0)


def test_newton_schulz_output_is_nearly_orthogonal():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(3, 8, 27, generator=gen) * torch.logspace(-2, 1, 27)  # ill-conditioned
    assert torch.linalg.svdvals(x).max() / torch.linalg.svdvals(x).min() > 20
    s = torch.linalg.svdvals(newton_schulz(x))
    assert s.min() > 0.6 and s.max() < 1.25
    s_tall = torch.linalg.svdvals(newton_schulz(x.mT))
    assert s_tall.min() > 0.6 and s_tall.max() < 1.25


# ---- state ----

def test_load_state_dict_rejects_other_optimizer():
    toy = Toy()
    with pytest.raises(ValueError, match="slots"):
        build_optimizer(RECIPES["sgd"], toy).load_state_dict(
            build_optimizer(RECIPES["adam"], toy).state_dict())

