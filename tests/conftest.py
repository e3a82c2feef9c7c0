"""Shared pytest set-up."""

# TensorFlow (imported by the Keras reference tests at collection) and triton (imported
# by torchvision through torch._dynamo) segfault when triton is loaded second in one
# process; loading torchvision first avoids it. The product never imports TensorFlow.
import os

import pytest
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
