"""envs/*.yaml agree with pyproject.toml's pins and cover what their rules import."""

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "initmem"
# The initmem modules each environment's rules run (see workflow/rules/*.smk).
ENV_MODULES = {
    "train": ["training.command"],
    "analysis": ["records.aggregate", "records.archive", "analysis.tables", "analysis.figures",
                 "analysis.macros", "analysis.scorecard", "paper"],
}


def pinned() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for spec in project["dependencies"]:
        name, version = spec.split("==")
        pins[name.lower()] = version
    return pins


def env_packages(name: str) -> tuple[str, dict[str, str]]:
    """(python version, {pip package: version}) of envs/<name>.yaml."""
    env = yaml.safe_load((ROOT / "envs" / f"{name}.yaml").read_text())
    python, pip = None, {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for spec in dep["pip"]:
                package, version = spec.split("==")
                pip[package.lower()] = version
        elif dep.startswith("python="):
            python = dep.split("=", 1)[1]
    return python, pip


def module_file(name: str) -> Path:
    path = PACKAGE.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def third_party_imports(module: str, seen: set[str] | None = None) -> set[str]:
    """Top-level packages imported at module level by initmem.<module> and by every
    initmem module it imports, at module level or inside a function (a lazy import of an
    initmem module runs with the rule; a lazy third-party one only on its own path)."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    tree = ast.parse(module_file(module).read_text())
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for target in initmem_targets(node, module):
            if module_file(target).exists():
                found |= third_party_imports(target, seen)
        if node in tree.body and not (isinstance(node, ast.ImportFrom) and node.level):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module]
            found |= {n.split(".")[0] for n in names} - STDLIB - {"initmem"}
    return found


def initmem_targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The initmem modules (dotted, relative to the package) an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name.partition(".")[2] or "__init__" for a in node.names
                if a.name.split(".")[0] == "initmem"]
    if node.level == 0:
        if (node.module or "").split(".")[0] != "initmem":
            return []
        base = node.module.partition(".")[2]
    else:
        package = module if module_file(module).name == "__init__.py" else \
            module.rpartition(".")[0]
        parts = package.split(".") if package else []
        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module
                                                                 else []))
    if node.module:
        return [base or "__init__"]
    return [f"{base}.{a.name}".strip(".") for a in node.names]


STDLIB = set(__import__("sys").stdlib_module_names) | {"__future__"}


@pytest.mark.parametrize("env", sorted(ENV_MODULES))
def test_env_pins_are_pyprojects(env):
    python, pip = env_packages(env)
    pins = pinned()
    assert python == "3.11"  # pyproject: requires-python >=3.11,<3.13; the wheels are 3.11
    for package, version in pip.items():
        assert package in pins, f"envs/{env}.yaml installs {package}, not in pyproject.toml"
        assert version == pins[package], (f"envs/{env}.yaml pins {package}=={version}, "
                                          f"pyproject.toml {pins[package]}")


@pytest.mark.parametrize("env", sorted(ENV_MODULES))
def test_env_covers_what_its_rules_import(env):
    _, pip = env_packages(env)
    distributions = packages_distributions()
    needed = set()
    for module in ENV_MODULES[env]:
        if module_file(module).exists():
            for top in third_party_imports(module):
                needed |= {d.lower() for d in distributions.get(top, [top])}
    assert needed, f"no imports found for envs/{env}.yaml: the scan is broken"
    assert needed <= set(pip), f"envs/{env}.yaml lacks {sorted(needed - set(pip))}"


def test_every_python_rule_declares_an_env_that_exists():
    for smk in (ROOT / "workflow" / "rules").glob("*.smk"):
        rules = re.split(r"\n\s*rule(?::| \w+:)", smk.read_text())[1:]
        for rule in rules:
            if "{INITMEM}" in rule or "{PYTHON}" in rule:
                match = re.search(r'conda:\s*\n\s*"([^"]+)"', rule)
                assert match, f"{smk.name}: a rule running initmem declares no conda env"
                assert (smk.parent / match.group(1)).resolve().exists()


def test_the_scan_finds_imports_by_hand():
    assert {"torch", "numpy", "yaml"} <= third_party_imports("training.command")
    assert {"pyarrow", "pandas", "jsonschema", "yaml"} <= third_party_imports("records.aggregate")
    for module in ENV_MODULES["analysis"]:
        assert "torch" not in third_party_imports(module)


def test_uv_gets_the_indexes_and_constraints_pip_is_configured_with():
    """make venv installs with uv, which reads no pip configuration: workflow/uv_flags.py
    passes pip's on, and a plain machine (no settings) gets no flags (PyPI, as pip)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "uv_flags", Path(__file__).parents[1] / "workflow" / "uv_flags.py")
    uv_flags = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(uv_flags)
    assert uv_flags.uv_flags({}) == []
    assert uv_flags.uv_flags({"constraint": ["/c.txt"], "find-links": ["/w"],
                              "extra-index-url": ["file:///a", "file:///b"]}) == [
        "--constraint=/c.txt", "--find-links=/w", "--extra-index-url=file:///a",
        "--extra-index-url=file:///b", "--index-strategy=unsafe-best-match"]
    assert uv_flags.uv_flags({"index-url": ["https://mirror/simple"]}) == [
        "--index-url=https://mirror/simple"]
