"""Shared pytest set-up."""

import os

import pytest

# TensorFlow (imported by the Keras reference tests at collection) and triton (imported
# by torchvision through torch._dynamo) segfault when triton is loaded second in one
# process; loading torchvision first avoids it. The product never imports TensorFlow.
import torchvision.datasets  # noqa: F401
from fakes import FakeSlurm

SLURM_ENVIRONMENT = ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURMD_NODENAME")


@pytest.fixture(autouse=True)
def no_slurm_controller(request, monkeypatch) -> None:
    """Outside the slurm-marked tests, SLURM's commands read an empty configuration and
    fail at once, as where no controller answers. Without it every Snakemake start waits
    9 s on a machine whose SLURM is installed but stopped: snakemake-executor-plugin-slurm
    runs `scontrol show config` when it is imported, and scontrol retries the controller."""
    if request.node.get_closest_marker("slurm") is None:
        monkeypatch.setenv("SLURM_CONF", os.devnull)


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> FakeSlurm:
    """SLURM's commands faked (FakeSlurm), PATH holding them alone, and this process
    outside any SLURM job; list it after fixtures that start programs by name."""
    slurm = FakeSlurm(tmp_path / "slurm-bin")
    monkeypatch.setenv("PATH", str(slurm.bin))
    for name in SLURM_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return slurm


# The modules whose tests take seconds each (`pytest --durations=0`), scheduled first:
# xdist hands tests out in collection order, and alphabetically these come last, where
# one worker ran them alone for the last minute while the other had nothing left.
SLOWEST_FIRST = ("test_paper.py", "test_train.py", "test_workflow.py", "test_step.py",
                 "test_resume.py", "test_keras_networks.py", "test_heartbeat.py",
                 "test_integrity.py", "test_scorecard.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run SLOWEST_FIRST's modules first, in their order; the rest keep theirs."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
