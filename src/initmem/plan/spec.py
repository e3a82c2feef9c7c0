"""Run and pack specifications: what one training run is, and which runs share a process.

A run is fully described by its `Recipe` (everything a pack shares: architecture,
optimizer and its hyperparameters, b, epochs, data) plus its `sigma_w` and `seed`.
Run ids and record paths are pure functions of the spec, so every path is predictable
from the config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd

from initmem.errors import InputError, naming
from initmem.plan.inputs import check_spec, load_yaml
from initmem.plan.optimizers import (
    OPTIMIZERS,
    OptimizerDeclaration,
    declarations,
    hyperparameter_text,
    parse_hyperparameters,
)
from initmem.plan.schema import describe, schema
from initmem.vocabulary import sigma_w_key

# Recipe fields newer than some records and specs: left at their default they are left
# out of a spec (so pack hashes, checkpoints and spec files stay as they were), and a
# record without the column was made with the default.
LATER_FIELDS = {"best_test_subset": None, "hyperparameters": None}
# Optimizer settings that were Recipe fields before record schema 5 (spec files and configs
# of then), with the value they meant unset, and the hyperparameter each is now (Keras'
# names): records and archived configs of then are read through `former_fields_moved`.
FORMER_FIELDS = {"momentum": (0.0, "momentum"), "weight_decay": (0.0, "weight_decay"),
                 "muon_adam_weight_decay": (None, "adam_weight_decay")}
# How a recipe id names a hyperparameter off its default: these three as they were named
# when they were fields (so run ids, and the record folders they name, stay the same);
# every other as key=value.
ID_TAGS = {"momentum": "mom", "weight_decay": "wd", "adam_weight_decay": "awd"}
# A recipe field's domain (type, range, the names allowed) is declared once, in the
# config schema's $defs/field (plan/schemas/config.schema.yaml): the config, a pack spec
# and a Recipe built in code are each checked against that one declaration.
FIELDS = schema()["$defs"]["field"]
SCHEDULES = tuple(FIELDS["schedule"]["enum"])
DATASETS = tuple(FIELDS["dataset"]["enum"])
TRAIN_SIZE = 40_000  # CIFAR-10 training images left after the 10,000 validation hold-out
EVAL_SIZE = 10_000  # CIFAR-10 validation and test images
SYNTHETIC_TRAIN_SIZE = 2_000  # the synthetic data set's training split
SYNTHETIC_EVAL_SIZE = 500  # the synthetic data set's validation and test splits
# dataset -> (training images, validation = test images): what subsets and b may ask for
DATASET_SIZES = {"cifar10": (TRAIN_SIZE, EVAL_SIZE),
                 "synthetic": (SYNTHETIC_TRAIN_SIZE, SYNTHETIC_EVAL_SIZE)}


class SpecError(InputError):
    """A spec field has a value outside what is allowed; the message names both."""


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise SpecError(f"{key}={value!r} is not allowed; {key} must be {allowed}")


@cache
def _field_validator(name: str) -> jsonschema.Validator:
    return jsonschema.Draft202012Validator(FIELDS[name])


def _in_domain(name: str, kind: type, value: Any) -> bool:
    """Whether the field's declaration allows the value; remembered for a scalar (a
    config's runs repeat a few sigma_w, seeds and fields thousands of times), keyed by
    its type too, since 1, 1.0 and True are equal keys."""
    if kind in (str, int, float, bool, type(None)):
        return _scalar_in_domain(name, kind, value)
    return _field_validator(name).is_valid(value)


@cache
def _scalar_in_domain(name: str, kind: type, value: Any) -> bool:
    return _field_validator(name).is_valid(value)


def check_field(name: str, value: Any) -> None:
    """SpecError unless `value` is in the domain its field declares (the config schema's
    $defs/field, worded as a config's error is), and finite where it is a number (what a
    JSON schema cannot say of YAML's .nan and .inf)."""
    if not _in_domain(name, type(value), value):
        error = jsonschema.exceptions.best_match(_field_validator(name).iter_errors(value))
        error.path.appendleft(name)
        raise SpecError(describe(error))
    _check(not isinstance(value, float) or math.isfinite(value), name, value,
           "a finite number")


@dataclass(frozen=True)
class Recipe:
    """Everything the runs of one pack share."""

    family: str
    arch: str
    optimizer: str
    b: int
    epochs: int
    lr0: float = 1e-3
    schedule: str = "cosine"
    cosine_alpha: float = 0.01
    # every setting of the optimizer (its declaration's, Keras' names: momentum,
    # weight_decay, beta_1, ...) where it differs from its default: a mapping in, stored
    # as "key=value,..." (None: all at their defaults)
    hyperparameters: str | None = None
    l2: float = 0.0  # Keras L2(l) on kernels: loss += l * sum(W^2)
    augment: bool = False
    patience: int | None = None  # early stopping on val loss (ResNet-56/110)
    width: float = 1.0  # channel multiplier; 1.0 is the paper's network
    dataset: str = "cifar10"
    train_subset: int | None = None  # first n of the 40,000 training images (demos)
    eval_subset: int | None = None  # first n of validation and of test images (demos)
    # first n test images on which each run's weights at tau_best (kept in memory) are
    # evaluated once after training, for a test_acc_best with a small binomial error
    # (10,000 images: SE <= 0.5 pp) without testing that many images every epoch.
    # null: test_acc_best is the per-epoch test accuracy at tau_best.
    best_test_subset: int | None = None

    def __post_init__(self) -> None:
        """Refuse a field out of its domain (SpecError naming it and what is allowed):
        each field as the config schema declares it (check_field), then what one field
        says of another (the optimizer's fields, the data set's sizes)."""
        for f in dataclasses.fields(self):
            check_field(f.name, getattr(self, f.name))
        _check(self.optimizer in OPTIMIZERS, "optimizer", self.optimizer,
               f"one of {', '.join(OPTIMIZERS)}")
        self._check_hyperparameters()
        n_train, n_eval = DATASET_SIZES[self.dataset]
        for key, most in (("train_subset", n_train), ("eval_subset", n_eval),
                          ("best_test_subset", n_eval)):
            value = getattr(self, key)
            _check(value is None or (_count(value) and 0 < value <= most), key, value,
                   f"null or a positive integer of at most {most} (the {self.dataset} "
                   "data set's size)")
        _check(self.best_test_subset is None or self.best_test_subset > self.n_eval,
               "best_test_subset", self.best_test_subset, f"null or more than the "
               f"{self.n_eval} test images tested every epoch (eval_subset)")
        _check(self.b <= self.n_train, "b", self.b,
               f"at most the {self.n_train} training images of an epoch")

    def _check_hyperparameters(self) -> None:
        """The optimizer's settings against its declaration, each in its domain (a spec's
        text as a config's mapping), kept in one spelling so that hashes agree."""
        value = self.hyperparameters
        try:
            if isinstance(value, str):
                value = parse_hyperparameters(value)
                check_field("hyperparameters", value)
            text = hyperparameter_text(self.optimizer, value or {})
        except InputError as err:
            raise SpecError(str(err)) from None
        object.__setattr__(self, "hyperparameters", text)

    @property
    def declaration(self) -> OptimizerDeclaration:
        """The optimizer's declaration (initmem.plan.optimizers)."""
        return declarations()[self.optimizer]

    @property
    def optimizer_hyperparameters(self) -> dict[str, float | None]:
        """The optimizer's settings as trained: its defaults, then this recipe's (an
        integer where the default is one: ns_steps stays a count)."""
        own = parse_hyperparameters(self.hyperparameters)
        return {k: int(own[k]) if k in own and isinstance(v, int) else own.get(k, v)
                for k, v in self.declaration.hyperparameters.items()}

    @property
    def weight_decay(self) -> float:
        """The decoupled decay lambda (every optimizer declares one)."""
        return self.optimizer_hyperparameters["weight_decay"]

    @property
    def shrinkage(self) -> float:
        """lambda of the clock T_L2: the L2 coefficient plus the decoupled decay acting on
        the conv kernels (for the paper's Muon, its AdamW path's; null there: weight_decay)."""
        kernel_decay = self.optimizer_hyperparameters.get(self.declaration.kernel_decay)
        return self.l2 + (self.weight_decay if kernel_decay is None else kernel_decay)

    @property
    def n_train(self) -> int:
        """Training images per epoch (K and the clocks are counted from this)."""
        return self.train_subset or DATASET_SIZES[self.dataset][0]

    @property
    def n_eval(self) -> int:
        """Validation images, and test images evaluated every epoch."""
        return self.eval_subset or DATASET_SIZES[self.dataset][1]

    @property
    def n_test_best(self) -> int:
        """Test images behind test_acc_best."""
        return self.best_test_subset or self.n_eval

    @property
    def steps_per_epoch(self) -> int:
        """Keras keeps the last partial batch: ceil(n_train / b) updates per epoch."""
        return math.ceil(self.n_train / self.b)

    @property
    def total_steps(self) -> int:
        """K in the cosine schedule and the clocks."""
        return self.epochs * self.steps_per_epoch

    @property
    def recipe_id(self) -> str:
        """Readable, unique folder name of the recipe (everything but b and the family)."""
        parts = [f"{self.arch}", f"w{self.width:g}", self.optimizer, f"lr{self.lr0:g}",
                 self.schedule, f"e{self.epochs}"]
        changed = parse_hyperparameters(self.hyperparameters)
        parts += [f"{tag}{changed.pop(key):g}" for key, tag in ID_TAGS.items() if key in changed]
        parts += [f"{key}={value:g}" for key, value in changed.items()]
        if self.l2:
            parts.append(f"l2{self.l2:g}")
        if self.augment:
            parts.append("aug")
        if self.patience:
            parts.append(f"pat{self.patience}")
        if self.dataset != "cifar10":
            parts.append(self.dataset)
        if self.train_subset:
            parts.append(f"n{self.train_subset}")
        if self.eval_subset:
            parts.append(f"v{self.eval_subset}")
        if self.best_test_subset:
            parts.append(f"t{self.best_test_subset}")
        return "-".join(parts)


def former_fields_moved(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Recipe fields of before record schema 5 (a config's or a record's) as today's: each
    of FORMER_FIELDS set off its unset value (null: not recorded, unset) joins
    `hyperparameters` (a mapping) as the hyperparameter it is now; one set there too wins.
    InputError where their text is no 'key=value,...' of numbers."""
    fields = dict(fields)
    own = fields.get("hyperparameters") or {}
    if isinstance(own, str):
        own = parse_hyperparameters(own)
    if not isinstance(own, Mapping):  # the config schema's check names it
        return fields
    moved = {key: value for name, (unset, key) in FORMER_FIELDS.items()
             if (value := fields.pop(name, unset)) not in (unset, None)}
    if moved or own:
        fields["hyperparameters"] = {**moved, **own}
    return fields


def upgraded_hyperparameters(row: Mapping[str, Any]) -> str | None:
    """The `hyperparameters` a record row of before schema 5 has today (its former fields
    moved in), spelled as its Recipe spells it, so that it compares equal to a planned
    run's. InputError where they make none for its optimizer."""
    values = former_fields_moved(row).get("hyperparameters") or {}
    optimizer = row.get("optimizer")
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer={optimizer!r} is not allowed; optimizer must be one of "
                         f"{', '.join(OPTIMIZERS)}")
    return hyperparameter_text(optimizer, values)


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    """The recipe's fields, without the LATER_FIELDS left at their default."""
    return {k: v for k, v in dataclasses.asdict(recipe).items()
            if k not in LATER_FIELDS or v != LATER_FIELDS[k]}


def _count(x: Any) -> bool:
    """An integer, never a bool (YAML's `true` is Python's 1)."""
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class Run:
    """One training run: a recipe, an initialisation scale and a seed."""

    recipe: Recipe
    sigma_w: float
    seed: int

    def __post_init__(self) -> None:
        """Refuse a sigma_w or a seed out of its declared domain (check_field); keep
        sigma_w as its canonical key (vocabulary.sigma_w_key)."""
        check_field("sigma_w", self.sigma_w)
        check_field("seed", self.seed)
        object.__setattr__(self, "sigma_w", sigma_w_key(self.sigma_w))

    @property
    def run_dir(self) -> str:
        """Relative folder of this run's records: predictable from the config."""
        r = self.recipe
        return f"{r.family}/{r.recipe_id}/b{r.b}/sw{self.sigma_w:.2f}-s{self.seed}"

    @property
    def run_id(self) -> str:
        """The run's identity: its folder below the records root, ':' for '/'."""
        return self.run_dir.replace("/", ":")

    def as_row(self) -> dict[str, Any]:
        """Every field of the spec, flat (the spec columns of a summary record)."""
        return {"run_id": self.run_id, **_recipe_fields(self.recipe),
                "sigma_w": self.sigma_w, "seed": self.seed}


@cache
def _recipe_fields(recipe: Recipe) -> dict[str, Any]:
    """A recipe's fields by name, once per recipe (its runs share it; every field is a
    plain value, so no deep copy as dataclasses.asdict makes, 0.9 s for config.yaml's
    runs)."""
    return {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe)}


@dataclass(frozen=True)
class Pack:
    """Runs trained together in one process: same recipe, different (sigma_w, seed)."""

    recipe: Recipe
    runs: tuple[Run, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        """Refuse an empty pack, or one holding runs of another recipe."""
        _check(len(self.runs) > 0, "runs", list(self.runs), "a non-empty list")
        for run in self.runs:
            _check(run.recipe == self.recipe, "runs", run.run_id, "runs of the pack's recipe")
        folders: dict[str, Run] = {}
        for run in self.runs:  # the folder keeps sigma_w to 2 decimals: 0.501 ~ 0.504
            other = folders.setdefault(run.run_dir, run)
            _check(other is run, "runs", [(other.sigma_w, other.seed), (run.sigma_w, run.seed)],
                   f"(sigma_w, seed) pairs with distinct record folders (both would write "
                   f"{run.run_dir}; sigma_w is kept to 2 decimals)")

    @classmethod
    def from_dict(cls, data: Any, where: object = "spec") -> Pack:
        """A pack from plain data, checked by the spec schema (inputs.check_spec) first."""
        check_spec(data, where)
        recipe = Recipe(**data["recipe"])
        return cls(recipe, tuple(Run(recipe, float(item["sigma_w"]), item["seed"])
                                 for item in data["runs"]))

    @classmethod
    def load(cls, path: str | Path) -> Pack:
        """Read a pack spec from YAML or JSON (JSON is YAML 1.2; inputs.load_yaml)."""
        return cls.from_dict(load_yaml(path, "pack spec"), path)

    @property
    def key(self) -> str:
        """Short content hash: names the pack's checkpoint folder."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The pack spec's JSON: its recipe and each run's sigma_w and seed."""
        return {"recipe": recipe_dict(self.recipe),
                "runs": [{"sigma_w": r.sigma_w, "seed": r.seed} for r in self.runs]}

    def dump(self, path: str | Path) -> None:
        """Write the pack spec (to_dict) as JSON at `path`."""
        with naming(path):
            Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


_SPEC_DTYPES = {"str": "string", "int": "Int64", "float": "float64", "bool": "bool"}


def spec_columns() -> dict[str, str]:
    """A run's spec as table columns and their pandas dtypes: run_id, the recipe's fields
    (derived from Recipe, so they cannot drift), sigma_w and seed. The spec columns of a
    summary record, of the runs table and of the planned runs."""
    columns = {"run_id": "string"}
    for f in dataclasses.fields(Recipe):
        columns[f.name] = _SPEC_DTYPES[str(f.type).split(" | ")[0]]
    return {**columns, "sigma_w": "float64", "seed": "int64"}


def spec_table(runs: list[Run]) -> pd.DataFrame:
    """The spec columns of these runs, one row each, typed as in a summary record."""
    frame = pd.DataFrame([run.as_row() for run in runs], columns=list(spec_columns()))
    return frame.astype(spec_columns())
