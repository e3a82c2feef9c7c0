"""The numbers the paper's prose quotes, as LaTeX macros (results/paper/macros.tex).

Each quote (QUOTES) names the runs it is computed from by their spec columns; a number
whose runs are partly missing carries the tables' red -k marker, and one without runs is
a red ?? (never a stale number). Spreads follow the text: 25 sigma_w values for the main
grid (Sections 1 and 3), the 5-point grid where the text cites Tables 4-6. The clock
values are the paper's Section 4 arithmetic (constant rate, K = epochs x ceil(n/b)).
Design numbers (runs, seeds, sigma_w values, epochs) come from the config.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from initmem.analysis import metrics
from initmem.analysis.metrics import spread_pp
from initmem.analysis.tables.cells import NO_DATA, derived, fmt
from initmem.markup import tex_escape
from initmem.plan import grid, roles
from initmem.plan.architectures import ARCHITECTURES
from initmem.plan.cells import recipe_keys, select
from initmem.plan.schedule import clock_estimate
from initmem.plan.spec import Recipe
from initmem.records.files import recipe_of_row
from initmem.vocabulary import EXTREME_SIGMAS as EXTREMES
from initmem.vocabulary import FIVE_SIGMAS as FIVE
from initmem.vocabulary import GENERATED, SYNTHETIC_MARK, missing

# A quote names families by the role they play (initmem.plan.roles), resolved against the
# config when its value is computed (`_filters`).
MAIN = {"role": roles.MAIN, "arch": "resnet9"}
SGD_LR = {"role": [roles.MAIN, roles.LR_L2], "arch": "resnet9", "optimizer": "sgd",
          "schedule": "cosine", "augment": False}


@dataclass(frozen=True)
class Quote:
    """A number of the prose: kind of statistic, the runs' filters, its sigma_w values."""

    name: str
    kind: str  # spread | max_spread | test | delta | T_SGD | T_L2 | beta_final | beta_decades
    where: dict = field(default_factory=dict)
    sigmas: tuple[float, ...] | None = None  # None: every sigma_w of the runs


def _b(b: int) -> str:
    words = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"]
    return "b" + "".join(words[int(d)] for d in str(b))


LR = {1e-2: "LrMid", 1e-1: "LrHigh"}
L2 = {1e-3: "LtwoLow", 5e-3: "LtwoMid", 1e-2: "LtwoHigh"}
OPT = {"sgd": "SGD", "sgd_momentum": "Momentum", "adam": "Adam", "adamw": "AdamW",
       "muon": "Muon"}
DEPTH = {a.name: a.macro for a in ARCHITECTURES.values() if a.macro}  # the depth study's
NORM = {"BNAug": {"role": roles.NORM_AUG, "arch": "resnet9", "augment": True},
        "LNAug": {"role": roles.NORM_AUG, "arch": "resnet9_ln", "augment": True}}

QUOTES = [
    *(Quote(f"Spread{OPT[o]}{_b(b)}", "spread", {**MAIN, "optimizer": o, "b": b})
      for o, bs in (("sgd", (16, 128, 256)), ("sgd_momentum", (16, 128)),
                    ("adam", (16, 128, 256)), ("adamw", (128,)), ("muon", (128,)))
      for b in bs),
    Quote("TestSGDbOneTwoEightSigmaLow", "test", {**MAIN, "optimizer": "sgd", "b": 128},
          (0.1,)),
    Quote("TestSGDbOneTwoEightSigmaHigh", "test", {**MAIN, "optimizer": "sgd", "b": 128},
          (2.5,)),
    *(Quote(f"SpreadSGD{LR[lr]}{L2.get(l2, '')}{_b(b)}", "spread",
            {**SGD_LR, "lr0": lr, "l2": l2, "b": b}, FIVE)
      for lr, l2, bs in ((1e-2, 1e-2, (16, 128)), (1e-2, 0.0, (16, 128)),
                         (1e-1, 0.0, (16, 128)), (1e-2, 1e-3, (128,)), (1e-2, 5e-3, (128,)))
      for b in bs),
    Quote("SpreadLongSGDbOneTwoEight", "spread", {"role": roles.LONG_SGD, "b": 128}, FIVE),
    Quote("TestBestSGDbOneTwoEight", "test",
          {"role": roles.BEST_RECIPE, "optimizer": "sgd_momentum", "b": 128}, EXTREMES),
    Quote("DeltaBestSGDbOneTwoEight", "delta",
          {"role": roles.BEST_RECIPE, "optimizer": "sgd_momentum", "b": 128}, EXTREMES),
    Quote("DeltaBestAdambOneSix", "delta",
          {"role": roles.BEST_RECIPE, "optimizer": "adam", "b": 16}, EXTREMES),
    *(Quote(f"SpreadDepth{DEPTH[a]}bOneTwoEight", "spread",
            {"role": [roles.MAIN, roles.DEPTH], "arch": a, "optimizer": "sgd", "b": 128,
             "lr0": 1e-3, "l2": 0.0, "augment": False}, FIVE) for a in DEPTH),
    *(Quote(f"Spread{n}SGD{_b(b)}", "spread", {**w, "optimizer": "sgd", "b": b}, FIVE)
      for n, w in NORM.items() for b in (16, 128)),
    Quote("SpreadNormAugAdamMax", "max_spread",  # App. E: Adam <= 3.5 pp in all six
          {"role": [roles.NORM_AUG, roles.MAIN], "arch": ["resnet9", "resnet9_ln"],
           "optimizer": "adam", "b": [16, 128]}, FIVE),
    Quote("TSGDbOneTwoEight", "T_SGD", {**MAIN, "optimizer": "sgd", "b": 128}),
    Quote("TSGDLongbOneTwoEight", "T_SGD", {"role": roles.LONG_SGD, "b": 128}),
    Quote("TSGDLrMidbOneSix", "T_SGD", {**SGD_LR, "lr0": 1e-2, "l2": 0.0, "b": 16}),
    Quote("TLtwoLrMidLtwoLowbOneTwoEight", "T_L2", {**SGD_LR, "lr0": 1e-2, "l2": 1e-3,
                                                     "b": 128}),
    Quote("TLtwoLrMidLtwoMidbOneTwoEight", "T_L2", {**SGD_LR, "lr0": 1e-2, "l2": 5e-3,
                                                     "b": 128}),
    *(Quote(f"Beta{kind}{OPT[o]}bOneTwoEight", f"beta_{kind.lower()}",
            {**MAIN, "optimizer": o, "b": 128})
      for kind in ("Final", "Decades") for o in ("sgd", "adam")),
]


def _filters(where: dict, config: dict | None) -> dict:
    """A quote's filters with its roles as the config's families playing them (without a
    config, each role is the family of its name: initmem.plan.roles.families)."""
    if "role" not in where:
        return where
    rest = {k: v for k, v in where.items() if k != "role"}
    return {**rest, "family": roles.families(config or {}, *_listed(where["role"]),
                                             reader="initmem macros")}


def quote_value(quote: Quote, runs: pd.DataFrame, epochs: pd.DataFrame | None = None,
                config: dict | None = None) -> tuple[float, pd.DataFrame]:
    """(value, the runs behind it); NaN when the runs cannot give it. `config` says which
    family plays each role its filters name (default: the role's own name)."""
    where = _filters(quote.where, config)
    frame = select(runs, **where)
    if quote.sigmas is not None:
        frame = select(frame, sigma_w=list(quote.sigmas))
    if frame.empty:
        return math.nan, frame
    if quote.kind == "spread":
        return spread_pp(frame, quote.sigmas), frame
    if quote.kind == "max_spread":  # the largest spread among the selected recipes
        spreads = [spread_pp(group, quote.sigmas) for _, group in
                   frame.groupby(recipe_keys(), dropna=False)]
        return float(np.max(spreads)), frame  # NaN when any one is unknown
    if quote.kind in ("test", "delta"):
        means = [100 * select(frame, sigma_w=s)["test_acc_best"].mean()
                 for s in quote.sigmas]
        value = np.mean(means) if quote.kind == "test" else abs(means[0] - means[-1])
        return float(value), frame
    if quote.kind in ("T_SGD", "T_L2"):
        r = recipe_of(frame)
        clocks = clock_estimate(r.lr0, r.b, r.total_steps, r.shrinkage)
        return clocks[quote.kind], frame.iloc[:0]  # design arithmetic: no runs needed
    if epochs is None:
        return math.nan, frame
    return beta_summary(quote.kind, select(epochs, **where)), frame


def recipe_of(frame: pd.DataFrame) -> Recipe:
    """The one recipe of a selection of runs (an error if it holds several)."""
    specs = frame[recipe_keys()].drop_duplicates()
    if len(specs) != 1:
        raise ValueError(f"a clock quote must select one recipe; it selects {len(specs)}")
    return recipe_of_row(specs.iloc[0].to_dict())


def beta_summary(kind: str, epochs: pd.DataFrame) -> float:
    """|beta| at the end (median over the last 10% of epochs) or its decay in decades
    (log10 of the peak over the first 10% of epochs over that final value)."""
    if epochs.empty:
        return math.nan
    beta = metrics.beta(epochs).dropna(subset=["abs_beta"]).sort_values("epoch")
    tenth = max(1, len(beta) // 10)
    first, last = beta["abs_beta"].head(tenth).max(), beta["abs_beta"].tail(tenth).median()
    return float(last if kind == "beta_final" else math.log10(first / last))


def render_value(quote: Quote, value: float, frame: pd.DataFrame) -> str:
    """A quote's value as LaTeX: a clock in scientific notation, else in pp (|beta| to two
    decimals) with the markers of the runs behind it, as the tables print a cell."""
    if quote.kind in ("T_SGD", "T_L2"):
        return NO_DATA if not math.isfinite(value) else rf"\ensuremath{{{scientific(value)}}}"
    cell = derived(frame, value, {}, "pp")
    digits = 2 if quote.kind.startswith("beta") else 1
    return fmt(cell, digits, show_std=False, ensuremath=True)


def scientific(x: float) -> str:
    """Two significant digits; 7.3\\cdot 10^{-4} below 0.1."""
    if x >= 0.1 or x == 0:
        return f"{x:.2g}"
    exponent = math.floor(math.log10(x))
    return rf"{x / 10**exponent:.1f}\cdot 10^{{{exponent}}}"


def compute(runs: pd.DataFrame, epochs: pd.DataFrame | None = None,
            config: dict | None = None) -> pd.DataFrame:
    """Every quote's value and how many of its runs are missing (for the scorecard),
    indexed by macro name."""
    rows = []
    for quote in QUOTES:
        value, frame = quote_value(quote, runs, epochs, config)
        absent = int(missing(frame).sum()) if len(frame) else 0
        rows.append({"macro": quote.name, "value": value, "n_missing": absent})
    return pd.DataFrame(rows).set_index("macro")


def design_numbers(config: dict) -> dict[str, str]:
    """The design numbers the prose quotes: runs (main grid and all), its sigma_w, seeds, epochs."""
    runs = grid.expand_runs(config)
    name = roles.family(config, roles.MAIN)
    main = config["families"][name]
    count = sum(r.recipe.family == name for r in runs)
    # from the runs, not the family's recipe: a variant or grid may set the epochs
    epochs = sorted({r.recipe.epochs for r in runs if r.recipe.family == name})
    return {"NumRunsMain": f"{count:,}".replace(",", "{,}"),
            "NumRunsTotal": f"{len(runs):,}".replace(",", "{,}"),
            "NumSigmaMain": str(len(grid.sigma_values(config["sigma_sets"][main["sigma_w"]]))),
            "NumSeedsMain": str(len(config["seed_sets"][main["seeds"]])),
            "EpochsMain": "/".join(map(str, epochs))}


def render(runs: pd.DataFrame, epochs: pd.DataFrame | None, config: dict) -> str:
    """The macros file: the records' source, the synthetic mark, the design numbers, each quote."""
    sources = sorted(runs["record_source"].dropna().astype(str).unique())
    synthetic = GENERATED in sources
    lines = ["% Generated by initmem.macros from the aggregated run records; do not edit.",
             rf"\newcommand{{\RecordSource}}{{{tex_escape(', '.join(sources) or 'none')}}}",
             rf"\newcommand{{\SyntheticMark}}{{{SYNTHETIC_MARK if synthetic else ''}}}"]
    lines += [rf"\newcommand{{\{k}}}{{{v}}}" for k, v in design_numbers(config).items()]
    for quote in QUOTES:
        value, frame = quote_value(quote, runs, epochs, config)
        lines.append(rf"\newcommand{{\{quote.name}}}{{{render_value(quote, value, frame)}}}")
    return "\n".join(lines) + "\n"


def read_epochs(path: str | Path, config: dict | None = None) -> pd.DataFrame:
    """Only what the |beta| quotes need: their runs' val_acc per epoch."""
    wanted = [_filters(q.where, config) for q in QUOTES if q.kind.startswith("beta")]
    filters = [(k, "in", sorted({v for w in wanted for v in _listed(w[k])}))
               for k in ("family", "optimizer", "b")]
    columns = [*recipe_keys(), "epoch", "sigma_w", "seed", "val_acc"]
    return pd.read_parquet(path, columns=columns, filters=filters)


def _listed(value: object) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def write_macros(runs_path: str | Path, epochs_path: str | Path, config_path: str | Path,
                 out_path: str | Path) -> Path:
    """Compute the macros from the runs and epochs tables and the config; write them to out_path."""
    runs, config = pd.read_parquet(runs_path), grid.load_config(config_path)
    text = render(runs, read_epochs(epochs_path, config), config)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem macros`."""
    parser.add_argument("--runs", required=True, help="results/aggregate/runs.parquet")
    parser.add_argument("--epochs", required=True, help="results/aggregate/epochs.parquet")
    parser.add_argument("--config", required=True, help="config.yaml (design numbers)")
    parser.add_argument("--out", required=True, help="output .tex (results/paper/macros.tex)")


def main(args: argparse.Namespace) -> int:
    """`initmem macros`: write the numbers the prose quotes."""
    write_macros(args.runs, args.epochs, args.config, args.out)
    return 0
