"""The package's stages, by import: plan < records < {training, analysis} < paper (a
stage imports only earlier ones; training and analysis never each other).

Each layer is imported in a fresh interpreter and what it pulled in is checked: planning,
records, analysis and the paper never load torch (the workflow parses, and the analysis
environment runs, without it), and planning loads nothing of training, records or analysis.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "initmem"
LAYERS = ("plan", "training", "records", "analysis", "paper")
# Each stage's rank: a module may import its own stage and lower ranks only.
STAGE_RANK = {"plan": 0, "records": 1, "training": 2, "analysis": 2, "paper": 3}


def modules_of(layer: str) -> list[str]:
    folder = PACKAGE / layer
    return sorted(f"initmem.{layer}." + ".".join(p.relative_to(folder).with_suffix("").parts)
                  .removesuffix(".__init__") for p in folder.rglob("*.py"))


def loaded_by(modules: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    return loaded_after(f"import importlib\nfor m in {modules!r}: importlib.import_module(m)")


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    code += "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("layer", ["plan", "records", "analysis", "paper"])
def test_only_training_imports_torch(layer):
    loaded = loaded_by(modules_of(layer) if layer != "paper" else ["initmem.paper"])
    assert "torch" not in loaded, f"initmem.{layer} pulls in torch"


def test_planning_imports_no_later_stage():
    loaded = loaded_by(modules_of("plan"))
    later = sorted(m for m in loaded if m.startswith(("initmem.training", "initmem.records",
                                                      "initmem.analysis", "initmem.paper")))
    assert not later


def test_the_workflow_imports_only_planning_and_neither_torch_nor_scipy_stats():
    """What the workflow's files import at parse time (every initmem import of the
    Snakefile and workflow/rules/*.smk) loads planning only: what the workflow trains is
    decided in initmem.plan (a staged study's looks too), never in records or analysis.
    And neither torch nor scipy.stats: Snakemake parses the workflow again in every job,
    local or on SLURM, and scipy.stats alone took 3.3 of its 11 s."""
    root = PACKAGE.parents[1]
    imports = [line.strip() for path in [root / "Snakefile", *sorted(
        (root / "workflow" / "rules").glob("*.smk"))]
        for line in path.read_text().splitlines()
        if line.strip().startswith(("from initmem", "import initmem"))]
    loaded = loaded_after("\n".join(imports))
    assert len(imports) >= 3 and "initmem.plan.looks" in loaded, imports
    later = sorted(m for m in loaded if m.startswith(("initmem.training", "initmem.records",
                                                      "initmem.analysis", "initmem.paper")))
    assert not later, later
    assert not {"torch", "scipy.stats"} & loaded


def function_level_imports(path: Path) -> list[str]:
    """initmem imports inside functions: the way coupling between stages hides."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                names = ([a.name for a in inner.names] if isinstance(inner, ast.Import)
                         else [inner.module or "."] if isinstance(inner, ast.ImportFrom)
                         else [])
                if any(n.startswith(("initmem", ".")) for n in names):
                    found.append(f"{path.relative_to(PACKAGE)}:{inner.lineno}")
    return found


def test_no_initmem_imports_inside_functions():
    """Every module says at its top which stages it needs (the CLI loads the chosen
    command's module by name, with importlib, so that `figure` does not load torch)."""
    found = [hit for path in PACKAGE.rglob("*.py") for hit in function_level_imports(path)]
    assert found == []


def test_no_import_cycles():
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        name = "initmem." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        name = name.removesuffix(".__init__")
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("initmem"):
                # `from package import module` needs the module, not the package's face
                deps |= {f"{node.module}.{a.name}" for a in node.names}
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("initmem")}
        graph[name] = deps
    graph = {m: {d for d in deps if d in graph and d != m
                 and not any(e.startswith(d + ".") and e in graph for e in deps)}
             for m, deps in graph.items()}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == target or (nxt not in seen and not seen.add(nxt)
                                 and reaches(nxt, target, seen)):
                return True
        return False

    cycles = sorted(m for m in graph if reaches(m, m, set()))
    assert not cycles, f"import cycles through {cycles}"


def initmem_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("initmem"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("initmem")}
    return names


def test_each_stage_imports_only_earlier_stages():
    """The documented order (docs/development.md) is the imports' order."""
    wrong = []
    for stage, rank in STAGE_RANK.items():
        for path in (PACKAGE / stage).rglob("*.py"):
            for name in initmem_imports(path):
                other = name.split(".")[1] if name.count(".") else None
                if other in STAGE_RANK and other != stage and STAGE_RANK[other] >= rank:
                    wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert wrong == []
