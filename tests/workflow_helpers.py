"""Running the Snakefile from the tests: a fresh working directory, the venv's snakemake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TEST_CONFIG = ROOT / "config" / "test.yaml"
PAPER_CONFIG = ROOT / "config.yaml"
DEMO_CONFIG = ROOT / "config" / "demo.yaml"


def snakemake_command(workdir: Path, config: Path, *args: str, profile: str) -> list[str]:
    """snakemake with a profile of profiles/ (the workflow's own, profiles/default, is read
    anyway), 2 cores, in workdir; args are targets and options (targets first:
    --configfile takes every word after it)."""
    return [SNAKEMAKE, *args, "--snakefile", str(ROOT / "Snakefile"), "--directory",
            str(workdir), "--profile", str(ROOT / "profiles" / profile),
            "--cores", "2", "--configfile", str(config)]


def snakemake(workdir: Path, config: Path, *args: str, profile: str = "default",
              timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = snakemake_command(workdir, config, *args, profile=profile)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def snakemake_background(workdir: Path, config: Path, *args: str,
                         profile: str = "default") -> subprocess.Popen:
    cmd = snakemake_command(workdir, config, *args, profile=profile)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a run or dry run: rule -> number of jobs."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Job stats:"))
    counts = {}
    for line in lines[start + 3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def scratch_checkout(where: Path, config: Path = PAPER_CONFIG, synthetic_demo: bool = False,
                     claims: str | None = None) -> Path:
    """A folder laid out as this checkout (its workflow, sources and configs linked), where
    the README's commands run as typed and write only there; `config` becomes its
    config.yaml. synthetic_demo: config/demo.yaml there reads generated images, since
    tests may not need CIFAR-10. claims: the text of its paper/claims.yaml (the rest of
    paper/ linked), for a study judged on claims of its own."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "profiles", "src"):
        (where / name).symlink_to(ROOT / name)
    if claims is None:
        (where / "paper").symlink_to(ROOT / "paper")
    else:
        (where / "paper").mkdir()
        for path in (ROOT / "paper").iterdir():
            if path.name != "claims.yaml":
                (where / "paper" / path.name).symlink_to(path)
        (where / "paper" / "claims.yaml").write_text(claims)
    (where / "config.yaml").symlink_to(config)
    (where / "config").mkdir()
    for path in (ROOT / "config").glob("*.yaml"):
        (where / "config" / path.name).symlink_to(path)
    if synthetic_demo:
        demo = yaml.safe_load(DEMO_CONFIG.read_text())
        demo["common"]["dataset"] = "synthetic"
        (where / "config" / "demo.yaml").unlink()
        (where / "config" / "demo.yaml").write_text(yaml.safe_dump(demo, sort_keys=False))
    return where


MAKE_VARIABLES = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")


def typed(command: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900
          ) -> subprocess.CompletedProcess:
    """A command line exactly as a user types it, with the venv's tools first on PATH.

    A user's shell is not inside make: the variables `make test` exports (MAKELEVEL,
    MAKEFLAGS) are dropped, or a `make` typed here prints "Entering directory" lines.
    """
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    shell = {k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES}
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**shell, "PATH": path, **(env or {})})
