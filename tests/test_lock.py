"""requirements.lock (`make lock`) agrees with pyproject.toml's pins and envs/*.yaml, and
holds every package of the environment with the hashes `make venv` checks."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
# name==version [; marker] \  then its --hash lines: one entry per package and fork
ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, set[str]]:
    """{package: its versions in the lock} (two where it forks by Python version)."""
    versions: dict[str, set[str]] = {}
    for name, version in ENTRY.findall(LOCK.read_text()):
        versions.setdefault(normalised(name), set()).add(version)
    return versions


def pins() -> dict[str, str]:
    """Every pin of pyproject.toml: the dependencies and each optional extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"],
             *(s for extra in project["optional-dependencies"].values() for s in extra)]
    found = {}
    for spec in specs:
        name, _, version = spec.partition("==")
        assert version, f"pyproject.toml: {spec!r} is not pinned with =="
        found[normalised(name)] = version
    return found


def test_every_pin_is_locked_at_its_version():
    lock = locked()
    for name, version in pins().items():
        assert lock.get(name) == {version}, (f"pyproject.toml pins {name}=={version}, "
                                             f"requirements.lock has {lock.get(name)}: "
                                             "run `make lock`")


def test_lock_covers_the_extras_make_venv_installs():
    makefile = (ROOT / "Makefile").read_text()
    extras = re.search(r"^EXTRAS := (.+)$", makefile, re.MULTILINE).group(1).split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(extras) == set(project["optional-dependencies"]), \
        "make venv and make lock should take every extra of pyproject.toml"


@pytest.mark.parametrize("env", ["analysis", "train"])
def test_conda_envs_pin_the_locked_versions(env):
    spec = yaml.safe_load((ROOT / "envs" / f"{env}.yaml").read_text())
    pip = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict))
    lock = locked()
    for line in pip:
        name, version = line.split("==")
        assert lock.get(normalised(name)) == {version}, \
            f"envs/{env}.yaml pins {line}, requirements.lock has {lock.get(normalised(name))}"


def test_every_entry_has_hashes_and_the_lock_is_whole():
    text = LOCK.read_text()
    assert "make lock" in text.splitlines()[1], "the lock's header names the command"
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        assert "--hash=sha256:" in block, f"no hash for {block.splitlines()[0]}"
    lock = locked()
    # the transitive closure is there, not just the direct pins
    assert {"pillow", "contourpy", "sympy", "nvidia-cublas", "pulp", "protobuf"} <= set(lock)
    assert len(lock) > 100
