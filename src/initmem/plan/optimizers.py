"""The optimizers, each declared once, in its own module (read here without importing torch).

An optimizer is the module `src/initmem/training/optimizers/<name>.py`. Beside its torch
code it holds one literal, `DECLARATION = {...}`, that every other stage reads from here:

    label            its name in Table 1 and the figures, as text (a config entry may
                     rename it)
    tex_label        its name in Tables 2-7, as LaTeX (default: label, escaped)
    keras            the keras.optimizers class it reproduces (null: none); its tests then
                     compare it with that class in float64
    reference        a PyTorch optimizer class it reproduces, "module.Class" (e.g.
                     "schedulefree.AdamWScheduleFree", "torch.optim.Adamax"; null: none):
                     its tests compare it with that class in float64, on the training
                     weights and the evaluation weights (the class's eval(), where it has one)
    tolerance        the largest difference allowed against `reference` (default 1e-12)
    adaptive         an adaptive method in the paper's sense: Fig. 6's right column, the
                     claims' `adaptive: true` cells, Adam's published epochs in the cost model
    hyperparameters  every setting of the optimizer beyond lr0 and its schedule, Keras'
                     names -> defaults (Keras', but weight_decay 0 for every optimizer, as
                     the paper's recipe reads; null: derived by the optimizer, Muon's
                     adam_weight_decay following weight_decay); a config sets them per
                     optimizer (`optimizers.<name>.hyperparameters`) or per family, and
                     one not declared is refused.
                     `build` gets them as Python floats: Keras casts a Python float through
                     float32 where it writes ops.cast(self.x, dtype) or an initializer's
                     constant (Adagrad's initial_accumulator_value 0.1 is 0.10000000149
                     even in float64), not in Python arithmetic (1 - self.beta_1, +
                     self.epsilon). A slot's or run scalar's initial value is cast for you
                     (_base's _add_slot, _add_run_scalar); elsewhere pass the value through
                     keras_float where the Keras line casts it (training/optimizers/_base.py)
    requires         of those, the ones that must be > 0 (SGD with momentum's momentum)
    kernel_decay     the hyperparameter that decays the conv kernels (the clock T_L2's
                     lambda; default weight_decay; null falls back to weight_decay)
    base             another optimizer whose declaration this one starts from (all but its
                     label, tex_label and references), e.g. AdamW from Adam

Reading the literal with `ast` keeps planning torch-free while the declaration stays in the
module whose code it describes.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from initmem.errors import InputError
from initmem.markup import tex_escape

OPTIMIZER_DIR = Path(__file__).resolve().parents[1] / "training" / "optimizers"
# The keys of an `optimizers` config entry that say how it is shown, not how it trains.
DISPLAY_KEYS = ("label", "tex_label", "colour", "notes")
# Keys of an entry that older configs and archives' manifests carry: they must agree with
# the declaration (initmem.plan.grid checks), which alone decides.
ECHOED_KEYS = ("adaptive",)
# How a label names a schedule its config entry sets apart from common's.
SCHEDULE_NAMES = {"constant": "constant rate", "cosine": "cosine schedule"}
# Figure colours of optimizers whose config entry names none, in config order.
PALETTE = ("#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b", "#17becf", "#e377c2",
           "#2ca02c", "#7f7f7f", "#bcbd22")


@dataclass(frozen=True)
class OptimizerDeclaration:
    """An optimizer module's DECLARATION, its keys as the module docstring describes them."""
    name: str
    label: str
    tex_label: str
    keras: str | None
    adaptive: bool
    requires: tuple[str, ...] = ()
    kernel_decay: str = "weight_decay"
    hyperparameters: dict[str, float] = field(default_factory=dict)
    reference: str | None = None
    tolerance: float = 1e-12


def _literal(path: Path) -> dict[str, Any]:
    """The module's `DECLARATION = {...}`, evaluated as a literal (no import)."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "DECLARATION"):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise InputError(f"{path}: DECLARATION must be a literal dict (numbers, "
                                 "strings, lists, true/false, None)") from None
    raise InputError(f"{path} has no `DECLARATION = {{...}}`; every optimizer module declares "
                     "itself (see initmem.plan.optimizers)")


def _declaration(path: Path) -> OptimizerDeclaration:
    data = _literal(path)
    if "base" in data:
        base = _literal(path.with_name(f"{data.pop('base')}.py"))
        own = ("label", "tex_label", "keras", "reference", "tolerance")
        data = {**{k: v for k, v in base.items() if k not in own}, **data}
    allowed = {f for f in OptimizerDeclaration.__dataclass_fields__ if f != "name"}
    bad = sorted(set(data) - allowed)
    if bad or "label" not in data:
        raise InputError(f"{path}: DECLARATION keys {bad or ''} not allowed / label missing; "
                         f"keys must be among {', '.join(sorted(allowed))}, label required")
    data = {"tex_label": tex_escape(data["label"]), "keras": None, "adaptive": False,
            "hyperparameters": {}, **data}
    data["requires"] = tuple(data.get("requires", ()))
    named = ["weight_decay", *data["requires"], data.get("kernel_decay", "weight_decay")]
    if not set(named) <= set(data["hyperparameters"]):
        raise InputError(f"{path}: DECLARATION hyperparameters must hold weight_decay (every "
                         "optimizer decays, Optimizer.decoupled_decays), requires "
                         f"{list(data['requires'])} and kernel_decay; it has "
                         f"{', '.join(data['hyperparameters']) or 'none'}")
    return OptimizerDeclaration(name=path.stem, **data)


@cache
def declarations() -> dict[str, OptimizerDeclaration]:
    """name -> declaration of every optimizer module, in name order."""
    paths = sorted(p for p in OPTIMIZER_DIR.glob("*.py") if not p.stem.startswith("_"))
    return {p.stem: _declaration(p) for p in paths}


OPTIMIZERS = tuple(declarations())
PROPERTIES = ("adaptive",)  # what a claim's cell may select optimizers by


def optimizers_where(prop: str, value: object) -> list[str]:
    """The optimizers whose declaration has `prop` == value (a claim's `adaptive: true`)."""
    if prop not in PROPERTIES:
        raise InputError(f"{prop!r} is not an optimizer property; properties: "
                         f"{', '.join(PROPERTIES)}")
    return [name for name, d in declarations().items() if getattr(d, prop) == value]


def hyperparameter_text(name: str, values: dict[str, Any]) -> str | None:
    """A recipe's hyperparameters as it stores them: the values that differ from the
    declaration's defaults, 'key=value' sorted and comma-joined (None when none differ, so
    a recipe at the defaults keeps the spec, id and hash it had before they were settable).
    Raises InputError naming a key the optimizer does not take or a value that is no number,
    or a required one (`requires`) that is not > 0."""
    declared = declarations()[name]
    defaults = declared.hyperparameters
    for key, value in values.items():
        if key not in defaults:
            allowed = ", ".join(defaults) or "none"
            raise InputError(f"hyperparameters.{key}={value!r} is not allowed for optimizer "
                             f"{name}; its hyperparameters: {allowed}")
        if not _allowed(value, defaults[key]):
            kind = "an integer" if isinstance(defaults[key], int) else "a finite number"
            nullable = " or null" if defaults[key] is None else ""
            raise InputError(f"hyperparameters.{key}={value!r} is not allowed; it must be "
                             f"{kind}{nullable}")
    for key in declared.requires:
        if not values.get(key, defaults[key]) > 0:
            raise InputError(f"hyperparameters.{key}={values[key]!r} is not allowed; it must "
                             f"be > 0 for optimizer {name}")
    return join_hyperparameters({k: v for k, v in values.items() if _number(v) != defaults[k]})


def join_hyperparameters(values: dict[str, float]) -> str | None:
    """Hyperparameters as a recipe stores them: 'key=value' as floats, sorted and
    comma-joined; None for none (parse_hyperparameters reads it back)."""
    return ",".join(f"{k}={float(v)!r}" for k, v in sorted(values.items())) or None


def _allowed(value: Any, default: float | None) -> bool:
    """A finite number (an integer where the default is one: ns_steps counts), or null
    where the default is (the optimizer derives it)."""
    if value is None:
        return default is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and (not isinstance(default, int) or value == int(value))


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


def parse_hyperparameters(text: str | None) -> dict[str, float]:
    """The inverse of join_hyperparameters: {} for None; InputError naming a text that is
    not 'key=value,...' of numbers (a spec or record from elsewhere)."""
    if not text:
        return {}
    try:
        return {k: float(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise InputError(f"hyperparameters={text!r} is not allowed; hyperparameters must be "
                         "a mapping of names to numbers, or a spec's 'key=value,...' of "
                         "them") from None


@dataclass(frozen=True)
class OptimizerDisplay:
    """How an optimizer of a config is shown and grouped: its declaration, then its config
    entry's display keys (DISPLAY_KEYS), then a palette colour."""

    name: str
    label: str  # Table 1 and the figures: text
    tex_label: str  # Tables 2-7: LaTeX
    colour: str
    adaptive: bool
    notes: str = "---"  # Table 1's notes: LaTeX


def optimizer_display(config: dict[str, Any]) -> dict[str, OptimizerDisplay]:
    """name -> display of every optimizer of the config's `optimizers`, in its order; a
    config read from a runs archive (`from_archive`) gives text, never LaTeX. An entry
    whose `schedule` is not common's (default cosine) says which in its labels, so Table 1,
    Tables 2-7 and the figures' legends name it ("Schedule-Free AdamW (constant rate)")."""
    latex = not config.get("from_archive", False)
    common = config.get("common", {}).get("schedule", "cosine")
    shown = {}
    for i, (name, entry) in enumerate(config.get("optimizers", {}).items()):
        shown[name] = display(name, entry, PALETTE[i % len(PALETTE)], latex=latex)
        own = entry.get("schedule", common)
        if own != common:
            note = f" ({SCHEDULE_NAMES[own]})"
            shown[name] = dataclasses.replace(shown[name], label=shown[name].label + note,
                                              tex_label=shown[name].tex_label + note)
    return shown


def display(name: str, entry: dict[str, Any], colour: str, *,
            latex: bool = True) -> OptimizerDisplay:
    """One optimizer's display: a config entry's keys over its declaration's. The entry's
    tex_label and notes are LaTeX only with `latex` (a config the user typed); otherwise,
    an archive's config being data, they are text: its tex_label is not read (the label
    stands, escaped) and its notes print as written, so no command in them runs."""
    declared = declarations().get(name)
    label = entry.get("label", declared.label if declared else name)
    if latex and "tex_label" in entry:
        tex_label = entry["tex_label"]
    elif declared and "label" not in entry:
        tex_label = declared.tex_label
    else:
        tex_label = tex_escape(label)
    notes = entry.get("notes", "---")
    return OptimizerDisplay(name, label, tex_label, entry.get("colour", colour),
                            bool(declared and declared.adaptive),
                            notes if latex else tex_escape(notes))
