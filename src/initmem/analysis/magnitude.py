"""How large our values are against the paper's, said apart from the verdict (which is
about direction only): per value with a published number, "reproduced" (the paper's value
inside our 95% interval), "smaller" or "larger" (outside it, on that side); for the claim,
one word over its values, or "not comparable at this scale" where the runs are not at the
paper's scale (fewer training images, a narrower network, another data set), with why:
their data and width, and their test accuracies against the paper's (`paper_accuracy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from initmem.analysis.inference import Estimate
from initmem.plan.spec import DATASET_SIZES

PAPER_DATASET = "cifar10"
WORDS = ("reproduced", "smaller", "larger", "not comparable at this scale")


def compare(paper: float, e: Estimate) -> str:
    """Where the paper's value lies against our 95% interval (an exact value: itself)."""
    lo, hi = e.interval()
    if not (math.isfinite(lo) and math.isfinite(hi)) and e.kind != "exact":
        return "no interval"
    if lo <= paper <= hi:
        return "reproduced"
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


def statement(paper: dict[str, float], values: dict[str, Estimate], runs: pd.DataFrame,
              keys: list[str], paper_accuracy: list[float] | None,
              label: Callable[[str], str], shown: Callable[[Estimate], str]) -> tuple[str, str]:
    """The claim's magnitude word and its sentence: where the scale differs, how (the word
    says it is not comparable); then each value (`label`, `shown` with its interval)
    beside the paper's."""
    compared = {n: compare(v, values[n]) for n, v in paper.items() if n in values}
    compared = {n: w for n, w in compared.items() if w != "no interval"}
    if not compared:
        return "", ""
    parts = [f"{label(n)} {shown(values[n])}, the paper's {paper[n]:g}: {w}"
             for n, w in compared.items()]
    gaps = scale_gap(runs)
    words = set(compared.values())
    word = words.pop() if len(words) == 1 else "mixed"
    if gaps:
        lo, hi = accuracy_range(runs, keys)
        theirs = (f", the paper's {paper_accuracy[0]:g}-{paper_accuracy[1]:g}%"
                  if paper_accuracy else "")
        why = f"{'; '.join(gaps)}: test accuracy {lo:.0f}-{hi:.0f}% here{theirs}. "
        return WORDS[3], why + "; ".join(parts) + "."
    return word, "; ".join(parts) + "."

