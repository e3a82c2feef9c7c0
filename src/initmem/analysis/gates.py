"""A claim's presuppositions, checked per compared cell before any verdict (the claims
file's `gates`). A failed gate makes the claim "cannot be judged (out of regime)", naming
the gate, the cell and the numbers.

- trained: every run of the cell reached the training accuracy the claim presupposes, at
  its last epoch (`end`), at tau_best where its value is read (`best`), and reached
  tau_interp (`interpolates`) where the sentence says the runs interpolate.
- evaluation: inference-mode accuracy means something: each run's test accuracy at
  tau_best is above chance (the lower end of its exact binomial 95% interval over the
  test images), and where the records carry it, Keras' BatchNorm moving variance is
  within a factor BN_VAR_FACTOR of the batch variance at tau_best. A value read over
  epochs (|beta(t)|) needs validation accuracy above chance at every epoch it reads.
- clock: the clock the claim's mechanism runs on (the paper's section 4) reached by the
  cell, against the paper's value for the same recipe: a forgetting mechanism must
  `reach` within a factor `factor` of it, a memory mechanism must `stay` below factor x it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy

from initmem.plan.architectures import BATCHNORM_ARCHS
from initmem.plan.spec import DATASET_SIZES

CHANCE = 0.1  # ten classes
BN_VAR_FACTOR = 2.0
CLOCK_FACTOR = 10.0


@dataclass(frozen=True)
class Gate:
    """One gate on one cell: passed (None: not checked, e.g. not recorded) and why."""

    name: str
    cell: str
    passed: bool | None
    detail: str

    def text(self) -> str:
        """The gate in words: 'name (cell): pass, FAIL or unchecked, detail'."""
        mark = {True: "pass", False: "FAIL", None: "unchecked"}[self.passed]
        return f"{self.name} ({self.cell}): {mark}, {self.detail}"


def _where(run: pd.Series) -> str:
    return f"sigma_w {run['sigma_w']:g} seed {int(run['seed'])}"


def _threshold(cell: str, runs: pd.DataFrame, column: str, minimum: float,
               what: str, shown: int = 8) -> Gate:
    """Every run at `minimum` or more; failing, the runs below it, lowest first, each with
    how far short it falls (the first `shown` of them)."""
    values = 100 * runs[column].astype(float)
    below = runs.assign(value=values)[~(values >= minimum).to_numpy()].sort_values(
        "value", na_position="first")
    if below.empty:
        return Gate("trained", cell, True, f"{what} >= {minimum:g}% in all {len(runs)} runs")
    short = [f"{_where(r)} at {r['value']:.1f}% ({minimum - r['value']:.1f} pp short)"
             if math.isfinite(r["value"]) else f"{_where(r)} not recorded"
             for _, r in below.head(shown).iterrows()]
    more = f", and {len(below) - shown} more" if len(below) > shown else ""
    return Gate("trained", cell, False, f"{what} below {minimum:g}% in {len(below)} of "
                f"{len(runs)} runs: {', '.join(short)}{more}")


def trained(cell: str, runs: pd.DataFrame, spec: dict[str, Any]) -> list[Gate]:
    """The trained gates `spec` asks of a cell: training accuracy at the last epoch (`end`) and
    at tau_best (`best`), and tau_interp reached by every run (`interpolates`)."""
    gates = []
    if "end" in spec:
        gates.append(_threshold(cell, runs, "train_acc_last", spec["end"],
                                "final training accuracy"))
    if "best" in spec:
        gates.append(_threshold(cell, runs, "train_acc_best", spec["best"],
                                "training accuracy at tau_best"))
    if spec.get("interpolates"):
        never = runs[runs["tau_interp"].isna().to_numpy()]
        detail = f"reached 99.5% training accuracy in {len(runs) - len(never)} of {len(runs)} runs"
        if len(never):
            detail += f" (not: {', '.join(_where(r) for _, r in never.head(3).iterrows())})"
        gates.append(Gate("trained", cell, never.empty, detail))
    return gates


def epoch_images(rows: pd.DataFrame) -> pd.Series:
    """Validation (and test) images evaluated every epoch: eval_subset, else the split."""
    full = rows["dataset"].map(lambda d: DATASET_SIZES[d][1]).astype(float)
    return rows["eval_subset"].astype(float).fillna(full)


def test_images(runs: pd.DataFrame) -> np.ndarray:
    """Test images behind each run's test_acc_best: its best_test_subset, else those
    evaluated every epoch."""
    return runs["best_test_subset"].astype(float).fillna(epoch_images(runs)).to_numpy()


def above_chance(accuracy: np.ndarray, images: np.ndarray) -> np.ndarray:
    """Whether the exact binomial 95% interval of each accuracy lies above chance."""
    hits = np.round(np.asarray(accuracy, float) * images)
    lower = scipy.stats.beta.ppf(0.025, np.maximum(hits, 1e-9), images - hits + 1)
    return np.where(hits > 0, lower, 0.0) > CHANCE


def evaluation(cell: str, runs: pd.DataFrame) -> list[Gate]:
    """The evaluation gates of a cell: each run's test accuracy at tau_best above chance, and
    Keras' BatchNorm moving variance near the batch variance (unchecked without BatchNorm)."""
    ok = above_chance(runs["test_acc_best"].to_numpy(float), test_images(runs))
    at_chance = runs[~ok]
    detail = f"test accuracy at tau_best above chance in {int(ok.sum())} of {len(runs)} runs"
    if len(at_chance):
        sigmas = at_chance["sigma_w"].value_counts().sort_index()
        detail += " (at chance: " + ", ".join(f"{n} at sigma_w {s:g}"
                                               for s, n in sigmas.items()) + ")"
    return [Gate("evaluation", cell, bool(ok.all()), detail), _batchnorm(cell, runs)]


def _batchnorm(cell: str, runs: pd.DataFrame) -> Gate:
    bn = runs[runs["arch"].isin(BATCHNORM_ARCHS).to_numpy()]
    if bn.empty:
        return Gate("evaluation", cell, None, "no BatchNorm")
    if "bn_var_ratio_best" not in bn or bn["bn_var_ratio_best"].isna().all():
        return Gate("evaluation", cell, None, "BatchNorm moving statistics not recorded "
                    "(records older than schema 3)")
    ratio = bn["bn_var_ratio_best"].astype(float)
    off = (ratio > BN_VAR_FACTOR) | (ratio < 1 / BN_VAR_FACTOR)
    detail = (f"BatchNorm moving variance within {BN_VAR_FACTOR:g}x of the batch variance "
              f"at tau_best in {int((~off).sum())} of {len(bn)} runs")
    if off.any():
        worst = bn.loc[np.log(ratio).abs().idxmax()]
        detail += f" (worst {float(worst['bn_var_ratio_best']):.3g}x, {_where(worst)})"
    return Gate("evaluation", cell, not off.any(), detail)


def evaluation_over_epochs(cell: str, history: pd.DataFrame) -> Gate:
    """Validation accuracy above chance at every epoch a |beta(t)| value reads."""
    ok = above_chance(history["val_acc"].to_numpy(float), epoch_images(history).to_numpy())
    bad = history[~ok]
    detail = (f"validation accuracy above chance at {int(ok.sum())} of {len(history)} "
              "run-epochs read")
    if len(bad):
        detail += (f" (at chance up to epoch {int(bad['epoch'].max())}, sigma_w "
                   + ", ".join(f"{s:g}" for s in sorted(bad["sigma_w"].unique())) + ")")
    return Gate("evaluation", cell, bool(ok.all()), detail)


def clock(cell: str, runs: pd.DataFrame, spec: dict[str, Any]) -> Gate:
    """The clock gate: the cell's median `spec["name"]` clock against the paper's value; it
    must `reach` 1/factor of it or `stay` below factor x it (unchecked where not recorded)."""
    name, paper = spec["name"], float(spec["paper"])
    factor = float(spec.get("factor", CLOCK_FACTOR))
    reached = float(runs[name].astype(float).median())
    if spec["needs"] == "reach":
        passed = reached >= paper / factor
        relation = (f"{paper / reached:.3g}x short of" if reached < paper and reached > 0
                    else "at or beyond")
        need = f"needs at least 1/{factor:g} of it"
    else:
        passed = reached <= paper * factor
        relation = "below" if reached <= paper else f"{reached / paper:.3g}x above"
        need = f"must stay below {factor:g}x it"
    detail = (f"{name} reached {reached:.3g}, {relation} the paper's {paper:.3g} "
              f"(the mechanism {need})")
    return Gate("clock", cell, passed if math.isfinite(reached) else None, detail)
