"""Config -> runs -> packs: the pure expansion of the experiment grid.

A family's runs are: every variant x every grid point (minus `exclude`), each merged over
`common`, the optimizer's Table 1 defaults and the family's `recipe` (the optimizer's
`hyperparameters` merged key by key), times its sigma_w
set, times its seeds (or a `seed_overrides` set where one matches). The runs of one
recipe are cut into packs of `execution.pack_size` in (seed, sigma_w) order, so a pack
holds whole sigma_w sweeps. Everything is a pure function of the config: run and pack
paths are predictable.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from initmem import checkout
from initmem.errors import InputError
from initmem.plan import memory
from initmem.plan.inputs import load_yaml
from initmem.plan.optimizers import (
    DISPLAY_KEYS,
    ECHOED_KEYS,
    OPTIMIZER_DIR,
    OPTIMIZERS,
    declarations,
)
from initmem.plan.schema import (
    ConfigError,
    check_schema,
    invalid,
    schema_defaults,
)
from initmem.plan.spec import FORMER_FIELDS, Pack, Recipe, Run, SpecError, former_fields_moved
from initmem.vocabulary import sigma_w_key

__all__ = ["ConfigError", "archived", "asked_runs", "expand_runs",
           "experiment_config", "family_runs", "load_config", "make_packs", "pack_id",
           "sigma_values", "spec_name", "validate_config"]

# from_archive: the config was read from a runs archive (`initmem archive config`), so its
# display strings are data, rendered as text (initmem.plan.optimizers.display)
FROM_ARCHIVE = "from_archive"
EXPERIMENT_KEYS = ("optimizers", "seed_sets", "sigma_sets", "common", "families",
                   FROM_ARCHIVE)


def load_config(path: str | Path) -> dict[str, Any]:
    """Read and validate a config file; returns it with the schema's defaults filled in,
    and its relative paths that commands read (IN_CHECKOUT) from the config's checkout,
    where the workflow reads them (initmem.checkout), whatever folder the command runs in."""
    config = validate_config(load_yaml(path, "config"))
    for section, key in IN_CHECKOUT:
        if config[section][key] is not None:
            config[section][key] = str(checkout.in_config_checkout(config[section][key], path))
    return config


# Paths inside a config that commands read, not only the workflow's rules (which run in
# the checkout): the measured throughput (`initmem cost`, `status`, `claims --plan`).
IN_CHECKOUT = (("execution", "throughput_csv"),)


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Raise ConfigError naming every bad key, value and what is allowed; return the
    config with defaults filled in (the input is not modified)."""
    former = _former_field_problems(config) if isinstance(config, dict) else []
    if former:
        raise invalid(former)
    check_schema(config)
    config = schema_defaults(copy.deepcopy(config))
    _check_names(config)
    if config["staged"] and config["execution"]["packs_per_job"] > 1:
        raise ConfigError(f"execution.packs_per_job={config['execution']['packs_per_job']} "
                          "with staged: true is not allowed: a staged study trains each "
                          "look's packs apart, one pack per job (packs_per_job: 1)")
    runs = expand_runs(config)
    _check_duplicates(runs)
    memory.check_config(config, dict.fromkeys(run.recipe for run in runs))
    return config


def experiment_config(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a config that decides which runs exist and how they are labelled; not
    where or how they are computed (execution, data, archive), so analyses that depend on
    it are not redone when only those change."""
    return {key: config[key] for key in EXPERIMENT_KEYS if key in config}


def archived(config: Any) -> dict[str, Any]:
    """An archive's experiment config, marked as read from an archive whatever it says,
    in today's spelling (an archive made before record schema 5 wrote its optimizers'
    momentum and decays as recipe fields: `former_fields_upgraded`)."""
    if not isinstance(config, dict):
        raise ConfigError(f"invalid config: an archive's config must be a mapping, not "
                          f"{type(config).__name__}")
    return {**former_fields_upgraded(config), FROM_ARCHIVE: True}


def former_fields_upgraded(config: dict[str, Any]) -> dict[str, Any]:
    """A config of before record schema 5 as today's: in each of its recipe mappings
    (`_recipe_mappings`), the optimizer settings that were recipe fields moved into
    `hyperparameters` (spec.former_fields_moved); the input is not modified."""
    config = copy.deepcopy(config)
    for where, mapping in _recipe_mappings(config):
        try:
            moved = former_fields_moved(mapping)
        except InputError as err:
            raise ConfigError(f"invalid config: {where}: {err}") from None
        mapping.clear()
        mapping.update(moved)
    return config


def _recipe_mappings(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, mapping) of each part of a config that sets recipe fields: common, each
    optimizer's entry, each family's recipe and variants (a part of another type is left
    to the schema's check)."""
    parts = [("common", config.get("common"))]
    optimizers, families = config.get("optimizers"), config.get("families")
    if isinstance(optimizers, dict):
        parts += [(f"optimizers.{name}", entry) for name, entry in optimizers.items()]
    for fam, spec in families.items() if isinstance(families, dict) else []:
        if isinstance(spec, dict):
            variants = spec.get("variants") if isinstance(spec.get("variants"), list) else []
            parts += [(f"families.{fam}.recipe", spec.get("recipe")),
                      *((f"families.{fam}.variants[{i}]", v) for i, v in enumerate(variants))]
    return [(where, mapping) for where, mapping in parts if isinstance(mapping, dict)]


def _former_field_problems(config: dict[str, Any]) -> list[str]:
    """A typed config that sets an optimizer setting as the recipe field it was before
    record schema 5: each named, with how to write it now."""
    return [f"{where}.{name}={mapping[name]!r} is not allowed; {name} is an optimizer "
            f"hyperparameter now: write hyperparameters: {{{FORMER_FIELDS[name][1]}: "
            f"{json.dumps(mapping[name], default=str)}}} (docs/recipe.md)"
            for where, mapping in _recipe_mappings(config) for name in FORMER_FIELDS
            if name in mapping]


def _check_names(config: dict[str, Any]) -> None:
    problems = _optimizer_problems(config)
    for fam in config["families"]:
        problems += _family_problems(config, fam)
    problems += _sigma_set_problems(config)
    if problems:
        raise invalid(problems)


def _optimizer_problems(config: dict[str, Any]) -> list[str]:
    """An optimizer without a module, or a key its declaration already sets, differently."""
    problems = []
    for name, entry in config["optimizers"].items():
        if name not in OPTIMIZERS:
            problems.append(f"optimizers.{name}: optimizer {name!r} is not implemented; "
                            f"implemented: {', '.join(OPTIMIZERS)} (an optimizer is the "
                            f"module {OPTIMIZER_DIR / name}.py)")
            continue
        for key in ECHOED_KEYS:
            declared = getattr(declarations()[name], key)
            if key in entry and entry[key] != declared:
                problems.append(f"optimizers.{name}.{key}={entry[key]!r} is not allowed; "
                                f"the optimizer's declaration says {declared!r} (drop the key)")
    return problems


def _family_problems(config: dict[str, Any], fam: str) -> list[str]:
    """A family's set names that name no set, and optimizers the config does not declare."""
    spec, problems = config["families"][fam], []
    refs = [("sigma_w", spec["sigma_w"], "sigma_sets"), ("seeds", spec["seeds"], "seed_sets")]
    refs += [(f"seed_overrides[{i}].seeds", o["seeds"], "seed_sets")
             for i, o in enumerate(spec.get("seed_overrides", []))]
    for key, value, table in refs:
        if value not in config[table]:
            problems.append(f"families.{fam}.{key}={value!r} is not allowed; it must "
                            f"name one of {table}: {', '.join(config[table])}")
    for where, fields in _optimizer_mentions(config, fam):
        for opt in fields:
            if opt not in config["optimizers"]:
                problems.append(f"{where}: optimizer={opt!r} is not allowed; it must be "
                                f"one of optimizers: {', '.join(config['optimizers'])}")
    return problems


def _sigma_set_problems(config: dict[str, Any]) -> list[str]:
    """A sigma_w range that ends before it starts."""
    return [f"sigma_sets.{name}: stop={sigma['stop']!r} is not allowed; it must be >= "
            f"start={sigma['start']!r}" for name, sigma in config["sigma_sets"].items()
            if isinstance(sigma, dict) and sigma["stop"] < sigma["start"]]


def _optimizer_mentions(config: dict[str, Any], fam: str) -> Iterator[tuple[str, list[str]]]:
    spec = config["families"][fam]
    for where, fields in [("common", config.get("common", {})),
                          (f"families.{fam}.recipe", spec.get("recipe", {})),
                          *[(f"families.{fam}.variants[{i}]", v)
                            for i, v in enumerate(spec.get("variants", []))]]:
        if "optimizer" in fields:
            yield where, [fields["optimizer"]]
    if "optimizer" in spec.get("grid", {}):
        yield f"families.{fam}.grid.optimizer", spec["grid"]["optimizer"]


def sigma_values(sigma_set: list[float] | dict[str, float]) -> list[float]:
    """A sigma_sets entry as its values (canonical: vocabulary.sigma_w_key); a range
    {start, stop, step} includes stop."""
    if isinstance(sigma_set, list):
        return [sigma_w_key(s) for s in sigma_set]
    start, stop, step = sigma_set["start"], sigma_set["stop"], sigma_set["step"]
    n = int(round((stop - start) / step)) + 1
    return [sigma_w_key(start + i * step) for i in range(n)]


def expand_runs(config: dict[str, Any]) -> list[Run]:
    """Every run of the config, families in config order. Expects a validated config."""
    return [run for fam in config["families"] for run in family_runs(config, fam)]


def asked_runs(runs: list[Run], listed: str, where: str, strict: bool = True) -> list[Run]:
    """A staged study's expected runs: those of `runs` that `listed` names, one id a line
    (the runs its looks asked for: `initmem claims --asked ... --out-runs`); the others were
    never needed, so they are not missing. strict: an id that is no run of `runs` is an
    error naming it (else it is passed over: an archive read with another config)."""
    ids = {line.strip() for line in listed.splitlines() if line.strip()}
    unknown = sorted(ids - {run.run_id for run in runs})
    if strict and unknown:
        raise ConfigError(f"{where}: {len(unknown)} of its run ids are not runs of the "
                          f"config, the first {unknown[0]!r}: it lists the runs a staged "
                          "study's looks asked for (initmem claims --asked ... --out-runs)")
    return [run for run in runs if run.run_id in ids]


def family_runs(config: dict[str, Any], fam: str) -> list[Run]:
    """The runs of one family: recipes in (variant, grid point) order, then seeds, sigma_w."""
    spec = config["families"][fam]
    sigmas = sigma_values(config["sigma_sets"][spec["sigma_w"]])
    points = _points(spec)
    _check_matches(fam, "exclude", spec.get("exclude", []), points["all"])
    overrides = spec.get("seed_overrides", [])
    _check_matches(fam, "seed_overrides", [o["match"] for o in overrides], points["kept"])
    runs = []
    for point in points["kept"]:
        recipe = _recipe(config, fam, point)
        seed_set = next((o["seeds"] for o in overrides if _matches(o["match"], point)),
                        spec["seeds"])
        runs += [Run(recipe, sigma, seed)
                 for seed in config["seed_sets"][seed_set] for sigma in sigmas]
    if not runs:
        raise ConfigError(f"families.{fam}: the grid is empty (every point is excluded); "
                          "a family must have at least one run")
    return runs


def _points(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Variant x grid points, before ('all') and after ('kept') the excludes."""
    grid = spec.get("grid", {})
    points = [{**variant, **dict(zip(grid, values, strict=True))}
              for variant in spec.get("variants", [{}])
              for values in itertools.product(*grid.values())]
    kept = [p for p in points if not any(_matches(x, p) for x in spec.get("exclude", []))]
    return {"all": points, "kept": kept}


def _matches(pattern: dict[str, Any], point: dict[str, Any]) -> bool:
    return all(key in point and point[key] == value for key, value in pattern.items())


def _check_matches(fam: str, key: str, patterns: list[dict], points: list[dict]) -> None:
    """A pattern that matches nothing is a typo: say so rather than silently ignore it."""
    for i, pattern in enumerate(patterns):
        if not any(_matches(pattern, p) for p in points):
            raise ConfigError(f"families.{fam}.{key}[{i}]={pattern!r} matches no grid point "
                              "of the family; its keys must be variant or grid keys and "
                              "its values among theirs")


def _recipe(config: dict[str, Any], fam: str, point: dict[str, Any]) -> Recipe:
    spec = config["families"][fam]
    common, recipe = config.get("common", {}), spec.get("recipe", {})
    table1 = config["optimizers"].get({**common, **recipe, **point}.get("optimizer"), {})
    defaults = {k: v for k, v in table1.items() if k not in DISPLAY_KEYS + ECHOED_KEYS}
    levels = (common, defaults, recipe, point)  # precedence: common < Table 1 < family
    fields = {k: v for level in levels for k, v in level.items()}
    fields["hyperparameters"] = {k: v for level in levels  # merged key by key
                                 for k, v in level.get("hyperparameters", {}).items()}
    try:
        return Recipe(family=fam, **fields)
    except SpecError as err:
        raise ConfigError(f"families.{fam} at {point or 'its recipe'}: {err}") from None
    except TypeError as err:  # a required field (arch, optimizer, b, epochs) is missing
        missing = str(err).split(": ", 1)[-1]
        raise ConfigError(f"families.{fam} at {point or 'its recipe'}: no value for "
                          f"{missing}; set it in common, the family's recipe, a variant "
                          "or the grid") from None


def _check_duplicates(runs: list[Run]) -> None:
    """Two runs with one record folder, or one training in two families, is an error."""
    by_dir: dict[str, Run] = {}
    by_training: dict[tuple, Run] = {}
    for run in runs:
        if run.run_dir in by_dir:
            other = by_dir[run.run_dir]
            if other == run:
                raise ConfigError(f"run {run.run_dir} appears twice (a repeated variant or "
                                  "grid value); remove the duplicate")
            raise ConfigError(f"two different runs would share the record folder "
                              f"{run.run_dir} (its path keeps sigma_w to 2 decimals and does "
                              f"not show cosine_alpha): {other} and {run}")
        by_dir[run.run_dir] = run
        key = (*_training_fields(run.recipe), run.sigma_w, run.seed)
        other = by_training.setdefault(key, run)
        if other is not run:
            raise ConfigError(f"run {run.run_dir} duplicates {other.run_dir} (same training "
                              f"in families {other.recipe.family} and {run.recipe.family}); "
                              "exclude it from one of them")


def _training_fields(recipe: Recipe) -> tuple:
    return tuple(v for k, v in vars(recipe).items() if k != "family")


def make_packs(config: dict[str, Any]) -> dict[str, Pack]:
    """pack_id -> Pack, in run order; chunks of execution.pack_size runs per recipe."""
    return pack_runs(expand_runs(config), config["execution"]["pack_size"])


def pack_runs(runs: list[Run], size: int) -> dict[str, Pack]:
    """pack_id -> Pack: each recipe's runs, in order, in chunks of `size`."""
    by_recipe: dict[Recipe, list[Run]] = {}
    for run in runs:
        by_recipe.setdefault(run.recipe, []).append(run)
    packs = {}
    for recipe, runs in by_recipe.items():
        for k, start in enumerate(range(0, len(runs), size)):
            packs[pack_id(recipe, k)] = Pack(recipe, tuple(runs[start:start + size]))
    return packs


def pack_id(recipe: Recipe, chunk: int) -> str:
    """Flat, readable name of a recipe's chunk-th pack: its training job's and status'."""
    return f"{recipe.family}-{recipe.recipe_id}-b{recipe.b}-p{chunk}"


def spec_name(pack_id: str, pack: Pack) -> str:
    """File name of a pack's spec: its readable id and its content key (Pack.key), so
    that a config edit that changes a pack's runs but not its id names a new spec, never
    the old one's file (which would train the old runs)."""
    return f"{pack_id}.{pack.key}.json"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=checkout.CONFIG)
    parser.add_argument("--packs-dir", type=Path,
                        help="also write every pack spec as PACKS_DIR/<pack_id>.json")


def main(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    packs = make_packs(config)
    total = 0
    for fam in config["families"]:
        n = len(family_runs(config, fam))
        n_packs = sum(p.recipe.family == fam for p in packs.values())
        print(f"{fam:<12} {n:>6} runs {n_packs:>5} packs")
        total += n
    print(f"{'total':<12} {total:>6} runs {len(packs):>5} packs")
    if args.packs_dir:
        args.packs_dir.mkdir(parents=True, exist_ok=True)
        for pid, pack in packs.items():
            pack.dump(args.packs_dir / f"{pid}.json")
    return 0
