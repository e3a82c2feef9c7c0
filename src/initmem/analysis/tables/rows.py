"""The rows and cells of Tables 1-7: which runs each cell is over, in the paper's layout.

Runs are chosen by their spec columns (family, arch, optimizer, lr0, l2, b, augment,
sigma_w, ...); a selection over two families (main + lr_l2 for Table 4) cannot count a
run twice, since the config check forbids one training in two families. Each builder
returns (template context, cells, rendered cell texts).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import pandas as pd

from initmem.analysis.metrics import select, spread_pp
from initmem.analysis.tables.cells import Cell, derived, fmt, measure_cell
from initmem.markup import tex_escape
from initmem.plan.architectures import ARCH_LABELS, depth_study
from initmem.plan.grid import family_runs
from initmem.plan.optimizers import declarations, optimizer_display, parse_hyperparameters
from initmem.plan.spec import Recipe
from initmem.vocabulary import CELL_KEY, CONFIG_LABELS
from initmem.vocabulary import EXTREME_SIGMAS as EXTREMES
from initmem.vocabulary import FIVE_SIGMAS as FIVE

PM = r"{\pm}"


class Sheet:
    """Collects a table's cells and their rendered texts."""

    def __init__(self, table: int) -> None:
        """An empty sheet for Table `table`."""
        self.table, self.cells, self.texts = table, [], []

    def key(self, **fields: object) -> dict[str, object]:
        """A cell's key in this table: CELL_KEY's `fields` (None where not given)."""
        return {f: fields.get(f) for f in CELL_KEY} | {"table": str(self.table)}

    def put(self, cell: Cell, **style: object) -> str:
        """Collect `cell` and return its LaTeX, formatted by fmt with `style`."""
        text = fmt(cell, **style)
        self.cells.append(cell)
        self.texts.append(text)
        return text

    def seeds(self) -> str:
        """The caption's seeds per cell, `$n=10$`, or their range `$n=1$--$2$` where cells
        differ (a cut-down config gives some recipes more seeds than others)."""
        counts = {c.n_runs + len(c.missing) for c in self.cells
                  if c.key["metric"] not in DERIVED and c.n_runs + len(c.missing)}
        if not counts:
            return "$n=?$"
        low, high = min(counts), max(counts)
        return f"$n={low}$" if low == high else f"$n={low}$--${high}$"


DERIVED = ("spread", "train_acc_mean", "abs_delta")


def latex_number(x: float) -> str:
    """0, 10^{-3}, 5{\\times}10^{-3}, 0.9 ... as the paper writes hyperparameters."""
    if x == 0:
        return "0"
    exponent = math.floor(math.log10(abs(x)))
    mantissa = round(x / 10**exponent, 6)
    if exponent >= -1 and abs(x) >= 0.1 and mantissa != 1:
        return f"{x:g}"
    power = f"10^{{{exponent}}}"
    return power if mantissa == 1 else f"{mantissa:g}{{\\times}}{power}"


def main_optimizers(config: dict) -> list[str]:
    """The optimizers of the config's main grid, in the order of its `optimizers`."""
    used = {run.recipe.optimizer for run in family_runs(config, "main")} \
        if "main" in config["families"] else set()
    return [name for name in config["optimizers"] if name in used]


def tex_labels(config: dict) -> dict[str, str]:
    """Row labels: optimizers by their config entry, architectures and configurations."""
    # every declared optimizer has a row label, the config's entries renaming theirs: a
    # table's paper rows name optimizers a small config need not run
    optimizers = {name: d.tex_label for name, d in declarations().items()}
    optimizers |= {name: d.tex_label for name, d in optimizer_display(config).items()}
    return {**ARCH_LABELS, **CONFIG_LABELS, **optimizers}


def epochs_label(frame: pd.DataFrame) -> str:
    """The epochs the runs trained for, joined by '/' ('?' where none is known)."""
    values = sorted(int(e) for e in frame["epochs"].dropna().unique())
    return "/".join(str(e) for e in values) or "?"


# Tables 2 and 3: validation accuracy at three checkpoints for one sigma_w.
CHECKPOINT_COLUMNS = (  # column, unit, digits, event, signed
    ("tau_interp", "epoch", 1, True, False), ("tau_best", "epoch", 1, True, False),
    ("val_acc_interp", "frac", 3, True, False), ("val_acc_best", "frac", 3, False, False),
    ("val_acc_last", "frac", 3, False, False), ("repair_gap", "frac", 3, True, True))


def planned_rows(config: dict) -> list[tuple[int, str]]:
    """(b, optimizer) of the ResNet-9 recipes the config's main grid plans, by b, then in
    the order of its `optimizers`: a table shows no row for a cell it never planned."""
    planned = {(run.recipe.b, run.recipe.optimizer) for run in family_runs(config, "main")
               if run.recipe.arch == "resnet9"} if "main" in config["families"] else set()
    return [(b, opt) for b in sorted({b for b, _ in planned})
            for opt in config["optimizers"] if (b, opt) in planned]


def checkpoints(table: int, sigma_w: float, runs: pd.DataFrame, config: dict):
    """Tables 2 and 3 at one sigma_w: per (b, optimizer) the main grid plans, tau_interp,
    tau_best, validation accuracy at them and at the last epoch, and the repair gap."""
    sheet, rows, used, labels = Sheet(table), [], [], tex_labels(config)
    planned = planned_rows(config)
    for i, (b, opt) in enumerate(planned):
        frame = select(runs, family="main", arch="resnet9", optimizer=opt, b=b,
                       sigma_w=sigma_w)
        used.append(frame)
        key = dict(b=b, optimizer=opt, config="resnet9", sigma_w=sigma_w)
        cells = [sheet.put(measure_cell(frame, col, sheet.key(metric=col, **key), unit,
                                        event=event), digits=digits, sign=signed)
                 for col, unit, digits, event, signed in CHECKPOINT_COLUMNS]
        rows.append({"b": b, "optimizer": labels[opt], "cells": cells,
                     # a rule between batch sizes: one group of rows per b planned
                     "rule_after": i + 1 < len(planned) and planned[i + 1][0] != b})
    context = {"sigma_w": f"{sigma_w:g}", "rows": rows, "seeds": sheet.seeds(),
               "last_epoch": epochs_label(pd.concat(used)) if used else "?"}
    return context, sheet.cells, sheet.texts


def sweep_row(sheet: Sheet, frame: pd.DataFrame, key: dict, *,
              train: str | None = "train_acc_last", mark_single: bool = False):
    """Test accuracy (%) per sigma_w, train accuracy (%) per sigma_w (or none), the spread
    (pp) over the sigma_w values (?? unless every sigma_w has data), and whether every
    test cell is a single seed. mark_single: daggers on the single-seed cells of a row
    that mixes single- and multi-seed cells."""
    at = {s: select(frame, sigma_w=s) for s in FIVE}
    test_cells = [measure_cell(at[s], "test_acc_best",
                               sheet.key(metric="test_acc", sigma_w=s, **key), "pct", scale=100)
                  for s in FIVE]
    single = [c.n == 1 for c in test_cells]
    mixed = mark_single and any(single) and not all(single)
    tests = [sheet.put(c, pm=PM, dagger=mixed and one)
             for c, one in zip(test_cells, single, strict=True)]
    trains = [sheet.put(measure_cell(at[s], train,
                                     sheet.key(metric="train_acc", sigma_w=s, **key), "pct",
                                     scale=100), pm=PM)
              for s in FIVE] if train else []
    spread_text = sheet.put(derived(frame, spread_pp(frame, FIVE),
                                    sheet.key(metric="spread", **key), "pp"))
    return tests, trains, spread_text, all(single)


# Table 4: the learning-rate x L2 sweep for SGD, with the Adam and 5,000-epoch rows.
def lr_l2(runs: pd.DataFrame, config: dict):
    """Table 4 at b=16 and b=128: SGD over lr0 x L2 (cosine), then Adam's and the long
    constant-rate SGD's rows."""
    sheet, panels = Sheet(4), []
    for b in (16, 128):
        rows = []
        for lr0 in (1e-3, 1e-2, 1e-1):
            for l2 in (0.0, 1e-3, 5e-3, 1e-2):
                frame = select(runs, family=["main", "lr_l2"], arch="resnet9", optimizer="sgd",
                             schedule="cosine", augment=False, lr0=lr0, l2=l2, b=b)
                rows.append(lr_l2_row(sheet, frame, dict(b=b, optimizer="sgd",
                            config="resnet9", lr0=lr0, l2=l2),
                            [f"${latex_number(lr0)}$", f"${latex_number(l2)}$", "cos"]))
        adam = select(runs, family="main", arch="resnet9", optimizer="adam", b=b)
        rows.append(lr_l2_row(sheet, adam, dict(b=b, optimizer="adam", config="resnet9",
                    lr0=1e-3, l2=0.0), [rf"Adam $\eta{{=}}{latex_number(1e-3)}$", "", "cos"]))
        long = select(runs, family="long_sgd", optimizer="sgd", b=b)
        rows.append(lr_l2_row(sheet, long, dict(b=b, optimizer="sgd", config="long_sgd",
                    lr0=1e-3, l2=0.0), [rf"SGD $\eta{{=}}{latex_number(1e-3)}$ "
                                        f"({epochs_label(long)} ep)", "", "const"]))
        panels.append({"b": b, "rows": rows})
    return {"panels": panels, "sigmas": [f"{s:g}" for s in FIVE]}, sheet.cells, sheet.texts


def lr_l2_row(sheet: Sheet, frame: pd.DataFrame, key: dict, labels: list[str]) -> dict:
    """A row of Table 4; a row of single-seed entries carries its dagger on Train."""
    frame = select(frame, sigma_w=list(FIVE))
    tests, _, spread, single = sweep_row(sheet, frame, key, train=None, mark_single=True)
    train = sheet.put(measure_cell(frame, "train_acc_last",
                                   sheet.key(metric="train_acc_mean", **key), "pct", scale=100),
                      show_std=False, dagger=single)
    return {"labels": labels, "cells": [*tests, spread, train]}


# Tables 5 and 6: test and train accuracy per sigma_w and the spread, two batch sizes.
def test_train_panels(sheet: Sheet, groups: list[tuple[str, str, Callable]],
                      labels: dict[str, str]) -> list[dict]:
    """Tables 5 and 6's panels, b=16 and b=128: per group (config, optimizer, its run
    selection) test and train accuracy at the five sigma_w, and the spread."""
    panels = []
    for b in (16, 128):
        rows = []
        for config, opt, choose in groups:
            frame = select(choose(b=b, optimizer=opt), sigma_w=list(FIVE))
            tests, trains, spread, _ = sweep_row(sheet, frame, dict(b=b, optimizer=opt,
                                                                    config=config))
            cells = [c for pair in zip(tests, trains, strict=True) for c in pair]
            rows.append({"config": labels[config], "optimizer": labels[opt],
                         "cells": [*cells, spread]})
        panels.append({"b": b, "rows": rows})
    return panels


DEPTH_OPTIMIZERS = ("sgd", "adam")  # the paper's Table 5 rows per network, in its order


def depth_left_out(depth_runs: pd.DataFrame, config: dict) -> list[str]:
    """The optimizers the depth family ran that Table 5 has no rows for (the paper's
    other optimizers and any extension), in the config's order."""
    ran = set(depth_runs["optimizer"]) - set(DEPTH_OPTIMIZERS)
    ordered = [name for name in config["optimizers"] if name in ran]
    return ordered + sorted(ran - set(ordered))


def depth(runs: pd.DataFrame, config: dict):
    """Table 5: SGD and Adam rows per network of the paper's depth study (whether or not
    its runs exist) and per other network the depth family has (its declaration's order);
    the caption names the depth family's other optimizers, which have no rows."""
    sheet, labels = Sheet(5), tex_labels(config)
    depth_runs = select(runs, family="depth")
    groups = [(arch, opt, partial(select, runs, family=["main", "depth"], arch=arch,
                                  lr0=1e-3, l2=0.0, augment=False))
              for arch in depth_study(depth_runs["arch"]) for opt in DEPTH_OPTIMIZERS]
    panels = test_train_panels(sheet, groups, labels)
    events = []
    for b in (16, 128):
        rows = []
        for arch, opt, choose in groups:
            frame = choose(b=b, optimizer=opt)
            cells = [sheet.put(measure_cell(select(frame, sigma_w=s), tau, sheet.key(
                         metric=tau, b=b, optimizer=opt, config=arch, sigma_w=s), "epoch",
                         event=True))
                     for s in FIVE for tau in ("tau_interp", "tau_best")]
            rows.append({"config": labels[arch], "optimizer": labels[opt], "cells": cells})
        events.append({"b": b, "rows": rows})
    context = {"panels": panels, "events": events, "sigmas": [f"{s:g}" for s in FIVE],
               "seeds": sheet.seeds(), "row_header": "Architecture",
               "left_out": [labels.get(n, n) for n in depth_left_out(depth_runs, config)]}
    return context, sheet.cells, sheet.texts


def norm_aug(runs: pd.DataFrame, config: dict):
    """Table 6: SGD and Adam with BatchNorm and augmentation, LayerNorm and augmentation, and
    BatchNorm without (the main grid's runs)."""
    sheet = Sheet(6)
    choices = {"bn_aug": dict(family="norm_aug", arch="resnet9", augment=True),
               "ln_aug": dict(family="norm_aug", arch="resnet9_ln", augment=True),
               "bn_noaug": dict(family="main", arch="resnet9", augment=False)}
    groups = [(name, opt, partial(select, runs, **choices[name]))
              for name in choices for opt in ("sgd", "adam")]
    panels = test_train_panels(sheet, groups, tex_labels(config))
    context = {"panels": panels, "sigmas": [f"{s:g}" for s in FIVE],
               "row_header": "Configuration"}
    return context, sheet.cells, sheet.texts


# Table 7: the best-recipe comparison at the two extreme scales.
def best_recipe(runs: pd.DataFrame, config: dict):
    """Table 7: the best recipes (SGD with momentum, Adam) per b at the extreme sigma_w and the
    |delta| between them; the row of highest mean test accuracy in bold."""
    sheet, rows = Sheet(7), []
    for opt, label in (("sgd_momentum", "SGD (best)"), ("adam", "Adam")):
        for b in (16, 128, 256):
            frame = select(runs, family="best_recipe", optimizer=opt, b=b)
            key = dict(b=b, optimizer=opt, config="best_recipe")
            at = {s: select(frame, sigma_w=s) for s in EXTREMES}
            cells = {(col, s): measure_cell(at[s], col,
                                            sheet.key(metric=metric, sigma_w=s, **key), unit,
                                            scale, event)
                     for col, metric, unit, scale, event in BEST_COLUMNS for s in EXTREMES}
            tests = [cells["test_acc_best", s] for s in EXTREMES]
            delta = abs(tests[0].mean - tests[1].mean) if all(c.n for c in tests) else math.nan
            rows.append({"label": label if b == 16 else "", "b": b, "cells": cells,
                         "delta": derived(frame, delta, sheet.key(metric="abs_delta", **key),
                                          "pp"), "score": (tests[0].mean + tests[1].mean) / 2})
    best = max((r for r in rows if math.isfinite(r["score"])), key=lambda r: r["score"],
               default=None)
    for row in rows:
        bold, c = row is best, row["cells"]
        row["cells"] = [
            *(sheet.put(c["test_acc_best", s], pm=PM, bold=bold) for s in EXTREMES),
            *(sheet.put(c["train_acc_last", s], pm=PM) for s in EXTREMES),
            " / ".join(sheet.put(c["tau_interp", s], digits=0, pm=PM) for s in EXTREMES),
            " / ".join(sheet.put(c["tau_best", s], digits=0, pm=PM) for s in EXTREMES),
            sheet.put(row.pop("delta"), bold=bold)]
    return {"rows": rows, "seeds": sheet.seeds()}, sheet.cells, sheet.texts


BEST_COLUMNS = (  # column, metric, unit, scale, event
    ("test_acc_best", "test_acc", "pct", 100, False),
    ("train_acc_last", "train_acc", "pct", 100, False),
    ("tau_interp", "tau_interp", "epoch", 1, True), ("tau_best", "tau_best", "epoch", 1, True))


# Table 1: the optimizer settings, from the config's `optimizers` and `common` sections.
def optimizer_settings(config: dict) -> dict:
    """Table 1 from the main family's resolved recipes (common, Table 1 defaults, family
    recipe and grid merged as the plan does for training), so it shows what the runs use."""
    recipes = {}
    for run in family_runs(config, "main"):
        recipes.setdefault(run.recipe.optimizer, run.recipe)
    rows = []
    for name, shown in optimizer_display(config).items():
        if name not in recipes:
            continue
        recipe = recipes[name]
        decay = f"${latex_number(recipe.weight_decay)}$"
        if recipe.muon_adam_weight_decay is not None:  # the other reading of Muon's lambda
            decay += f" (AdamW path ${latex_number(recipe.muon_adam_weight_decay)}$)"
        rows.append({"label": shown.label, "lr0": f"${latex_number(recipe.lr0)}$",
                     "momentum": _momentum_cell(recipe), "weight_decay": decay,
                     "notes": _notes_cell(shown.notes, recipe),
                     # every hyperparameter as trained (the report's Table 1 shows them;
                     # the PDF's keeps the paper's columns and notes the moved ones)
                     "hyperparameters": ", ".join(
                         f"{k}={v:g}" for k, v in recipe.optimizer_hyperparameters.items())
                     or "---"})
    first = next(iter(recipes.values()))
    adam_like = next((r.optimizer_hyperparameters for r in recipes.values()
                      if "beta_2" in r.declaration.hyperparameters), {})
    return {"rows": rows, "lr0": latex_number(first.lr0),
            "alpha": f"{first.cosine_alpha:g}", "epochs": first.epochs,
            "beta1": f"{adam_like.get('beta_1', math.nan):g}",
            "beta2": f"{adam_like.get('beta_2', math.nan):g}"}


def _momentum_cell(recipe: Recipe) -> str:
    """Table 1's momentum: the recipe's where the optimizer takes one, else its beta_1."""
    if "momentum" in recipe.declaration.takes:
        return f"${latex_number(recipe.momentum)}$"
    beta_1 = recipe.optimizer_hyperparameters.get("beta_1")
    return "---" if beta_1 is None else rf"$\beta_{{1}}{{=}}{beta_1:g}$"


def _notes_cell(notes: str, recipe: Recipe) -> str:
    """The config's notes, then any hyperparameter set away from its Keras default."""
    changed = parse_hyperparameters(recipe.hyperparameters)
    if not changed:
        return notes
    text = ", ".join(rf"\texttt{{{tex_escape(k)}}}$=${v:g}" for k, v in changed.items())
    return text if notes == "---" else f"{notes}; {text}"


# Tables 2-7: builder(runs, config) -> (template context, cells, rendered cell texts).
BUILDERS = {2: partial(checkpoints, 2, 0.1), 3: partial(checkpoints, 3, 2.5), 4: lr_l2,
            5: depth, 6: norm_aug, 7: best_recipe}
