"""The checks one value of config.yaml passes on its way to Table 2, counted.

    .venv/bin/python bench/validation_walk.py [--config config/test.yaml]

Runs the real workflow for `results/tables/table2.tex` of a config (the tests' synthetic
one by default: seconds of CPU) in a scratch checkout whose `src/` also holds a
`sitecustomize` hook, so that every Python process of the walk (Snakemake's parse, and
each rule's `python -m initmem ...`) counts the calls of the package's checkers and
writes them down at exit. Prints, per step in the order the data flows, the file it reads
and how often each checker ran; a Recipe's check counts once per recipe built, so the
table also says it per run of the config.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from initmem.plan import grid  # noqa: E402

# (file suffix, qualified name) of every checker a value can pass; what it checks.
CHECKERS = {
    ("initmem/plan/inputs.py", "load_yaml"): "YAML read (duplicate keys, tags, size)",
    ("initmem/plan/schema.py", "check_schema"): "config schema",
    ("initmem/plan/grid.py", "_check_names"): "config names (sets, optimizers)",
    ("snakemake/utils.py", "validate"): "config schema, by Snakemake",
    ("initmem/plan/inputs.py", "check_spec"): "pack spec schema",
    ("initmem/plan/spec.py", "Recipe.__post_init__"): "recipe fields (check_field)",
    ("initmem/records/files.py", "_frame"): "record columns and ranges",
    ("initmem/records/files.py", "run_of"): "record's spec makes its run",
    ("initmem/records/files.py", "typed"): "records' column types",
    ("initmem/records/aggregate.py", "spec_mismatches"): "record spec = config's",
}

HOOK = '''
import atexit, json, os, sys
_WANTED = {tuple(k.split("|")): 0 for k in json.loads(os.environ["WALK_CHECKERS"])}
_SEEN = {}
def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    key = _SEEN.get(code)
    if key is None:
        key = next((k for k in _WANTED if code.co_filename.endswith(k[0])
                    and code.co_qualname == k[1]), ())
        _SEEN[code] = key
    if key:
        _WANTED[key] += 1
def _dump():
    counts = {"|".join(k): n for k, n in _WANTED.items() if n}
    path = os.path.join(os.environ["WALK_COUNTS"], f"{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump({"argv": sys.argv, "counts": counts}, fh)
atexit.register(_dump)
sys.setprofile(_profile)
'''

STEPS = (("parse", "the config (the workflow's parse; Snakemake's process)"),
         ("train", "a pack spec (initmem train, one process per training job)"),
         ("aggregate", "results/config.yaml and the run records (initmem aggregate)"),
         ("table", "results/config.yaml and the runs table (initmem table 2)"))


def scratch(where: Path, config: Path) -> Path:
    """A checkout of links whose src/ holds the package and the counting hook."""
    where.mkdir()
    for name in ("Snakefile", "workflow", "profiles", "paper"):
        (where / name).symlink_to(ROOT / name)
    (where / "src").mkdir()
    (where / "src" / "initmem").symlink_to(ROOT / "src" / "initmem")
    (where / "src" / "sitecustomize.py").write_text(HOOK)
    (where / "config.yaml").symlink_to(config.resolve())
    return where


def step_of(argv: list[str]) -> str | None:
    """Which step of the walk a process was, from its command line."""
    if argv and argv[0].endswith("snakemake"):
        return "parse"
    for word in ("train", "aggregate", "table"):
        if word in argv[1:2]:
            return word
    return None


def walk(config: Path) -> dict[str, Counter]:
    """Checker calls per step, summed over the step's processes."""
    with tempfile.TemporaryDirectory() as tmp:
        checkout, counts = scratch(Path(tmp) / "checkout", config), Path(tmp) / "counts"
        counts.mkdir()
        env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "WALK_COUNTS": str(counts),
               "WALK_CHECKERS": json.dumps(["|".join(k) for k in CHECKERS]),
               "SLURM_CONF": os.devnull}  # no SLURM asked: a local run
        snakemake = Path(sys.executable).with_name("snakemake")
        done = subprocess.run([str(snakemake), "results/tables/table2.tex", "--cores", "1",
                               "--configfile", "config.yaml"], cwd=checkout, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the workflow failed:\n{done.stderr[-3000:]}")
        steps: dict[str, Counter] = {name: Counter() for name, _ in STEPS}
        for path in counts.glob("*.json"):
            record = json.loads(path.read_text())
            if (step := step_of(record["argv"])) is not None:
                steps[step].update(record["counts"])
        return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config" / "test.yaml")
    args = parser.parse_args()
    n_runs = len(grid.expand_runs(grid.load_config(args.config)))
    steps = walk(args.config)
    print(f"{args.config}: {n_runs} runs; checker calls per step (recipe checks also "
          "per run)")
    for name, reads in STEPS:
        print(f"\n{name}: reads {reads}")
        for key, what in CHECKERS.items():
            n = steps[name]["|".join(key)]
            if n:
                per_run = f" ({n / n_runs:g} per run)" if key[1].startswith("Recipe") else ""
                print(f"  {n:>5}  {what}{per_run}")
    total = sum(sum(c.values()) for c in steps.values())
    print(f"\n{total} checker calls in all")


if __name__ == "__main__":
    main()
