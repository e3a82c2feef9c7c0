"""The fast paths compute what the plain step computes.

CUDA graphs: on CPU, `FakeGraph` stands in for torch.cuda's capture and replay (recording
runs nothing; a replay runs the recorded step on the input buffers and writes the graph's
output tensors in place), so everything else of StepExecutor is tested here: warm-up,
input buffers, the rate as a device tensor, the partial last batch, the capture check and
the fall-back. The real capture is tested where torch sees a GPU.
"""

import pandas as pd
import pytest
import stopping
import torch
from fakes import FakeGraph

from initmem.errors import InputError
from initmem.plan.spec import Pack, Recipe, Run
from initmem.records.files import PROVENANCE_COLUMNS, read_records
from initmem.training import data, step
from initmem.training.command import speed_paths
from initmem.training.models import build_model
from initmem.training.optimizers import build_optimizer
from initmem.training.trainer import PackTrainer

# 256 images at b = 48: five full batches and a partial one of 16 per epoch; with
# augmentation, so a step's inputs are its slots and their flips and crops.
RECIPE = Recipe(family="test", arch="resnet9", optimizer="adamw", b=48, epochs=2,
                lr0=0.01, width=0.125, dataset="synthetic", train_subset=256,
                eval_subset=128, l2=1e-4, hyperparameters={"weight_decay": 1e-4},
                augment=True)
PACK = Pack(RECIPE, tuple(Run(RECIPE, s, seed) for s, seed in ((0.5, 0), (2.0, 1))))
FULL_PER_EPOCH = 5


class DriftingGraph(FakeGraph):
    """A replay that does not reproduce the eager update."""

    def _replay(self):
        super()._replay()
        with torch.no_grad():
            next(self.model.parameters()).add_(1e-3)


class UncapturableGraph(FakeGraph):
    def _capture(self):
        raise RuntimeError("operation not permitted when stream is capturing")


@pytest.fixture(scope="module")
def splits():
    return data.load_splits(RECIPE, root=None, device="cpu")


@pytest.fixture(scope="module")
def plain(splits, tmp_path_factory):
    return records(splits, tmp_path_factory.mktemp("plain"))


def records(splits, out, **speed):
    PackTrainer(PACK, splits, out, torch.device("cpu"), progress=False, **speed).run()
    return [read_records(out / r.run_dir) for r in PACK.runs]


def train_with(executor, splits, out, monkeypatch):
    made = []

    def build(*args, **kwargs):
        made.append(executor(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr("initmem.training.trainer.StepExecutor", build)
    return records(splits, out), made[0]


def assert_same_records(got, expected, **tolerance):
    for (history, summary), (history0, summary0) in zip(got, expected, strict=True):
        if tolerance:
            pd.testing.assert_frame_equal(history, history0, check_exact=False, **tolerance)
        else:
            pd.testing.assert_frame_equal(history, history0)
        outcomes = [c for c in summary0.columns if c not in (*PROVENANCE_COLUMNS, "determinism")]
        pd.testing.assert_frame_equal(summary[outcomes], summary0[outcomes],
                                      check_exact=not tolerance, **tolerance)


def test_graph_path_equals_plain_path_bitwise(splits, plain, tmp_path, monkeypatch):
    got, executor = train_with(FakeGraph, splits, tmp_path, monkeypatch)
    assert_same_records(got, plain)
    full = RECIPE.epochs * FULL_PER_EPOCH
    # 3 eager warm-ups, one capture (its update checked against an eager one), then
    # replays for the other full batches; the partial batches never touch the graph.
    assert executor.calls == {"warmup": step.WARMUP_STEPS, "capture": 1,
                              "replay": full - step.WARMUP_STEPS}
    assert executor.verify_diff == 0.0
    assert got[0][1]["determinism"].iloc[0].endswith(
        "CUDA-graph step, replay vs eager max |diff| 0, contiguous")
    assert plain[0][1]["determinism"].iloc[0].endswith("; eager step, contiguous")


@pytest.mark.parametrize("faulty", [DriftingGraph, UncapturableGraph])
def test_a_graph_that_fails_its_check_is_dropped_and_nothing_is_lost(
        faulty, splits, plain, tmp_path, monkeypatch, caplog):
    got, executor = train_with(faulty, splits, tmp_path, monkeypatch)
    assert_same_records(got, plain)  # the checked update is the eager one
    assert executor.graph is None and executor.dropped
    assert "CUDA graph dropped" in caplog.text
    assert "eager step (CUDA graph dropped: " in got[0][1]["determinism"].iloc[0]


def test_agreement_of_a_capture_check():
    nan, inf = float("nan"), float("inf")
    ok = [torch.tensor([1.0, nan, inf]), torch.tensor([3])]
    assert step.agreement(ok, [t.clone() for t in ok]) == (0.0, True)
    assert step.agreement([torch.tensor([1.0])], [torch.tensor([1.0 + 1e-9])])[1]
    largest, agree = step.agreement([torch.tensor([1.0, 2.0])], [torch.tensor([1.0, 2.5])])
    assert (largest, agree) == (0.5, False)
    assert step.agreement([torch.tensor([nan])], [torch.tensor([1.0])]) == (inf, False)


@pytest.mark.slow
def test_channels_last_changes_layout_not_values(splits, tmp_path):
    """float64, so only summation order differs between the two layouts' kernels."""
    torch.set_default_dtype(torch.float64)
    try:
        contiguous = records(splits, tmp_path / "a")
        nhwc = records(splits, tmp_path / "b", channels_last=True)
    finally:
        torch.set_default_dtype(torch.float32)
    assert_same_records(nhwc, contiguous, rtol=1e-9, atol=1e-11)
    assert nhwc[0][1]["determinism"].iloc[0].endswith("eager step, channels_last")


def executor_on(splits, n, kind=step.StepExecutor):
    """An executor over the first b training images (unaugmented) for every run."""
    model = build_model(RECIPE, n)
    model.init_([1.0] * n, [torch.Generator().manual_seed(i) for i in range(n)])

    def batch(idx):
        return data.as_float(splits.train_x[idx]), splits.train_y[idx]

    executor = kind(model, build_optimizer(RECIPE, model), RECIPE.l2, RECIPE.b, batch)
    return executor, torch.arange(RECIPE.b).expand(n, -1)


def test_rate_is_read_from_the_device_tensor_at_every_step(splits):
    """The executor fills its rate tensor before each update, so a replay sees eta_k."""
    executor, idx = executor_on(splits, 1)
    for lr in (0.1, 0.05):
        executor(lr, idx)
        assert executor.lr.item() == pytest.approx(lr)


def test_a_diverged_run_does_not_cost_the_pack_its_graph(splits):
    """NaN in one run's weights (it diverged mid-epoch and is still computed) is the same
    NaN on both sides of the capture check."""
    executor, idx = executor_on(splits, 2, FakeGraph)
    with torch.no_grad():
        executor.model.dense.kernel[1].fill_(float("nan"))
    for _ in range(step.WARMUP_STEPS + 2):
        loss, _ = executor(0.01, idx)
    assert executor.calls["capture"] == 1 and executor.dropped is None
    assert loss[0].isfinite() and loss[1].isnan()


@pytest.mark.parametrize(("device", "arch", "graphs", "layout", "expected"), [
    ("cpu", "resnet56", "auto", "auto", (False, False)),
    ("cpu", "resnet9", "auto", "auto", (False, True)),
    ("cpu", "resnet9_ln", "auto", "auto", (False, False)),
    ("cpu", "resnet9", "off", "off", (False, False)),
    ("cpu", "resnet110", "off", "on", (False, True)),
    ("cuda", "resnet56", "auto", "auto", (True, True)),
    ("cuda", "resnet9", "off", "off", (False, False)),
])
def test_speed_paths_resolve_auto_by_device_and_arch(device, arch, graphs, layout, expected):
    paths = speed_paths(torch.device(device), arch, graphs, layout)
    assert (paths["cuda_graph"], paths["channels_last"]) == expected


def test_cuda_graphs_on_a_cpu_is_refused_by_name():
    with pytest.raises(InputError, match="--cuda-graphs on is not allowed on device cpu"):
        speed_paths(torch.device("cpu"), "resnet9", "on", "auto")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_cuda_graph_equals_eager(tmp_path):
    device = torch.device("cuda")
    cuda_splits = data.load_splits(RECIPE, root=None, device=device)
    runs = []
    for name, graph in (("eager", False), ("graph", True)):
        PackTrainer(PACK, cuda_splits, tmp_path / name, device, progress=False,
                    cuda_graph=graph).run()
        runs.append([read_records(tmp_path / name / r.run_dir) for r in PACK.runs])
    assert_same_records(runs[1], runs[0])
    assert "CUDA-graph step" in runs[1][0][1]["determinism"].iloc[0]


@pytest.fixture
def float64():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


@pytest.mark.slow
def test_compaction_captures_the_graph_again_for_the_smaller_pack(tmp_path, monkeypatch,
                                                                  float64):
    """When runs leave, the smaller pack's step is built anew: its own warm-up, capture
    and check, then replays; the records are the eager path's."""
    splits = data.load_splits(stopping.RECIPE, root=None, device="cpu")
    made = []

    def build(*args, **kwargs):
        made.append(FakeGraph(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr("initmem.training.trainer.StepExecutor", build)
    PackTrainer(stopping.PACK, splits, tmp_path / "graph", torch.device("cpu"),
                progress=False).run()
    monkeypatch.undo()
    PackTrainer(stopping.PACK, splits, tmp_path / "eager", torch.device("cpu"),
                progress=False).run()
    stopping.assert_same_records(tmp_path / "graph", tmp_path / "eager")
    steps, (first, later) = stopping.RECIPE.steps_per_epoch, sorted(set(stopping.STOP_EPOCHS))
    assert [e.model.n for e in made] == [len(stopping.PACK.runs), 1]
    assert made[0].calls == {"warmup": step.WARMUP_STEPS, "capture": 1,
                             "replay": first * steps - step.WARMUP_STEPS}
    assert made[1].calls == {"warmup": step.WARMUP_STEPS, "capture": 1,
                             "replay": (later - first) * steps - step.WARMUP_STEPS}
    assert all(e.verify_diff == 0.0 for e in made)
