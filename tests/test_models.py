"""Models: parameter counts, Keras layer semantics, packing independence, initialisation.

The tests of a network's build run over every declared network (ARCHS), so a new entry of
initmem.plan.architectures is tested without a test naming it."""

import dataclasses
import math
import types

import pytest
import torch
import torch.nn.functional as F

from initmem.errors import InputError
from initmem.plan import bodies, memory
from initmem.plan.architectures import ARCHITECTURES, ARCHS
from initmem.plan.spec import Recipe
from initmem.training.models import (
    KerasBatchNorm,
    KerasLayerNorm,
    PackedConv2d,
    bn_variance_ratio,
    build_model,
    keras_param_count,
    same_padding,
    state_numel,
)


def recipe(arch="resnet9", width=1.0):
    return Recipe(family="t", arch=arch, optimizer="sgd", b=16, epochs=1, width=width)


@pytest.mark.parametrize("arch, millions", [("resnet9", 6.58), ("r9_avgpool", 6.58),
                                            ("resnet56", 0.86), ("resnet110", 1.74),
                                            ("resnet20", 0.27)])  # He et al., Table 6
def test_keras_parameter_counts_match_the_paper(arch, millions):
    assert round(keras_param_count(build_model(recipe(arch), 1)) / 1e6, 2) == millions


def test_vgg11_has_its_published_parameter_count():
    """VGG-11 with BatchNorm on CIFAR-10 (one dense layer on 512 features): 9,231,114
    trainable parameters, as CIFAR implementations print it; Keras' count and the plan's
    add the 2 x 2,752 BatchNorm moving statistics."""
    model = build_model(recipe("vgg11"), 1)
    assert sum(p.numel() for p in model.parameters()) == 9_231_114
    assert keras_param_count(model) == memory.parameter_count(recipe("vgg11")) == 9_236_618


def test_an_unknown_body_is_refused_in_one_line_everywhere(monkeypatch):
    """A network whose family has no module (initmem.plan.bodies) is refused, naming the
    body and the allowed ones, by the plan's count and by training's build: never built
    as another network."""
    monkeypatch.setitem(ARCHITECTURES, "resnet9",
                        dataclasses.replace(ARCHITECTURES["resnet9"], body="wide_resnet"))
    message = (r"^arch 'resnet9' has body='wide_resnet', which is not allowed; body must be "
               r"one of cifar_resnet, resnet9, vgg \(a module in .*bodies\)$")
    for use in (memory.parameter_count, lambda r: build_model(r, 1)):
        with pytest.raises(InputError, match=message):
            use(recipe("resnet9"))


def test_a_family_module_declares_builder_count_and_keras_twin():
    """A family module without its builder, its convs or its Keras twin (or the reason it
    has none) is refused in one line naming what is missing."""
    module = types.ModuleType("half")
    module.__file__, module.convs, module.keras = "half.py", len, None
    with pytest.raises(InputError, match=r"^half.py: build missing; a network family"):
        bodies._checked(module)
    module.build = len
    with pytest.raises(InputError, match=r"^half.py: NO_KERAS_TWIN missing"):
        bodies._checked(module)
    module.NO_KERAS_TWIN = "no Keras layer for it"
    assert bodies._checked(module) is module


def test_exact_counts_by_hand():
    # ResNet-9: conv+bias kernels 6,570,890 (incl. dense 5,130) + BN 4 x 2,240 channels.
    assert keras_param_count(build_model(recipe("resnet9"), 1)) == 6_570_890 + 4 * 2_240
    # LayerNorm has gamma and beta only: 2 x 2,240.
    assert keras_param_count(build_model(recipe("resnet9_ln"), 1)) == 6_570_890 + 2 * 2_240
    # Packing multiplies the storage, not the per-run count.
    assert keras_param_count(build_model(recipe("resnet56"), 3)) == 861_770
    # The memory bound counts the same tensors (not the last batch's variances).
    assert memory.parameter_count(recipe("resnet56")) == 861_770


@pytest.mark.parametrize("arch", ARCHS)
def test_the_plans_closed_form_count_is_the_built_networks(arch):
    """plan.memory counts parameters without torch (the plan refuses a width before any
    spec is written); it must be what training builds, at odd widths too."""
    for width in (0.01, 0.0625, 0.3, 1.0, 2.7):
        with torch.device("meta"):
            model = build_model(recipe(arch, width), 2)
        built = state_numel(model) // 2  # the state a checkpoint saves
        assert memory.parameter_count(recipe(arch, width)) == built, (arch, width)


def test_tensorflow_same_padding():
    assert same_padding(32, 3, 1) == (1, 1)
    assert same_padding(32, 3, 2) == (0, 1)  # TF puts the extra row at the bottom
    assert same_padding(32, 1, 2) == (0, 0)
    assert same_padding(7, 3, 2) == (1, 1)


def test_stride2_conv_samples_like_tensorflow():
    """Output (0, 0) of a stride-2 3x3 'same' conv sees rows/cols 0..1 plus 1 pad at
    the bottom/right only: with TF padding it covers x[0:2, 0:2] at kernel offset 0."""
    conv = PackedConv2d(1, 1, 1, 3, stride=2)
    with torch.no_grad():
        conv.kernel.zero_()
        conv.kernel[0, 0, 0, 0, 0] = 1.0  # top-left tap
        conv.bias.zero_()
    x = torch.arange(16.0).view(1, 1, 4, 4)
    y = conv(x)
    # TF: the top-left tap of output (i, j) reads x[2i, 2j] (no top/left padding).
    assert torch.equal(y[0, 0], x[0, 0, ::2, ::2])


def test_batchnorm_keras_moving_statistics_use_biased_variance():
    bn = KerasBatchNorm(1, 2)
    x = torch.randn(4, 2, 3, 3) * 3 + 1
    bn.train()
    y = bn(x)
    var, mean = torch.var_mean(x, dim=(0, 2, 3), correction=0)
    assert torch.allclose(bn.moving_mean[0], 0.01 * mean, atol=1e-6)
    assert torch.allclose(bn.moving_variance[0], 0.99 + 0.01 * var, atol=1e-6)
    expected = (x - mean.view(1, 2, 1, 1)) / torch.sqrt(var.view(1, 2, 1, 1) + 1e-3)
    assert torch.allclose(y, expected, atol=1e-5)
    bn.eval()
    y_eval = bn(x)
    expected_eval = (x - bn.moving_mean.view(1, 2, 1, 1)) / torch.sqrt(
        bn.moving_variance.view(1, 2, 1, 1) + 1e-3)
    assert torch.allclose(y_eval, expected_eval, atol=1e-5)


def test_bn_variance_ratio_by_hand_on_a_pack():
    """Two runs, two training-mode passes: per run and layer, the mean moving variance
    over the mean variance of the last batch, recomputed from the layers' inputs; the
    layer farthest from 1 in log terms is reported."""
    pack = build_model(recipe("resnet9", width=0.125), 2)
    pack.init_([0.1, 2.0], [torch.Generator().manual_seed(s) for s in (0, 1)])
    layers = [m for m in pack.modules() if isinstance(m, KerasBatchNorm)]
    inputs = {bn: [] for bn in layers}
    for bn in layers:
        bn.register_forward_pre_hook(lambda m, args: inputs[m].append(args[0].double()))
    assert bn_variance_ratio(pack).isnan().all()  # before any training step
    with torch.no_grad():
        for seed in (2, 3):
            pack(torch.rand(2, 4, 3, 32, 32, generator=torch.Generator().manual_seed(seed)))
    ratios = []
    for bn in layers:
        moving = torch.ones(2, bn.gamma.shape[1], dtype=torch.float64)
        for x in inputs[bn]:
            var = x.unflatten(1, (2, -1)).var(dim=(0, 3, 4), correction=0)
            moving = 0.99 * moving + 0.01 * var
        ratios.append(moving.mean(1) / var.mean(1))
    ratios = torch.stack(ratios)
    expected = ratios[ratios.log().abs().argmax(0), [0, 1]]
    torch.testing.assert_close(bn_variance_ratio(pack).double(), expected, rtol=1e-5, atol=0)
    assert expected[0] > 10 * expected[1]  # sigma_w = 0.1: far from converged


def test_bn_variance_ratio_is_nan_without_batchnorm():
    pack = build_model(recipe("resnet9_ln", width=0.125), 2)
    pack.init_([1.0, 1.0], [torch.Generator().manual_seed(s) for s in (0, 1)])
    with torch.no_grad():
        pack(torch.rand(2, 4, 3, 32, 32))
    assert bn_variance_ratio(pack).isnan().all()


def test_layernorm_normalises_each_pixel_over_channels_per_run():
    ln = KerasLayerNorm(2, 3)
    x = torch.randn(2, 6, 4, 4)
    y = ln(x).view(2, 2, 3, 4, 4)
    assert torch.allclose(y.mean(2), torch.zeros(2, 2, 4, 4), atol=1e-5)
    var = x.view(2, 2, 3, 4, 4).var(2, correction=0)
    assert torch.allclose(y.var(2, correction=0), var / (var + 1e-3), atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_pack_equals_runs_alone(arch):
    """Each run of a pack computes exactly what the same network alone computes."""
    torch.manual_seed(0)
    sigmas, seeds = [0.5, 1.0, 2.0], [3, 4, 5]
    pack = build_model(recipe(arch, width=0.125), 3)
    pack.init_(sigmas, [torch.Generator().manual_seed(s) for s in seeds])
    x = torch.rand(3, 4, 3, 32, 32)
    out = pack(x)
    for i in range(3):
        alone = build_model(recipe(arch, width=0.125), 1)
        alone.init_([sigmas[i]], [torch.Generator().manual_seed(seeds[i])])
        assert torch.allclose(alone(x[i:i + 1])[0], out[i], rtol=1e-4, atol=1e-5)
        assert torch.allclose(alone.kernel_fro_norm()[0], pack.kernel_fro_norm()[i])


def test_runs_do_not_leak_gradients_into_each_other():
    pack = build_model(recipe("resnet9", width=0.125), 2)
    pack.init_([1.0, 1.0], [torch.Generator().manual_seed(s) for s in (0, 1)])
    logits = pack(torch.rand(2, 4, 3, 32, 32))
    F.cross_entropy(logits[0], torch.zeros(4, dtype=torch.long)).backward()
    for p in pack.parameters():
        assert p.grad[1].abs().max() == 0


def test_initialisation_scales_kernels_by_sigma_over_fan_in_and_biases_by_0_2():
    model = build_model(recipe("resnet9", width=0.5), 2)
    model.init_([0.5, 2.0], [torch.Generator().manual_seed(s) for s in (0, 1)])
    for name, p in model.named_parameters():
        for i, sigma in enumerate([0.5, 2.0]):
            if name.endswith("kernel") and p[i].numel() > 5000:
                fan_in = p[i].shape[1:].numel()
                assert p[i].std().item() == pytest.approx(sigma / math.sqrt(fan_in), rel=0.05)
            elif name.endswith("bias") and p[i].numel() > 100:
                assert p[i].std().item() == pytest.approx(0.2, rel=0.25)
    # Norm layers start at gamma=1, beta=0.
    assert all(torch.all(p == 1) for n, p in model.named_parameters() if n.endswith("gamma"))


def test_initialisation_depends_only_on_the_runs_seed():
    a = build_model(recipe("resnet9", width=0.125), 2)
    a.init_([1.0, 1.0], [torch.Generator().manual_seed(s) for s in (7, 8)])
    b = build_model(recipe("resnet9", width=0.125), 1)
    b.init_([1.0], [torch.Generator().manual_seed(8)])
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa[1], pb[0])
