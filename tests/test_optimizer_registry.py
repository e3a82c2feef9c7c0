"""Every optimizer module, tested from its DECLARATION: adding one needs no test edit.

Each registered optimizer (initmem.plan.optimizers.declarations()) is built with the
shared settings it declares (momentum, decays) set away from their defaults and checked
for what all of them share:
runs of a pack stay independent, a zero gradient in one run leaves the others alone, a
rate given as a tensor equals the same float, and its state (slots, run scalars, counter)
follows the runs wherever training moves it: a resume from a checkpoint file, a compaction
(the pack's state cut to the runs that go on) and the CUDA-graph capture's check (its save
and restore, on CPU) are all bitwise, so state kept outside them fails here.
Where the declaration names a Keras class, it is run step for step against that class in
float64, at the declared defaults (which must be Keras' defaults, but for the paper's
recipe's, PAPER_DEFAULTS) and with every declared
hyperparameter moved, so each reaches the math under Keras' name; where it names a PyTorch
`reference`, against that class alike, on the training weights and on the evaluation
weights (the class's eval()), within the declared tolerance. For every optimizer the
trainer's evaluation reads the evaluation weights it declares (the parameters where it
declares none), out of place.
"""

import dataclasses
import importlib
import inspect
import os

import numpy as np
import pytest
import torch
from fakes import FakeGraph
from keras_arguments import keras_kwargs, torch_kwargs
from torch import nn

from initmem.errors import InputError
from initmem.plan import grid
from initmem.plan.optimizers import OPTIMIZERS, declarations
from initmem.plan.spec import Recipe, SpecError
from initmem.training import checkpoint, data
from initmem.training.models import ConvNormReLU, KerasBatchNorm, build_model
from initmem.training.optimizers import build_optimizer, run_rows
from initmem.training.step import WARMUP_STEPS, StepExecutor, train_step
from initmem.training.trainer import evaluate, evaluation_state

STEPS = 5
LRS = [1e-2 * (1 - 0.1 * k) for k in range(STEPS)]  # a moving rate, as under a schedule
# settings several optimizers declare, each set away from its default where declared
SHARED = {"momentum": 0.8, "weight_decay": 0.05, "adam_weight_decay": 0.02}
# Declared defaults that are the paper's recipe, not the Keras class's: no decay unless a
# config sets it (Keras' AdamW and Muon decay at 0.004), and the momentum of the optimizer
# that requires one (SGD with momentum: 0.9; Keras' SGD: 0).
PAPER_DEFAULTS = ("weight_decay", "adam_weight_decay")
SHAPES = {"conv.kernel": (4, 3, 3, 3), "dense.kernel": (3, 4), "dense.bias": (4,)}


def registry_recipe(name: str, hyperparameters: dict | None = None,
                    shared: bool = True) -> Recipe:
    """The optimizer's recipe: its SHARED settings (unless not `shared`), then these."""
    declared = declarations()[name].hyperparameters
    settings = {k: v for k, v in SHARED.items() if shared and k in declared}
    return Recipe(family="test", arch="resnet9", optimizer=name, b=10, epochs=1,
                  train_subset=100, hyperparameters={**settings, **(hyperparameters or {})})


def moved(name: str) -> dict[str, float]:
    """Every declared hyperparameter moved off its default (counts by one; a zero or
    null, a decay, to a small one)."""
    return {k: v + 1 if isinstance(v, int) else v * 0.9 if v else 0.03
            for k, v in declarations()[name].hyperparameters.items()}


def build(recipe: Recipe, params: dict[str, nn.Parameter]):
    module = importlib.import_module(f"initmem.training.optimizers.{recipe.optimizer}")
    return module.build(recipe, params.items())


def packed_params(runs: int, seed: int = 0, dtype=torch.float32) -> dict[str, nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return {n: nn.Parameter(torch.randn((runs, *s), generator=gen, dtype=dtype))
            for n, s in SHAPES.items()}


def train(opt, params: dict[str, nn.Parameter], grads: list[dict], lrs=LRS) -> None:
    for g, lr in zip(grads, lrs, strict=False):
        for n, p in params.items():
            p.grad = g[n].clone()
        opt.step(lr)


def gradients(runs: int, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [{n: torch.randn((runs, *s), generator=gen) for n, s in SHAPES.items()}
            for _ in range(STEPS)]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_packed_runs_equal_runs_alone(name):
    recipe, grads = registry_recipe(name), gradients(3)
    packed = packed_params(3)
    solo = [{n: nn.Parameter(p.detach()[i:i + 1].clone()) for n, p in packed.items()}
            for i in range(3)]
    train(build(recipe, packed), packed, grads)
    for i, params in enumerate(solo):
        train(build(recipe, params), params, [{n: g[n][i:i + 1] for n in g} for g in grads])
        for n, p in params.items():
            torch.testing.assert_close(p.detach()[0], packed[n].detach()[i], rtol=0, atol=0)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_zero_grad_in_one_run_leaves_the_other_alone(name):
    recipe, grads = registry_recipe(name), gradients(2)
    a, b = packed_params(2), packed_params(2)
    quiet = [{n: g[n].clone().index_fill_(0, torch.tensor([1]), 0.0) for n in g} for g in grads]
    train(build(recipe, a), a, grads)
    train(build(recipe, b), b, quiet)
    for n in SHAPES:
        torch.testing.assert_close(a[n].detach()[0], b[n].detach()[0], rtol=0, atol=0)
        assert not torch.equal(a[n][1], b[n][1]), n  # the quiet run saw other steps


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_resume_from_a_checkpoint_is_bitwise(name, tmp_path):
    """Two updates, the state through a checkpoint file, a new optimizer, three more."""
    recipe, grads = registry_recipe(name), gradients(2)
    straight, resumed = packed_params(2), packed_params(2)
    train(build(recipe, straight), straight, grads)
    first = build(recipe, resumed)
    train(first, resumed, grads[:2], LRS[:2])
    checkpoint.save(tmp_path, {"optimizer": first.state_dict()})
    again = build(recipe, resumed)
    again.load_state_dict(checkpoint.read(tmp_path / checkpoint.LATEST, 1 << 20)["optimizer"])
    train(again, resumed, grads[2:], LRS[2:])
    for n in SHAPES:
        assert torch.equal(straight[n], resumed[n]), n


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_compaction_keeps_the_state_of_the_runs_that_go_on(name):
    """After two updates of a pack of 3, runs 0 and 2 go on as a pack of 2 from the state
    cut as the trainer cuts it (run_rows): they end where the pack of 3 leaves them."""
    recipe, grads, rows = registry_recipe(name), gradients(3), [0, 2]
    whole, cut = packed_params(3), packed_params(3)
    train(build(recipe, whole), whole, grads)
    first = build(recipe, cut)
    train(first, cut, grads[:2], LRS[:2])
    kept = {n: nn.Parameter(p.detach()[rows].clone()) for n, p in cut.items()}
    again = build(recipe, kept)
    again.load_state_dict(run_rows(first.state_dict(), rows))
    train(again, kept, [{n: g[n][rows] for n in g} for g in grads[2:]], LRS[2:])
    for n in SHAPES:
        assert torch.equal(kept[n], whole[n][rows]), n


def test_a_state_saved_before_run_scalars_loads_only_where_none_are_declared():
    """Checkpoints written before run scalars existed hold none: an optimizer without any
    resumes from them; one with a run scalar refuses, naming what it needs."""
    adam, nadam = (build(registry_recipe(n), packed_params(2)) for n in ("adam", "nadam"))
    adam.load_state_dict({k: v for k, v in adam.state_dict().items() if k != "run_scalars"})
    older = {k: v for k, v in nadam.state_dict().items() if k != "run_scalars"}
    with pytest.raises(InputError, match=r"has run_scalars \[\]; this optimizer needs "
                                         r"exactly \['u_product'\]"):
        nadam.load_state_dict(older)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_graph_check_saves_and_restores_the_whole_state(name):
    """The CUDA-graph path on CPU (FakeGraph): its capture check saves the state, steps
    eagerly, restores and replays. State outside Optimizer.state_tensors() would advance
    twice there and the graph would be dropped; here it is kept and every replayed update
    equals the eager one, bitwise, parameters and optimizer state alike."""
    recipe, n, b = dataclasses.replace(registry_recipe(name), width=0.03), 2, 4
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn((n, b, 3, 32, 32), generator=gen), torch.randint(10, (n, b), generator=gen)
    done = []
    for kind in (StepExecutor, FakeGraph):
        model = build_model(recipe, n)
        model.init_([1.0, 2.0], [torch.Generator().manual_seed(s) for s in range(n)])
        done.append(kind(model, build_optimizer(recipe, model), recipe.l2, b, lambda _: (x, y)))
        for k in range(WARMUP_STEPS + 3):  # warm-ups, the capture (its check replays), 2 more
            done[-1](1e-2 * 0.9**k, torch.zeros((n, b)))
    eager, graph = done
    assert graph.calls == {"warmup": WARMUP_STEPS, "capture": 1, "replay": 3}
    assert graph.dropped is None
    for a, b in zip(eager._state(), graph._state(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_rate_as_tensor_equals_rate_as_float(name):
    recipe, grads = registry_recipe(name), gradients(2)
    a, b = packed_params(2), packed_params(2)
    train(build(recipe, a), a, grads)
    train(build(recipe, b), b, grads, [torch.tensor(x) for x in LRS])
    for n in SHAPES:
        torch.testing.assert_close(a[n], b[n], rtol=0, atol=0)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_field_it_does_not_take_is_refused_by_the_grid(name):
    """`initmem grid` refuses, in one line, a hyperparameter the optimizer's declaration
    does not take (a config's momentum on Adam, rho on SGD)."""
    declared = declarations()[name]
    untaken = [k for k in SHARED if k not in declared.hyperparameters]
    config = {"optimizers": {name: {}}, "seed_sets": {"one": [0]}, "sigma_sets": {"s": [1.0]},
              "families": {"main": {"sigma_w": "s", "seeds": "one", "recipe": {
                  "arch": "resnet9", "optimizer": name, "b": 10, "epochs": 1,
                  "train_subset": 100}}}}
    for key in untaken:
        config["optimizers"][name] = {"hyperparameters": {key: SHARED[key]}}
        with pytest.raises(InputError, match=f"^families.main .*{key}=.* for optimizer {name}"):
            grid.validate_config(config)
    config["optimizers"][name] = {"hyperparameters": {"not_a_hyperparameter": 1.0}}
    with pytest.raises(InputError, match="not_a_hyperparameter=1.0 is not allowed for "
                                         f"optimizer {name}; its hyperparameters: "):
        grid.validate_config(config)


@pytest.mark.parametrize("name", [n for n in OPTIMIZERS if declarations()[n].hyperparameters])
def test_hyperparameters_name_the_run_only_when_moved(name):
    default = registry_recipe(name, shared=False)
    assert default.hyperparameters is None and default == registry_recipe(
        name, declarations()[name].hyperparameters)  # defaults spelled out: the same run
    changed = registry_recipe(name, moved(name))
    assert changed.recipe_id != default.recipe_id
    assert Recipe(**{**vars(changed)}) == changed  # the stored text reads back as itself
    assert changed.optimizer_hyperparameters == pytest.approx(moved(name))


def test_hyperparameters_must_be_numbers():
    with pytest.raises(SpecError, match=r"hyperparameters.beta_2='x' is not allowed; "
                       r"hyperparameters.beta_2 must be of type number"):
        registry_recipe("adam", {"beta_2": "x"})
    with pytest.raises(SpecError, match=r"ns_steps=5.5 is not allowed; it must be an integer"):
        registry_recipe("muon", {"ns_steps": 5.5})


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_evaluation_sees_the_declared_weights(name):
    """After three updates of a pack of 2, the trainer's evaluation state holds the weights
    the optimizer declares (evaluation_parameters; where it declares none the state is None:
    the model is evaluated as it is), with BatchNorm's moving statistics re-estimated at
    them; evaluating it is evaluating a network loaded with it, run by run too; and the
    parameters, buffers and optimizer state are bitwise as they were (a resume stays
    bitwise)."""
    recipe, b = dataclasses.replace(registry_recipe(name), width=0.03), 8
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (5 * b, 3, 32, 32), generator=gen, dtype=torch.uint8)
    y = torch.randint(10, (5 * b,), generator=gen)
    model = build_model(recipe, 2)
    model.init_([1.0, 2.0], [torch.Generator().manual_seed(s) for s in range(2)])
    opt = build_optimizer(recipe, model)
    for k in range(3):
        batch = slice(k * b, (k + 1) * b)
        train_step(model, opt, data.as_float(x[batch]).expand(2, -1, -1, -1, -1),
                   y[batch].expand(2, -1), LRS[k], 1e-3)
    before = [t.clone() for t in (*model.state_dict().values(), *opt.state_tensors())]
    state, declared = evaluation_state(model, opt, x, b), opt.evaluation_parameters()
    after = (*model.state_dict().values(), *opt.state_tensors())
    assert all(torch.equal(a, z) for a, z in zip(before, after, strict=True))
    if not declared:
        assert state is None
        return
    for n, p in model.named_parameters():
        assert torch.equal(state[n], declared[n]) and not torch.equal(state[n], p), n
    conv = model.body[0][0]  # the first BatchNorm's input: its conv at the declared weights
    conv_out = [torch.func.functional_call(conv, {"kernel": state["body.0.0.kernel"],
                                                  "bias": state["body.0.0.bias"]},
                                           (data.as_float(x[i:i + b]).repeat(1, 2, 1, 1),))
                for i in range(0, len(x), b)]
    torch.testing.assert_close(state["body.0.1.moving_mean"], torch.stack(
        [o.mean((0, 2, 3)) for o in conv_out]).mean(0).view(2, -1), rtol=1e-5, atol=1e-6)
    loaded = build_model(recipe, 2)
    loaded.load_state_dict(state)
    expected = evaluate(loaded, x, y, 1e-3)
    for got, rtol in ((evaluate(model, x, y, 1e-3, state=state), 0.0),
                      (evaluate(model, x, y, 1e-3, build_model(recipe, 1), state), 1e-5)):
        for a, z in zip(got, expected, strict=True):
            torch.testing.assert_close(a, z, rtol=rtol, atol=rtol)


# ---- against a PyTorch reference, in float64 ----

REFERENCE_NAMED = [n for n in OPTIMIZERS if declarations()[n].reference]


def reference_class(path: str):
    module, _, name = path.rpartition(".")
    return getattr(pytest.importorskip(module), name)


@pytest.mark.parametrize("name", REFERENCE_NAMED)
def test_declared_defaults_are_the_references_defaults(name):
    declared = declarations()[name]
    signature = inspect.signature(reference_class(declared.reference))
    for key, value in torch_kwargs(registry_recipe(name, shared=False)).items():
        if key not in PAPER_DEFAULTS:
            assert signature.parameters[key].default == value, key


@pytest.mark.parametrize("hyperparameters", ["declared", "moved"])
@pytest.mark.parametrize("name", REFERENCE_NAMED)
def test_steps_equal_the_reference(name, hyperparameters):
    """Five updates of ours and of the declared PyTorch class on a kernel and a bias from
    equal weights and gradients in float64, the rate moving: equal within the declared
    tolerance on the training weights, then on the evaluation weights (the reference's
    eval(), where it has one; ours' evaluation_parameters). Measured for Schedule-Free
    AdamW: <= 1.2e-16 apart, declared or moved."""
    recipe = registry_recipe(name, moved(name) if hyperparameters == "moved" else None)
    gen = torch.Generator().manual_seed(3)
    initial = {"kernel": torch.randn((3, 4), generator=gen, dtype=torch.float64),
               "bias": torch.randn((4,), generator=gen, dtype=torch.float64)}
    theirs = {n: nn.Parameter(t.clone()) for n, t in initial.items()}
    ours = {n: nn.Parameter(t[None].clone()) for n, t in initial.items()}
    reference = reference_class(recipe.declaration.reference)(
        list(theirs.values()), lr=LRS[0], **torch_kwargs(recipe))
    getattr(reference, "train", lambda: None)()  # Schedule-Free's: gradients are taken at y
    opt = build(recipe, ours)
    for k in range(STEPS):
        grads = {n: torch.randn(t.shape, generator=gen, dtype=torch.float64)
                 for n, t in initial.items()}
        for n in initial:
            theirs[n].grad, ours[n].grad = grads[n].clone(), grads[n][None].clone()
        for group in reference.param_groups:
            group["lr"] = LRS[k]
        reference.step()
        opt.step(LRS[k])
    atol = recipe.declaration.tolerance
    for n, p in theirs.items():
        assert (p - initial[n]).abs().max() > 1e-3, n  # it moved
        torch.testing.assert_close(ours[n][0], p, rtol=0, atol=atol, msg=n)
    evaluated = opt.evaluation_parameters() or ours
    getattr(reference, "eval", lambda: None)()
    for n, p in theirs.items():
        torch.testing.assert_close(evaluated[n][0], p, rtol=0, atol=atol, msg=n)


# Against a reference on a network, the conv biases before a BatchNorm (rounding noise
# normalised): measured 4.3e-9; Schedule-Free's eps 10% off is 1.3e-5 off
NOISE_RTOL = 1e-7


class ReferenceStep:
    """A PyTorch optimizer stepped as ours is (step(lr)), for train_step."""

    def __init__(self, reference):
        self.reference = reference

    def step(self, lr: float) -> None:
        for group in self.reference.param_groups:
            group["lr"] = lr
        self.reference.step()


@pytest.mark.parametrize("name", REFERENCE_NAMED)
def test_steps_on_a_network_equal_the_reference(name):
    """Four training steps of a ResNet-9 (width 1/16, BatchNorm, L2) in float64, ours and
    the reference each stepping its own copy from equal weights on equal batches: the
    weights, then the evaluation weights, agree within the declared tolerance of each
    tensor's largest entry; the conv biases before a BatchNorm within NOISE_RTOL: their
    gradients are rounding noise (the normalisation removes them), which Adam-type
    normalisation makes O(1) (tests/test_keras_networks.py meets them against Keras).
    Measured for Schedule-Free AdamW: 8.5e-15 and 4.3e-9."""
    recipe = dataclasses.replace(registry_recipe(name), width=0.0625)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn((4, 1, 8, 3, 32, 32), generator=gen, dtype=torch.float64)
    y = torch.randint(10, (4, 1, 8), generator=gen)
    nets = [build_model(recipe, 1).double() for _ in range(2)]
    nets[0].init_([1.0], [torch.Generator().manual_seed(0)])
    nets[1].load_state_dict(nets[0].state_dict())
    ours = build_optimizer(recipe, nets[0])
    theirs = reference_class(recipe.declaration.reference)(
        list(nets[1].parameters()), lr=1e-3, **torch_kwargs(recipe))
    getattr(theirs, "train", lambda: None)()
    for k in range(4):
        for net, opt in zip(nets, (ours, ReferenceStep(theirs)), strict=True):
            train_step(net, opt, x[k], y[k], 1e-3, 1e-3)
    evaluated = ours.evaluation_parameters() or dict(nets[0].named_parameters())
    noise = {f"{name}.0.bias" for name, m in nets[0].named_modules()
             if isinstance(m, ConvNormReLU) and isinstance(m[1], KerasBatchNorm)}
    for kind in ("training", "evaluation"):
        if kind == "evaluation":
            getattr(theirs, "eval", lambda: None)()  # the reference's x, in place
        for (n, p), (_, q) in zip(nets[0].named_parameters(), nets[1].named_parameters(),
                                  strict=True):
            ours_now = p if kind == "training" else evaluated[n]
            rtol = NOISE_RTOL if n in noise else recipe.declaration.tolerance
            assert (ours_now - q).abs().max() <= rtol * q.abs().max(), (kind, n)


# ---- against Keras, in float64 ----

KERAS_NAMED = [n for n in OPTIMIZERS if declarations()[n].keras]


@pytest.fixture(scope="module")
def keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    pytest.importorskip("tensorflow", reason="the Keras reference needs pip install -e .[keras]")
    return pytest.importorskip("keras")


@pytest.mark.keras
@pytest.mark.parametrize("name", KERAS_NAMED)
def test_declared_defaults_are_keras_defaults(name, keras):
    declared = declarations()[name]
    signature = inspect.signature(getattr(keras.optimizers, declared.keras))
    for key, value in declared.hyperparameters.items():
        assert key in signature.parameters, key  # Keras' name
        if key not in (*PAPER_DEFAULTS, *declared.requires):
            assert signature.parameters[key].default == value, key


def keras_steps(keras, recipe: Recipe, dtype: str) -> tuple[dict, dict]:
    """Five updates of Keras' optimizer and ours on a 2-d kernel and a bias from equal
    weights and gradients, in `dtype`: (ours, Keras') final weights."""
    import tensorflow as tf

    shapes = {"kernel": (3, 4), "bias": (4,)}  # unprefixed: Muon's exclude_layers skip them
    rng = np.random.default_rng(3)
    initial = {n: rng.normal(size=s).astype(dtype) for n, s in shapes.items()}
    grads = [{n: rng.normal(size=s).astype(dtype) for n, s in shapes.items()}
             for _ in range(STEPS)]
    variables = {n: keras.Variable(initial[n], dtype=dtype, name=n)
                 for n in shapes}
    lr = keras.Variable(LRS[0], dtype=dtype, trainable=False)
    reference = getattr(keras.optimizers, recipe.declaration.keras)(
        learning_rate=lambda: lr, **keras_kwargs(recipe))
    ours = {n: nn.Parameter(torch.from_numpy(initial[n])[None].clone()) for n in shapes}
    opt = build(recipe, ours)
    for k in range(STEPS):
        lr.assign(LRS[k])
        reference.apply_gradients([(tf.constant(grads[k][n]), v) for n, v in variables.items()])
        for n, p in ours.items():
            p.grad = torch.from_numpy(grads[k][n])[None].clone()
        opt.step(LRS[k])
    for n, v in variables.items():
        assert np.abs(v.numpy() - initial[n]).max() > 1e-3, n  # it moved
    assert not opt.evaluation_parameters()  # Keras evaluates at its variables: so must we
    return ({n: p[0].detach().numpy() for n, p in ours.items()},
            {n: v.numpy() for n, v in variables.items()})


@pytest.mark.keras
@pytest.mark.parametrize("hyperparameters", ["declared", "moved"])
@pytest.mark.parametrize("name", KERAS_NAMED)
def test_steps_equal_keras(name, hyperparameters, keras):
    """Measured: equal in float64 (0.0 apart) for every optimizer, declared or moved; moving
    the hyperparameters moves the weights by 1e-3 to 3e-2, and a Keras RMSprop written with
    its epsilon outside the square root instead of inside fails here (1e-9 off). Keras'
    Muon cannot step float64 variables (its lr_adjust multiplies by a float32 scalar), so
    an optimizer whose Keras class fails in float64 is compared in float32 (Muon: 1.5e-8
    apart; atol 1e-6)."""
    from tensorflow.errors import InvalidArgumentError

    recipe = registry_recipe(name, moved(name) if hyperparameters == "moved" else None)
    try:
        ours, expected = keras_steps(keras, recipe, "float64")
        atol = 1e-12  # measured 0.0: an epsilon misplaced is 1e-9 off
    except InvalidArgumentError:
        ours, expected = keras_steps(keras, recipe, "float32")
        atol = 1e-6
    for n, value in expected.items():
        np.testing.assert_allclose(ours[n], value, rtol=0, atol=atol, err_msg=n)


def test_a_config_entry_is_display_keys_then_recipe_defaults():
    """One list of display keys (DISPLAY_KEYS): the schema's entry holds them, the echoed
    declaration keys and recipe fields only; OptimizerDisplay shows each."""
    import dataclasses

    from initmem.plan.optimizers import DISPLAY_KEYS, ECHOED_KEYS, OptimizerDisplay
    from initmem.plan.schema import schema

    entry = set(schema()["properties"]["optimizers"]["additionalProperties"]["properties"])
    recipe_fields = {f.name for f in dataclasses.fields(Recipe)}
    assert set(DISPLAY_KEYS) | set(ECHOED_KEYS) <= entry
    assert entry - set(DISPLAY_KEYS) - set(ECHOED_KEYS) <= recipe_fields
    assert set(DISPLAY_KEYS) | set(ECHOED_KEYS) <= {
        f.name for f in dataclasses.fields(OptimizerDisplay)}
