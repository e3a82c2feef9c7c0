"""A claim judged in looks (a group-sequential design): at each look its conditions are
tested at that look's nominal level, and it holds, fails, is futile or continues.

Error control across looks is Lan-DeMets alpha spending with the Kim-DeMets power
function alpha(t) = alpha t^RHO of the information fraction t, RHO = 2: between Pocock's
shape (RHO 1: early looks as strict as the last) and O'Brien-Fleming's (about RHO 3:
nearly nothing spent early). O'Brien-Fleming's first two looks (levels 1e-6 and 8e-4 at
5 looks) stopped almost no claim of config/gpu_first.yaml at the paper's effects, which
its 3-5 seeds there cannot reach; RHO 2 stops them a look or two earlier for a last-look
level of 0.035 instead of 0.042 (docs/claims.md gives both designs' simulated costs and
power). The boundaries are the exact group-sequential ones for a
statistic that accumulates like Brownian motion (z at looks i < j correlated
sqrt(t_i / t_j)), converted to nominal levels on the engine's own tests
(initmem.analysis.claims.test_condition): whatever test issue a condition uses (t,
Tukey's range, two one-sided tests) is called through that one function at the look's
level, so the same spending serves every convention.

Per look, in this order:
  out of regime   a gate failed: the claim never buys more seeds (gates come first)
  holds           every condition's Holm-adjusted p lies below the look's level
  fails           some condition's interval at the Bonferroni level 1 - level/m excludes
                  the claimed effect (the same spending guards false failures)
  futile          the last look, undecided; or earlier, its intervals narrowed to the
                  maximum seeds around today's estimates would still decide nothing
                  (non-binding: stopping early for futility only lowers both error rates)
  continue        otherwise: its cells get the next look's seeds
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np
from scipy import optimize, stats

from initmem.analysis import claims as judge
from initmem.analysis import gates, inference
from initmem.analysis.inference import ALPHA, Estimate

DECISIONS = ("holds", "fails", "futile", "continue", "out of regime", "not run")
DECIDED = ("holds", "fails")


RHO = 2.0


def spent(t: float, alpha: float = ALPHA) -> float:
    """Alpha spent by information fraction t (Kim-DeMets power family, RHO)."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction {t!r} must lie in (0, 1]")
    return alpha * t ** RHO


@cache
def boundaries(fractions: tuple[float, ...], alpha: float = ALPHA,
               spending: Callable[[float, float], float] = spent) -> tuple[float, ...]:
    """The nominal level of each look at these information fractions (increasing, the
    last at most 1), on the engine's p scale (a two-sided p: one-sided error alpha / 2).

    The z boundaries c_j spend the one-sided alpha/2 as `spending` does with that total:
    P(Z_i < c_i for every i <= j) = 1 - spending(t_j, alpha / 2) under no effect, look by
    look."""
    if list(fractions) != sorted(set(fractions)) or not 0 < fractions[0] <= fractions[-1] <= 1:
        raise ValueError(f"information fractions {fractions!r} must strictly increase "
                         "within (0, 1]")
    t = np.asarray(fractions, float)
    correlation = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    bounds: list[float] = []
    for j, fraction in enumerate(fractions):
        target = 1 - spending(fraction, alpha / 2)
        if j == 0:
            bounds.append(float(stats.norm.ppf(target)))
            continue
        # seeded: the normal CDF is quasi-Monte Carlo, and a boundary must not move per call
        law = stats.multivariate_normal(np.zeros(j + 1), correlation[:j + 1, :j + 1], seed=0)

        def gap(c: float, law=law, target=target) -> float:
            return float(law.cdf(np.array([*bounds, c]))) - target

        bounds.append(float(optimize.brentq(gap, 0.0, 12.0, xtol=1e-6)))
    return tuple(float(2 * stats.norm.sf(c)) for c in bounds)


@dataclass(frozen=True)
class Decision:
    """A claim at one look: `kind` one of DECISIONS, the look's nominal level, why."""

    kind: str
    level: float
    reason: str
    conditions: tuple[judge.Condition, ...] = ()


def tested(claim: dict[str, Any], values: Mapping[str, Estimate],
           level: float) -> list[judge.Condition]:
    """The claim's conditions at a look's nominal level, Holm-adjusted within the claim
    (the one call into the engine's tests: a change of convention there applies here)."""
    m = len(claim["holds"])
    conditions = [judge.test_condition(text, dict(values), claim.get("paper", {}), 1 - level / m)
                  for text in claim["holds"]]
    for condition, p in zip(conditions, inference.holm([c.test.p for c in conditions]),
                            strict=True):
        condition.p_holm = p
    return conditions


def verdict(conditions: Sequence[judge.Condition], level: float) -> str:
    """holds, fails or open, for conditions tested at `level`."""
    if all(c.p_holm <= level for c in conditions):
        return "holds"
    return "fails" if any(c.test.refuted for c in conditions) else "open"


def at_seeds(e: Estimate, n: int) -> Estimate:
    """The same estimate (value and noise) as n seeds would give it."""
    if e.kind == "exact" or not e.known:
        return e
    return replace(e, n=n, df=e.df_at(n))


def decide(claim: dict[str, Any], values: Mapping[str, Estimate], failed: Sequence[gates.Gate],
           fractions: tuple[float, ...], seeds_max: Mapping[str, int],
           missing: Sequence[str] = ()) -> Decision:
    """The claim at the look with information fractions `fractions` (its looks so far,
    this one last; 1: all its seeds); `seeds_max`: each value's seeds at the last look."""
    level = boundaries(fractions)[-1]
    if missing:
        return Decision("not run", level, "; ".join(missing))
    if failed:
        return Decision("out of regime", level, "; ".join(
            f"{g.name} ({g.cell}): {g.detail}" for g in failed))
    conditions = tested(claim, values, level)
    now = verdict(conditions, level)
    texts = "; ".join(f"{c.text}: Holm p {c.p_holm:.2g}" for c in conditions)
    if now != "open":
        return Decision(now, level, f"{texts} (level {level:.2g})", tuple(conditions))
    if fractions[-1] >= 1:
        return Decision("futile", level, f"undecided with all its seeds: {texts}",
                        tuple(conditions))
    last = boundaries((*fractions, 1.0))[-1]
    projected = {name: at_seeds(e, seeds_max.get(name, e.n)) for name, e in values.items()}
    if verdict(tested(claim, projected, last), last) == "open":
        return Decision("futile", level, "its maximum seeds would leave today's estimates "
                        f"undecided: {texts}", tuple(conditions))
    return Decision("continue", level, texts, tuple(conditions))
