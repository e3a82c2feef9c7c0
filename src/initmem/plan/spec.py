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
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from initmem.errors import InputError

ARCHS = ("resnet9", "r9_avgpool", "resnet9_ln", "resnet56", "resnet110")
# An optimizer is the module of its name in training/optimizers/ (read as a folder listing:
# planning never imports torch).
OPTIMIZER_DIR = Path(__file__).resolve().parents[1] / "training" / "optimizers"
OPTIMIZERS = tuple(sorted(m.name for m in pkgutil.iter_modules([str(OPTIMIZER_DIR)])
                          if not m.name.startswith("_")))
# Keras' defaults that the recipe keeps fixed (no family varies them).
ADAM_BETA1, ADAM_BETA2 = 0.9, 0.999
SCHEDULES = ("cosine", "constant")
DATASETS = ("cifar10", "synthetic")
TRAIN_SIZE = 40_000  # CIFAR-10 training images left after the 10,000 validation hold-out
SYNTHETIC_TRAIN_SIZE = 2_000  # the synthetic data set's default training split


class SpecError(InputError):
    """A spec field has a value outside what is allowed; the message names both."""


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise SpecError(f"{key}={value!r} is not allowed; {key} must be {allowed}")


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
    momentum: float = 0.0  # SGD family (0 or 0.9); Muon-orthogonal uses its own 0.95
    weight_decay: float = 0.0  # decoupled lambda (AdamW, Muon)
    l2: float = 0.0  # Keras L2(l) on kernels: loss += l * sum(W^2)
    augment: bool = False
    patience: int | None = None  # early stopping on val loss (ResNet-56/110)
    width: float = 1.0  # channel multiplier; 1.0 is the paper's network
    dataset: str = "cifar10"
    train_subset: int | None = None  # first n of the 40,000 training images (demos)
    eval_subset: int | None = None  # first n of validation and of test images (demos)

    def __post_init__(self) -> None:
        _check(bool(self.family) and self.family.replace("_", "").isalnum(), "family",
               self.family, "a non-empty name of letters, digits and '_'")
        _check(self.arch in ARCHS, "arch", self.arch, f"one of {', '.join(ARCHS)}")
        _check(self.optimizer in OPTIMIZERS, "optimizer", self.optimizer,
               f"one of {', '.join(OPTIMIZERS)}")
        _check(self.schedule in SCHEDULES, "schedule", self.schedule,
               f"one of {', '.join(SCHEDULES)}")
        _check(self.dataset in DATASETS, "dataset", self.dataset,
               f"one of {', '.join(DATASETS)}")
        for key in ("b", "epochs"):
            value = getattr(self, key)
            _check(isinstance(value, int) and value > 0, key, value, "a positive integer")
        _check(_finite(self.lr0) and self.lr0 > 0, "lr0", self.lr0, "a positive number")
        _check(_finite(self.width) and self.width > 0, "width", self.width,
               "a positive number")
        _check(0 <= self.cosine_alpha <= 1, "cosine_alpha", self.cosine_alpha,
               "a number in [0, 1]")
        _check(0 <= self.momentum < 1, "momentum", self.momentum, "a number in [0, 1)")
        for key in ("weight_decay", "l2"):
            value = getattr(self, key)
            _check(_finite(value) and value >= 0, key, value, "a number >= 0")
        _check(self.patience is None or (isinstance(self.patience, int) and self.patience > 0),
               "patience", self.patience, "null or a positive integer")
        for key in ("train_subset", "eval_subset"):
            value = getattr(self, key)
            _check(value is None or (isinstance(value, int) and value > 0), key, value,
                   "null or a positive integer")
        _check(self.train_subset is None or self.train_subset <= TRAIN_SIZE, "train_subset",
               self.train_subset, f"at most {TRAIN_SIZE}")
        _check(self.optimizer != "sgd_momentum" or self.momentum > 0, "momentum",
               self.momentum, "> 0 for optimizer sgd_momentum")
        _check(self.optimizer != "sgd" or self.momentum == 0, "momentum", self.momentum,
               "0 for optimizer sgd (use sgd_momentum)")

    @property
    def n_train(self) -> int:
        """Training images per epoch (K and the clocks are counted from this)."""
        default = TRAIN_SIZE if self.dataset == "cifar10" else SYNTHETIC_TRAIN_SIZE
        return self.train_subset or default

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
        if self.momentum and self.optimizer != "sgd_momentum":
            parts.append(f"mom{self.momentum:g}")
        if self.weight_decay:
            parts.append(f"wd{self.weight_decay:g}")
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
        return "-".join(parts)


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Run:
    """One training run: a recipe, an initialisation scale and a seed."""

    recipe: Recipe
    sigma_w: float
    seed: int

    def __post_init__(self) -> None:
        _check(_finite(self.sigma_w) and self.sigma_w > 0, "sigma_w", self.sigma_w,
               "a positive number")
        _check(isinstance(self.seed, int) and not isinstance(self.seed, bool)
               and 0 <= self.seed < 2**31, "seed", self.seed, "an integer in [0, 2^31)")

    @property
    def run_dir(self) -> str:
        """Relative folder of this run's records: predictable from the config."""
        r = self.recipe
        return f"{r.family}/{r.recipe_id}/b{r.b}/sw{self.sigma_w:.2f}-s{self.seed}"

    @property
    def run_id(self) -> str:
        return self.run_dir.replace("/", ":")

    def as_row(self) -> dict[str, Any]:
        """Every field of the spec, flat (the spec columns of a summary record)."""
        return {"run_id": self.run_id, **dataclasses.asdict(self.recipe),
                "sigma_w": self.sigma_w, "seed": self.seed}


@dataclass(frozen=True)
class Pack:
    """Runs trained together in one process: same recipe, different (sigma_w, seed)."""

    recipe: Recipe
    runs: tuple[Run, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _check(len(self.runs) > 0, "runs", list(self.runs), "a non-empty list")
        keys = [(r.sigma_w, r.seed) for r in self.runs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        _check(not dupes, "runs", dupes, "free of duplicated (sigma_w, seed) pairs")
        for run in self.runs:
            _check(run.recipe == self.recipe, "runs", run.run_id, "runs of the pack's recipe")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pack:
        unknown = set(data) - {"recipe", "runs"}
        _check(not unknown, "spec keys", sorted(unknown), "only 'recipe' and 'runs'")
        recipe_fields = {f.name for f in dataclasses.fields(Recipe)}
        recipe_data = dict(data.get("recipe") or {})
        bad = sorted(set(recipe_data) - recipe_fields)
        _check(not bad, "recipe keys", bad, f"among {', '.join(sorted(recipe_fields))}")
        try:
            recipe = Recipe(**recipe_data)
        except TypeError as err:  # a required field is missing
            raise SpecError(f"recipe: {err}") from None
        runs = []
        for item in data.get("runs") or []:
            bad = sorted(set(item) - {"sigma_w", "seed"})
            _check(not bad, "run keys", bad, "only sigma_w and seed")
            runs.append(Run(recipe, float(item["sigma_w"]), item["seed"]))
        return cls(recipe, tuple(runs))

    @classmethod
    def load(cls, path: str | Path) -> Pack:
        """Read a pack spec from YAML or JSON (JSON is YAML)."""
        with open(path) as fh:
            return cls.from_dict(yaml.safe_load(fh) or {})

    @property
    def key(self) -> str:
        """Short content hash: names the pack's checkpoint folder."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"recipe": dataclasses.asdict(self.recipe),
                "runs": [{"sigma_w": r.sigma_w, "seed": r.seed} for r in self.runs]}

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")
