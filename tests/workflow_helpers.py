"""Running the Snakefile from the tests: a fresh working directory, the venv's snakemake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TEST_CONFIG = ROOT / "config" / "test.yaml"
PAPER_CONFIG = ROOT / "config.yaml"
DEMO_CONFIG = ROOT / "config" / "demo.yaml"


def snakemake_command(workdir: Path, config: Path, *args: str, profile: str) -> list[str]:
    """snakemake with a profile of workflow/profiles, 2 cores, in workdir; args are targets
    and options (targets first: --configfile takes every word after it)."""
    return [SNAKEMAKE, *args, "--snakefile", str(ROOT / "Snakefile"), "--directory",
            str(workdir), "--profile", str(ROOT / "workflow" / "profiles" / profile),
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
