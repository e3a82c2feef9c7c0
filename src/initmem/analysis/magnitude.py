"""How large our values are against the paper's, said apart from the verdict (which is
about direction only). Per value with a published number: "consistent" (the paper's value
lies inside our 95% interval, which only says our data do not reject it; an equivalence
test would be needed to say more), "smaller" or "larger" (ours, in the value's unit, named:
pp of test accuracy); a design input (a clock the recipe sets) gets no word. For the
claim, one word over its values, or "not comparable at this scale" where the runs are not
at the paper's scale (fewer training images, a narrower network, another data set), with
why: their data and width, their test accuracies against the paper's (`paper_accuracy`),
and per value no word but both sizes, in pp and as a share of the best test accuracy
above chance (a scale-free comparison: a spread of 15.8 pp is 61% of 36% - 10% here, the
paper's 22.8 pp 29% of 88.1% - 10%).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import pandas as pd

from initmem.analysis.inference import Estimate
from initmem.plan.spec import DATASET_SIZES

PAPER_DATASET = "cifar10"
CHANCE = 10.0  # CIFAR-10's chance test accuracy (%)
WORDS = ("consistent", "smaller", "larger", "not comparable at this scale")
IN_PP = ("spread", "max_spread", "min_spread", "delta")  # stats in pp of test accuracy
DESIGN_INPUTS = ("max_clock",)  # set by the recipe, not measured: no size word


def compare(paper: float, e: Estimate) -> str:
    """Where the paper's value lies against our 95% interval (an exact value: itself)."""
    lo, hi = e.interval()
    if not (math.isfinite(lo) and math.isfinite(hi)) and e.kind != "exact":
        return "no interval"
    if lo <= paper <= hi:
        return "consistent"
    return "smaller" if paper > hi else "larger"


def scale_gap(runs: pd.DataFrame) -> list[str]:
    """How the runs' scale differs from the paper's (nothing: at its scale)."""
    gaps = []
    datasets = sorted(set(runs["dataset"].dropna()))
    if datasets != [PAPER_DATASET]:
        gaps.append(f"data set {', '.join(datasets)}")
    full = DATASET_SIZES[PAPER_DATASET][0]
    subsets = runs["train_subset"].astype(float).dropna()
    if len(subsets) and subsets.min() < full:
        gaps.append(f"{int(subsets.min()):,} training images of the paper's {full:,}")
    widths = runs["width"].astype(float)
    if (widths < 1).any():
        gaps.append(f"width {widths.min():g} of the paper's")
    return gaps


def accuracy_range(runs: pd.DataFrame, keys: list[str]) -> tuple[float, float]:
    """Lowest and highest seed-mean test accuracy at tau_best (%) over the runs' cells."""
    means = 100 * runs.groupby([*keys, "sigma_w"], dropna=False)["test_acc_best"].mean()
    return float(means.min()), float(means.max())


def above_chance(value: float, best: float) -> str:
    """A size in pp as a share of the best test accuracy (%) above chance."""
    return f"{100 * value / (best - CHANCE):.0f}%" if best > CHANCE else "n/a"


def statement(paper: dict[str, float], values: dict[str, Estimate], runs: pd.DataFrame,
              keys: list[str], paper_accuracy: list[float] | None,
              label: Callable[[str], str], shown: Callable[[Estimate], str],
              stats: Mapping[str, str]) -> tuple[str, str]:
    """The claim's magnitude word and its sentence: where the scale differs, how (the word
    says it is not comparable) and each value beside the paper's in pp and above chance;
    else each value (`label`, `shown` with its interval, its unit from `stats`) beside the
    paper's with its word; a design input beside the paper's, without one."""
    given = {n: v for n, v in paper.items() if n in values}
    compared = {n: compare(v, values[n]) for n, v in given.items()
                if stats.get(n) not in DESIGN_INPUTS}
    compared = {n: w for n, w in compared.items() if w != "no interval"}
    if not compared:
        return "", ""
    inputs = [f"{label(n)} {shown(values[n])}, the paper's {given[n]:g} (set by the recipe: "
              "no size word)" for n in given if stats.get(n) in DESIGN_INPUTS]
    unit = {n: " pp" if stats.get(n) in IN_PP else "" for n in compared}
    gaps = scale_gap(runs)
    if gaps:
        lo, hi = accuracy_range(runs, keys)
        theirs = (f", the paper's {paper_accuracy[0]:g}-{paper_accuracy[1]:g}%"
                  if paper_accuracy else "")
        parts = [f"{label(n)} {shown(values[n])}{unit[n]}, the paper's {given[n]:g}{unit[n]}"
                 + (f" ({above_chance(values[n].value, hi)} of the best test accuracy above "
                    f"chance here, {above_chance(given[n], paper_accuracy[1])} in the paper)"
                    if unit[n] and paper_accuracy else "") for n in compared]
        why = f"{'; '.join(gaps)}: test accuracy {lo:.0f}-{hi:.0f}% here{theirs}. "
        return WORDS[3], why + "; ".join(parts + inputs) + "."
    parts = [f"{label(n)} {shown(values[n])}{unit[n]}, the paper's {given[n]:g}{unit[n]}: {w}"
             for n, w in compared.items()]
    words = set(compared.values())
    return (words.pop() if len(words) == 1 else "mixed"), "; ".join(parts + inputs) + "."
