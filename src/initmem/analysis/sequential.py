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
  futile          the last look, undecided; or earlier, from information FUTILITY_FROM
                  on, its predictive power is below FUTILITY_POWER: the seeds still to
                  come would hold or fail it less often than that, drawn from what today's
                  data say of the truth (today's estimate with its standard error; a
                  spread with the bias of its few seeds exchanged for that of the
                  maximum). Non-binding: the boundaries ignore it, so stopping early for
                  futility only lowers both error rates
  continue        otherwise: its cells get the next look's seeds
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np
import scipy

from initmem.analysis import claims as judge
from initmem.analysis import gates, inference, spread_gap
from initmem.analysis.inference import ALPHA, Estimate

DECISIONS = ("holds", "fails", "futile", "continue", "out of regime", "not run")
DECIDED = ("holds", "fails")


RHO = 2.0
Spending = Callable[[float, float], float]  # (information fraction, total alpha) -> spent
# A claim is futile before its last look when its maximum seeds would decide it (hold or
# fail) with less than this probability, the truth drawn from what today's data say of it
# (its predictive power), once this share of its information is in: a first look on a
# fifth of 25 seeds leaves a spread's standard error near 1 pp, and futility there cost
# adaptive_forget_b128 12 in 100 holds at the paper's effects (docs/claims.md compares
# the rules' cost and power).
FUTILITY_POWER = 0.2
FUTILITY_FROM = 0.4


def spent(t: float, alpha: float = ALPHA) -> float:
    """Alpha spent by information fraction t (Kim-DeMets power family, RHO)."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction {t!r} must lie in (0, 1]")
    return alpha * t ** RHO


def obrien_fleming(t: float, alpha: float = ALPHA) -> float:
    """Lan-DeMets' O'Brien-Fleming-type spending: almost nothing before the last looks."""
    return float(2 * scipy.stats.norm.sf(scipy.stats.norm.isf(alpha / 2) / math.sqrt(t)))


# The spending functions the rule's (`spent`) was chosen between (docs/claims.md;
# bench/staged_design.py --spending compares them on the same simulated studies).
SPENDING: dict[str, Spending] = {
    "t2": spent, "obrien-fleming": obrien_fleming, "linear": lambda t, alpha=ALPHA: alpha * t}


@cache
def boundaries(fractions: tuple[float, ...], alpha: float = ALPHA,
               spending: Spending = spent) -> tuple[float, ...]:
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
            bounds.append(float(scipy.stats.norm.ppf(target)))
            continue
        # seeded: the normal CDF is quasi-Monte Carlo, and a boundary must not move per call
        law = scipy.stats.multivariate_normal(np.zeros(j + 1), correlation[:j + 1, :j + 1], seed=0)

        def gap(c: float, law=law, target=target) -> float:
            return float(law.cdf(np.array([*bounds, c]))) - target

        bounds.append(float(scipy.optimize.brentq(gap, 0.0, 12.0, xtol=1e-6)))
    return tuple(float(2 * scipy.stats.norm.sf(c)) for c in bounds)


@dataclass(frozen=True)
class Decision:
    """A claim at one look: `kind` one of DECISIONS, the look's nominal level, why."""

    kind: str
    level: float
    reason: str
    conditions: tuple[judge.Condition, ...] = ()


def tested(claim: dict[str, Any], values: Mapping[str, Estimate] | Sequence[Mapping[str, Estimate]],
           level: float) -> list[judge.Condition]:
    """The claim's conditions at a look's nominal level, Holm-adjusted within the claim
    (the one call into the engine's tests: a change of convention there applies here);
    `values` one mapping for every condition, or one per condition."""
    m = len(claim["holds"])
    each = [values] * m if isinstance(values, Mapping) else values
    conditions = [judge.test_condition(text, dict(v), claim.get("paper", {}), 1 - level / m)
                  for text, v in zip(claim["holds"], each, strict=True)]
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
    """The estimate n seeds would give on average if today's were the truth: the same
    noise, and a spread's value with its upward bias at today's seeds exchanged for the
    (smaller) one at n (initmem.analysis.spread_gap)."""
    if e.kind == "exact" or not e.known:
        return e
    value = spread_gap.at_seeds(e, n) if e.kind == "spread" else e.value
    return replace(e, value=value, n=n, df=e.df_at(n))


def still_to_move(e: Estimate, n: int) -> float:
    """The standard deviation of the value at n seeds around today's at e.n seeds, for a
    truth known only through today's data (the predictive distribution under a flat
    prior: today's standard error times sqrt((n - e.n) / n); a truth taken as known,
    today's estimate, would leave only the new seeds' share, sqrt(e.n / n) of that)."""
    if e.kind == "exact" or not e.known or n <= e.n:
        return 0.0
    return e.se * math.sqrt((n - e.n) / n)


def moved(condition: judge.Condition, values: Mapping[str, Estimate],
          sd: Mapping[str, float], z: float) -> dict[str, Estimate]:
    """`values` with the condition's statistic (sum c_i value_i; each term's `sd` still to
    move) moved z of its standard deviations toward holding (z < 0: toward failing; an
    equivalence's toward its middle, no further), each term in proportion to its share
    of the variance (a spread no lower than 0)."""
    variance = sum((c * sd[name]) ** 2 for c, name in condition.terms)
    step = z * math.sqrt(variance)
    if condition.op == "~":
        value = condition.estimate.value  # lhs - rhs: 0 is the middle of the margin
        delta = -math.copysign(1.0, value) * (min(abs(value), step) if step > 0 else step)
    else:
        delta = -step if condition.op == "<=" else step
    shifted = dict(values)
    for c, name in condition.terms if variance > 0 else ():
        e = shifted[name]
        value = e.value + delta * c * sd[name] ** 2 / variance
        shifted[name] = replace(e, value=max(value, 0.0) if e.kind == "spread" else value)
    return shifted


def reachable(claim: dict[str, Any], conditions: Sequence[judge.Condition],
              values: Mapping[str, Estimate], seeds_max: Mapping[str, int],
              level: float) -> bool:
    """Whether the claim would still hold or fail at its maximum seeds (tested at `level`)
    with predictive power FUTILITY_POWER or more: each condition's statistic at its
    (1 - FUTILITY_POWER) predictive quantile toward the verdict (normal, around today's
    estimates with a spread's bias moved to the maximum seeds). Each condition moves on
    its own, as if a claim's conditions were all that lucky at once: for holding, which
    needs every condition, that overstates the power, so futility stops fewer claims than
    the exact predictive power would."""
    at_max = {name: seeds_max.get(name, e.n) for name, e in values.items()}
    projected = {name: at_seeds(e, at_max[name]) for name, e in values.items()}
    sd = {name: still_to_move(e, at_max[name]) for name, e in values.items()}
    z = float(scipy.stats.norm.isf(FUTILITY_POWER))
    lucky = tested(claim, [moved(c, projected, sd, z) for c in conditions], level)
    if verdict(lucky, level) == "holds":
        return True
    unlucky = tested(claim, [moved(c, projected, sd, -z) for c in conditions], level)
    return any(c.test.refuted for c in unlucky)


def decide(claim: dict[str, Any], values: Mapping[str, Estimate], failed: Sequence[gates.Gate],
           fractions: tuple[float, ...], seeds_max: Mapping[str, int],
           missing: Sequence[str] = (),
           spending: Spending = spent) -> Decision:
    """The claim at the look with information fractions `fractions` (its looks so far,
    this one last; 1: all its seeds); `seeds_max`: each value's seeds at the last look;
    `spending`: the alpha-spending function (the design's, or one compared with it)."""
    level = boundaries(fractions, spending=spending)[-1]
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
    last = boundaries((*fractions, 1.0), spending=spending)[-1]
    if fractions[-1] >= FUTILITY_FROM and not reachable(claim, conditions, values, seeds_max,
                                                         last):
        return Decision("futile", level, "its maximum seeds would hold or fail it with "
                        f"predictive power under {FUTILITY_POWER:.0%} from today's data: "
                        f"{texts}", tuple(conditions))
    return Decision("continue", level, texts, tuple(conditions))
