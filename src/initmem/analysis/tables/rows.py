"""The rows and cells of Tables 1-7: which runs each cell is over, in the paper's layout.

Runs are chosen by their spec columns (family, arch, optimizer, lr0, l2, b, augment,
sigma_w, ...), families by the role they play (initmem.plan.roles, through the table's
declaration in initmem.plan.artifacts); a selection over two families (main + lr_l2
for Table 4) cannot count a run twice, since the config check forbids one training in two
families. A table shows a row only where its config plans runs (Sheet.planned), and a
group of rows (a batch size, a network, an optimizer) only where it has one: its rules and
row labels follow the groups present. Each builder takes (runs, config, its declaration)
and returns (template context, cells, rendered cell texts).
"""

from __future__ import annotations

import math

import pandas as pd

from initmem.analysis.metrics import spread_pp
from initmem.analysis.tables.cells import Cell, derived, fmt, measure_cell
from initmem.errors import InputError
from initmem.markup import tex_escape
from initmem.plan.architectures import ARCH_LABELS, depth_study
from initmem.plan.artifacts import Artifact
from initmem.plan.cells import planned_runs, select
from initmem.plan.grid import family_runs
from initmem.plan.optimizers import declarations, optimizer_display, parse_hyperparameters
from initmem.plan.roles import BEST_RECIPE, DEPTH, LONG_SGD, LR_L2, MAIN, NORM_AUG
from initmem.plan.spec import Recipe
from initmem.vocabulary import CELL_KEY, CONFIG_LABELS

PM = r"{\pm}"


class Sheet:
    """Collects a table's cells and their rendered texts, and knows what its config plans."""

    def __init__(self, declared: Artifact, config: dict) -> None:
        """An empty sheet for the table `declared`, of runs the `config` plans."""
        self.declared, self.config, self.cells, self.texts = declared, config, [], []
        self.table, self.sigmas = declared.number, declared.sigma_w
        self.plan = planned_runs(config)  # a row per planned run, its spec columns

    def families(self, *roles: str) -> list[str]:
        """The families playing `roles` (roles the table declares)."""
        return self.declared.families(self.config, *roles)

    def planned(self, **filters: object) -> bool:
        """Whether the config plans any run these spec filters select at the table's
        sigma_w: a row without one is not shown (it could only ever be ??)."""
        return not select(self.plan, sigma_w=list(self.sigmas), **filters).empty

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


def grouped(rows: list[dict], group: str) -> list[dict]:
    """`rows` with `first` (the first of its group: where a label shows) and `rule_after`
    (the last of a group another follows: where a rule goes), by their `group` field."""
    for i, row in enumerate(rows):
        row["first"] = i == 0 or rows[i - 1][group] != row[group]
        row["rule_after"] = i + 1 < len(rows) and rows[i + 1][group] != row[group]
    return rows


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


def planned_rows(sheet: Sheet) -> list[tuple[int, str]]:
    """(b, optimizer) of the ResNet-9 recipes the main sweep plans at the table's sigma_w,
    by b, then in the order of the config's `optimizers`."""
    main = select(sheet.plan, family=sheet.families(MAIN), arch="resnet9",
                  sigma_w=list(sheet.sigmas))
    return [(b, opt) for b in sorted(set(main["b"]))
            for opt in sheet.config["optimizers"] if sheet.planned(
                family=sheet.families(MAIN), arch="resnet9", b=b, optimizer=opt)]


def checkpoints(runs: pd.DataFrame, config: dict, declared: Artifact):
    """Tables 2 and 3 at their sigma_w: per (b, optimizer) the main sweep plans,
    tau_interp, tau_best, validation accuracy at them and at the last epoch, and the
    repair gap; a group of rows per b."""
    sheet, rows, used, labels = Sheet(declared, config), [], [], tex_labels(config)
    (sigma_w,) = declared.sigma_w
    for b, opt in planned_rows(sheet):
        frame = select(runs, family=sheet.families(MAIN), arch="resnet9", optimizer=opt, b=b,
                       sigma_w=sigma_w)
        used.append(frame)
        key = dict(b=b, optimizer=opt, config="resnet9", sigma_w=sigma_w)
        cells = [sheet.put(measure_cell(frame, col, sheet.key(metric=col, **key), unit,
                                        event=event), digits=digits, sign=signed)
                 for col, unit, digits, event, signed in CHECKPOINT_COLUMNS]
        rows.append({"b": b, "optimizer": labels[opt], "cells": cells})
    context = {"sigma_w": f"{sigma_w:g}", "rows": grouped(rows, "b"), "seeds": sheet.seeds(),
               "last_epoch": epochs_label(pd.concat(used)) if used else "?"}
    return context, sheet.cells, sheet.texts


def sweep_row(sheet: Sheet, frame: pd.DataFrame, key: dict, *,
              train: str | None = "train_acc_last", mark_single: bool = False):
    """Test accuracy (%) per sigma_w of the table, train accuracy (%) per sigma_w (or
    none), the spread (pp) over them (?? unless every sigma_w has data), and whether every
    test cell is a single seed. mark_single: daggers on the single-seed cells of a row
    that mixes single- and multi-seed cells."""
    at = {s: select(frame, sigma_w=s) for s in sheet.sigmas}
    test_cells = [measure_cell(at[s], "test_acc_best",
                               sheet.key(metric="test_acc", sigma_w=s, **key), "pct", scale=100)
                  for s in sheet.sigmas]
    single = [c.n == 1 for c in test_cells]
    mixed = mark_single and any(single) and not all(single)
    tests = [sheet.put(c, pm=PM, dagger=mixed and one)
             for c, one in zip(test_cells, single, strict=True)]
    trains = [sheet.put(measure_cell(at[s], train,
                                     sheet.key(metric="train_acc", sigma_w=s, **key), "pct",
                                     scale=100), pm=PM)
              for s in sheet.sigmas] if train else []
    spread_text = sheet.put(derived(frame, spread_pp(frame, sheet.sigmas),
                                    sheet.key(metric="spread", **key), "pp"))
    return tests, trains, spread_text, all(single)


PANEL_B = (16, 128)  # the batch sizes of the paper's Tables 4-6, a panel each if planned


# Table 4: the learning-rate x L2 sweep for SGD, with the Adam and 5,000-epoch rows.
LR_L2_GRID = tuple((lr0, l2) for lr0 in (1e-3, 1e-2, 1e-1) for l2 in (0.0, 1e-3, 5e-3, 1e-2))


def lr_l2_candidates(sheet: Sheet, runs: pd.DataFrame,
                     b: int) -> list[tuple[dict, dict, list[str]]]:
    """Table 4's rows at b, planned or not: (run filters, cell key, row labels)."""
    sgd = dict(family=sheet.families(MAIN, LR_L2), arch="resnet9", optimizer="sgd",
               schedule="cosine", augment=False, b=b)
    rows = [({**sgd, "lr0": lr0, "l2": l2},
             dict(b=b, optimizer="sgd", config="resnet9", lr0=lr0, l2=l2),
             [f"${latex_number(lr0)}$", f"${latex_number(l2)}$", "cos"])
            for lr0, l2 in LR_L2_GRID]
    rows.append((dict(family=sheet.families(MAIN), arch="resnet9", optimizer="adam", b=b),
                 dict(b=b, optimizer="adam", config="resnet9", lr0=1e-3, l2=0.0),
                 [rf"Adam $\eta{{=}}{latex_number(1e-3)}$", "", "cos"]))
    long = dict(family=sheet.families(LONG_SGD), optimizer="sgd", b=b)
    rows.append((long, dict(b=b, optimizer="sgd", config=LONG_SGD, lr0=1e-3, l2=0.0),
                 [rf"SGD $\eta{{=}}{latex_number(1e-3)}$ "
                  f"({epochs_label(select(runs, **long))} ep)", "", "const"]))
    return rows


def lr_l2(runs: pd.DataFrame, config: dict, declared: Artifact):
    """Table 4, a panel per b of PANEL_B it plans: SGD over lr0 x L2 (cosine), then
    Adam's and the long constant-rate SGD's rows, each where planned."""
    sheet, panels = Sheet(declared, config), []
    for b in PANEL_B:
        rows = [lr_l2_row(sheet, select(runs, **filters), key, labels)
                for filters, key, labels in lr_l2_candidates(sheet, runs, b)
                if sheet.planned(**filters)]
        if rows:
            panels.append({"b": b, "rows": rows})
    return ({"panels": panels, "sigmas": [f"{s:g}" for s in sheet.sigmas]}, sheet.cells,
            sheet.texts)


def lr_l2_row(sheet: Sheet, frame: pd.DataFrame, key: dict, labels: list[str]) -> dict:
    """A row of Table 4; a row of single-seed entries carries its dagger on Train."""
    frame = select(frame, sigma_w=list(sheet.sigmas))
    tests, _, spread, single = sweep_row(sheet, frame, key, train=None, mark_single=True)
    train = sheet.put(measure_cell(frame, "train_acc_last",
                                   sheet.key(metric="train_acc_mean", **key), "pct", scale=100),
                      show_std=False, dagger=single)
    return {"labels": labels, "cells": [*tests, spread, train]}


# Tables 5 and 6: test and train accuracy per sigma_w and the spread, two batch sizes.
Group = tuple[str, str, dict]  # (its config key, optimizer, its runs' spec filters)


def planned_groups(sheet: Sheet, groups: list[Group], b: int) -> list[Group]:
    """The groups the config plans at b."""
    return [(config, opt, filters) for config, opt, filters in groups
            if sheet.planned(**filters, b=b, optimizer=opt)]


def test_train_panels(sheet: Sheet, runs: pd.DataFrame, groups: list[Group],
                      labels: dict[str, str]) -> list[dict]:
    """Tables 5 and 6's panels, one per b of PANEL_B it plans: per planned group test and
    train accuracy at the table's sigma_w, and the spread; a config's label on its first
    row."""
    panels = []
    for b in PANEL_B:
        rows = []
        for config, opt, filters in planned_groups(sheet, groups, b):
            frame = select(runs, **filters, b=b, optimizer=opt, sigma_w=list(sheet.sigmas))
            tests, trains, spread, _ = sweep_row(sheet, frame, dict(b=b, optimizer=opt,
                                                                    config=config))
            cells = [c for pair in zip(tests, trains, strict=True) for c in pair]
            rows.append({"config": labels[config], "optimizer": labels[opt],
                         "cells": [*cells, spread]})
        if rows:
            panels.append({"b": b, "rows": grouped(rows, "config")})
    return panels


DEPTH_OPTIMIZERS = ("sgd", "adam")  # the paper's Table 5 rows per network, in its order


def depth_left_out(depth_runs: pd.DataFrame, config: dict) -> list[str]:
    """The optimizers the depth family ran that Table 5 has no rows for (the paper's
    other optimizers and any extension), in the config's order."""
    ran = set(depth_runs["optimizer"]) - set(DEPTH_OPTIMIZERS)
    ordered = [name for name in config["optimizers"] if name in ran]
    return ordered + sorted(ran - set(ordered))


def depth(runs: pd.DataFrame, config: dict, declared: Artifact):
    """Table 5: SGD and Adam rows per network of the paper's depth study and per other
    network the depth comparison plans (its declaration's order), each where planned (the
    main sweep's ResNet-9 among them); the caption names the depth family's other
    optimizers, which have no rows."""
    sheet, labels = Sheet(declared, config), tex_labels(config)
    networks = depth_study(select(sheet.plan, family=sheet.families(DEPTH))["arch"])
    groups = [(arch, opt, dict(family=sheet.families(MAIN, DEPTH), arch=arch, lr0=1e-3,
                               l2=0.0, augment=False))
              for arch in networks for opt in DEPTH_OPTIMIZERS]
    panels = test_train_panels(sheet, runs, groups, labels)
    events = [{"b": b, "rows": grouped([depth_events(sheet, runs, group, b, labels)
                                        for group in planned_groups(sheet, groups, b)],
                                       "config")}
              for b in PANEL_B if planned_groups(sheet, groups, b)]
    left_out = depth_left_out(select(runs, family=sheet.families(DEPTH)), config)
    context = {"panels": panels, "events": events,
               "sigmas": [f"{s:g}" for s in sheet.sigmas], "seeds": sheet.seeds(),
               "row_header": "Architecture",
               "left_out": [labels.get(n, n) for n in left_out]}
    return context, sheet.cells, sheet.texts


def depth_events(sheet: Sheet, runs: pd.DataFrame, group: Group, b: int,
                 labels: dict[str, str]) -> dict:
    """A row of Table 5's lower half: tau_interp and tau_best per sigma_w of one group."""
    arch, opt, filters = group
    frame = select(runs, **filters, b=b, optimizer=opt)
    cells = [sheet.put(measure_cell(select(frame, sigma_w=s), tau, sheet.key(
                 metric=tau, b=b, optimizer=opt, config=arch, sigma_w=s), "epoch",
                 event=True))
             for s in sheet.sigmas for tau in ("tau_interp", "tau_best")]
    return {"config": labels[arch], "optimizer": labels[opt], "cells": cells}


def norm_aug(runs: pd.DataFrame, config: dict, declared: Artifact):
    """Table 6: SGD and Adam with BatchNorm and augmentation, LayerNorm and augmentation, and
    BatchNorm without (the main sweep's runs), each where planned."""
    sheet = Sheet(declared, config)
    choices = {"bn_aug": dict(family=sheet.families(NORM_AUG), arch="resnet9", augment=True),
               "ln_aug": dict(family=sheet.families(NORM_AUG), arch="resnet9_ln",
                              augment=True),
               "bn_noaug": dict(family=sheet.families(MAIN), arch="resnet9", augment=False)}
    groups = [(name, opt, choices[name]) for name in choices for opt in ("sgd", "adam")]
    panels = test_train_panels(sheet, runs, groups, tex_labels(config))
    context = {"panels": panels, "sigmas": [f"{s:g}" for s in sheet.sigmas],
               "row_header": "Configuration"}
    return context, sheet.cells, sheet.texts


# Table 7: the best-recipe comparison at the two extreme scales.
BEST_RECIPES = (("sgd_momentum", "SGD (best)"), ("adam", "Adam"))
BEST_B = (16, 128, 256)


def best_recipe(runs: pd.DataFrame, config: dict, declared: Artifact):
    """Table 7: the best recipes (SGD with momentum, Adam) per b they plan, at the extreme
    sigma_w, and the |delta| between them; the row of highest mean test accuracy in bold;
    a group of rows per recipe, labelled on its first."""
    sheet = Sheet(declared, config)
    rows = [best_recipe_row(sheet, runs, opt, b)
            for opt, _ in BEST_RECIPES for b in BEST_B
            if sheet.planned(family=sheet.families(BEST_RECIPE), optimizer=opt, b=b)]
    names = dict(BEST_RECIPES)
    for row in grouped(rows, "optimizer"):
        row["label"] = names[row["optimizer"]] if row["first"] else ""
    best = max((r for r in rows if math.isfinite(r["score"])), key=lambda r: r["score"],
               default=None)
    for row in rows:
        bold, c = row is best, row["cells"]
        row["cells"] = [
            *(sheet.put(c["test_acc_best", s], pm=PM, bold=bold) for s in sheet.sigmas),
            *(sheet.put(c["train_acc_last", s], pm=PM) for s in sheet.sigmas),
            " / ".join(sheet.put(c["tau_interp", s], digits=0, pm=PM) for s in sheet.sigmas),
            " / ".join(sheet.put(c["tau_best", s], digits=0, pm=PM) for s in sheet.sigmas),
            sheet.put(row.pop("delta"), bold=bold)]
    return {"rows": rows, "seeds": sheet.seeds()}, sheet.cells, sheet.texts


def best_recipe_row(sheet: Sheet, runs: pd.DataFrame, opt: str, b: int) -> dict:
    """A row of Table 7 before formatting: its cells by (column, sigma_w), the |delta| of
    the extreme sigma_w's test accuracies, and its mean test accuracy (the bold row's)."""
    frame = select(runs, family=sheet.families(BEST_RECIPE), optimizer=opt, b=b)
    key = dict(b=b, optimizer=opt, config=BEST_RECIPE)
    at = {s: select(frame, sigma_w=s) for s in sheet.sigmas}
    cells = {(col, s): measure_cell(at[s], col, sheet.key(metric=metric, sigma_w=s, **key),
                                    unit, scale, event)
             for col, metric, unit, scale, event in BEST_COLUMNS for s in sheet.sigmas}
    tests = [cells["test_acc_best", s] for s in sheet.sigmas]
    delta = abs(tests[0].mean - tests[-1].mean) if all(c.n for c in tests) else math.nan
    return {"optimizer": opt, "b": b, "cells": cells,
            "delta": derived(frame, delta, sheet.key(metric="abs_delta", **key), "pp"),
            "score": sum(c.mean for c in tests) / len(tests)}


BEST_COLUMNS = (  # column, metric, unit, scale, event
    ("test_acc_best", "test_acc", "pct", 100, False),
    ("train_acc_last", "train_acc", "pct", 100, False),
    ("tau_interp", "tau_interp", "epoch", 1, True), ("tau_best", "tau_best", "epoch", 1, True))


# Table 1: the optimizer settings, from the config's `optimizers` and `common` sections.
def optimizer_settings(runs: None, config: dict, declared: Artifact):
    """Table 1 from the main sweep's resolved recipes (common, Table 1 defaults, family
    recipe and grid merged as the plan does for training), so it shows what the runs use;
    no cells (it is the config, not a measurement)."""
    main = declared.family(config, MAIN)
    if main is None:
        raise InputError(f"table 1 shows the main sweep's optimizers: no family of the "
                         f"config plays role {MAIN!r} (families: {', '.join(config['families'])})")
    recipes = {}
    for run in family_runs(config, main):
        recipes.setdefault(run.recipe.optimizer, run.recipe)
    rows = []
    for name, shown in optimizer_display(config).items():
        if name not in recipes:
            continue
        recipe = recipes[name]
        decay = f"${latex_number(recipe.weight_decay)}$"
        adam_path = recipe.optimizer_hyperparameters.get("adam_weight_decay")
        if adam_path is not None:  # the other reading of Muon's lambda
            decay += f" (AdamW path ${latex_number(adam_path)}$)"
        rows.append({"label": shown.label, "lr0": f"${latex_number(recipe.lr0)}$",
                     "momentum": _momentum_cell(recipe), "weight_decay": decay,
                     "notes": _notes_cell(shown.notes, recipe),
                     # every hyperparameter as trained (the report's Table 1 shows them;
                     # the PDF's keeps the paper's columns and notes the moved ones)
                     "hyperparameters": ", ".join(
                         f"{k}={v:g}" for k, v in recipe.optimizer_hyperparameters.items()
                         if v is not None) or "---"})
    first = next(iter(recipes.values()))
    adam_like = next((r.optimizer_hyperparameters for r in recipes.values()
                      if "beta_2" in r.declaration.hyperparameters), {})
    return {"rows": rows, "lr0": latex_number(first.lr0),
            "alpha": f"{first.cosine_alpha:g}", "epochs": first.epochs,
            "beta1": f"{adam_like.get('beta_1', math.nan):g}",
            "beta2": f"{adam_like.get('beta_2', math.nan):g}"}, [], []


def _momentum_cell(recipe: Recipe) -> str:
    """Table 1's momentum, as the paper shows it: the SGD family's (0 for SGD without), an
    adaptive method's beta_1 where it has one (not Muon's own momentum: ---)."""
    settings = recipe.optimizer_hyperparameters
    if not recipe.declaration.adaptive:
        return f"${latex_number(settings.get('momentum', 0.0))}$"
    beta_1 = settings.get("beta_1")
    return "---" if beta_1 is None else rf"$\beta_{{1}}{{=}}{beta_1:g}$"


def _notes_cell(notes: str, recipe: Recipe) -> str:
    """The config's notes, then any hyperparameter set away from its default that the
    momentum and decay columns do not show."""
    shown = ("weight_decay", "adam_weight_decay",
             *(() if recipe.declaration.adaptive else ("momentum",)))
    changed = {k: v for k, v in parse_hyperparameters(recipe.hyperparameters).items()
               if k not in shown}
    if not changed:
        return notes
    text = ", ".join(rf"\texttt{{{tex_escape(k)}}}$=${v:g}" for k, v in changed.items())
    return text if notes == "---" else f"{notes}; {text}"

