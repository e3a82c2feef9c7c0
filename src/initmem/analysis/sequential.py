"""A claim judged in looks (a group-sequential design): at each look its conditions are
tested at that look's nominal level, and it holds, fails, is futile or continues.

Error control across looks: each claim's false-hold rate is held at one-sided ALPHA (5%,
the fixed design's one-sided tests), spent over its looks as the Lan-DeMets power
function alpha(t) = alpha t^RHO of the information fraction t says, RHO = 2: between
Pocock's shape (RHO 1: early looks as strict as the last) and O'Brien-Fleming's (about
RHO 3: nearly nothing spent early). O'Brien-Fleming's first two looks stopped almost no
claim of config/gpu_first.yaml at the paper's effects, which its 3-5 seeds there cannot
reach (docs/claims.md gives the designs' simulated costs and power). `boundaries` are the
exact group-sequential levels of a normal statistic (z at looks i < j correlated
sqrt(t_i / t_j)); the engine's statistics are t and Tukey's studentized range on 1-16
degrees of freedom at the first looks, whose looks are less tied together than normal
ones, so those levels would spend more than alpha (5.7-5.9% at 2-5 seeds). `levels`
calibrates them by simulation for the statistic a condition is tested with (a one-sample
t, or the studentized range of a k x n paired table) at the seeds each look has: the
first look's level is exact (alpha t_1^RHO), each later one is chosen among
CALIBRATION_DRAWS null studies so that the share crossing by look j is alpha t_j^RHO.
A claim takes the smallest of its conditions' levels at each look; the engine's tests
(initmem.analysis.claims.test_condition: t, Tukey's range, two one-sided tests, the
spread bootstrap) are called at that level, so the same spending serves every convention.

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


def _check(fractions: tuple[float, ...]) -> None:
    if list(fractions) != sorted(set(fractions)) or not 0 < fractions[0] <= fractions[-1] <= 1:
        raise ValueError(f"information fractions {fractions!r} must strictly increase "
                         "within (0, 1]")


@cache
def boundaries(fractions: tuple[float, ...], alpha: float = ALPHA,
               spending: Spending = spent) -> tuple[float, ...]:
    """The one-sided nominal level of each look at these information fractions
    (increasing, the last at most 1) for a normal statistic: the z boundaries c_j with
    P(Z_i < c_i for every i <= j) = 1 - spending(t_j, alpha) under no effect, look by
    look, as one-sided p levels. The engine's t and Tukey statistics take `levels`."""
    _check(fractions)
    t = np.asarray(fractions, float)
    correlation = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    bounds: list[float] = []
    for j, fraction in enumerate(fractions):
        target = 1 - spending(fraction, alpha)
        if j == 0:
            bounds.append(float(scipy.stats.norm.ppf(target)))
            continue
        # seeded: the normal CDF is quasi-Monte Carlo, and a boundary must not move per call
        law = scipy.stats.multivariate_normal(np.zeros(j + 1), correlation[:j + 1, :j + 1], seed=0)

        def gap(c: float, law=law, target=target) -> float:
            return float(law.cdf(np.array([*bounds, c]))) - target

        bounds.append(float(scipy.optimize.brentq(gap, 0.0, 12.0, xtol=1e-6)))
    return tuple(float(scipy.stats.norm.sf(c)) for c in bounds)


# Null studies that calibrate a statistic's levels. Each look's cumulative target is
# lowered by CALIBRATION_MARGIN Monte Carlo standard errors of its count (0.1 pp at 5%), so
# that levels chosen on one sample of studies still hold alpha on fresh ones.
CALIBRATION_DRAWS = 200_000
CALIBRATION_MARGIN = 2.0
_CHUNK = 20_000
STATISTICS = ("t", "Tukey")


def _null_statistics(statistic: str, seeds: tuple[int, ...], k: int,
                     rng: np.random.Generator, draws: int) -> np.ndarray:
    """draws x looks: a one-sample t (mean over its standard error), or the studentized
    range of a k x n paired table's sigma_w means (range sqrt(n) / residual sd), on each
    look's first seeds[j] seeds, under no effect; -inf where a look has under 2 seeds."""
    most = max(seeds)
    shape = (draws, most) if statistic == "t" else (draws, k, most)
    x = rng.standard_normal(shape)
    out = np.full((draws, len(seeds)), -np.inf)
    if statistic == "t":
        sums, squares = np.cumsum(x, -1), np.cumsum(x ** 2, -1)
        for j, n in enumerate(seeds):
            if n >= 2:
                mean = sums[:, n - 1] / n
                sd = np.sqrt((squares[:, n - 1] - n * mean ** 2) / (n - 1))
                out[:, j] = mean * math.sqrt(n) / sd
        return out
    rows = np.cumsum(x, -1)  # per sigma_w, over seeds
    squares = np.cumsum((x ** 2).sum(1), -1)
    columns = np.cumsum(x.sum(1) ** 2, -1)  # per seed, its total over sigma_w, squared
    for j, n in enumerate(seeds):
        if n >= 2:
            means = rows[:, :, n - 1] / n
            grand = means.mean(1)
            residual = (squares[:, n - 1] - n * (means ** 2).sum(1) - columns[:, n - 1] / k
                        + k * n * grand ** 2)
            sd = np.sqrt(residual / ((k - 1) * (n - 1)))
            out[:, j] = np.ptp(means, axis=1) * math.sqrt(n) / sd
    return out


def _sf(statistic: str, c: float, n: int, k: int) -> float:
    """The one-sided p at which the statistic on n seeds sits at c (the engine's p)."""
    if not math.isfinite(c):
        return 0.0
    if statistic == "t":
        return float(scipy.stats.t.sf(c, n - 1))
    return float(scipy.stats.studentized_range.sf(c, k, (k - 1) * (n - 1)))


def _isf(statistic: str, level: float, n: int, k: int) -> float:
    if statistic == "t":
        return float(scipy.stats.t.isf(level, n - 1))
    return float(scipy.stats.studentized_range.ppf(1 - level, k, (k - 1) * (n - 1)))


@cache
def levels(fractions: tuple[float, ...], statistic: str, seeds: tuple[int, ...], k: int = 0,
           alpha: float = ALPHA, spending: Spending = spent,
           draws: int = CALIBRATION_DRAWS, seed: int = 0) -> tuple[float, ...]:
    """The one-sided nominal level of each look for `statistic` ("t": a one-sample t;
    "Tukey": the studentized range of k paired means) on seeds[j] seeds at look j, so
    that under no effect the share of studies crossing by look j is spending(t_j, alpha):
    look 1 exactly, the later looks on `draws` simulated null studies (less
    CALIBRATION_MARGIN standard errors)."""
    _check(fractions)
    if statistic not in STATISTICS or len(seeds) != len(fractions) or min(seeds) < 2:
        raise ValueError(f"levels of {statistic!r} on seeds {seeds!r}: the statistic must be "
                         f"one of {STATISTICS}, with 2 or more seeds at each of "
                         f"{len(fractions)} looks")
    first = spending(fractions[0], alpha)
    if len(fractions) == 1:
        return (first,)
    rng = np.random.default_rng(seed)
    null = np.concatenate([_null_statistics(statistic, seeds, k, rng, min(_CHUNK, draws - i))
                           for i in range(0, draws, _CHUNK)])
    bounds = [_isf(statistic, first, seeds[0], k)]
    alive = null[:, 0] < bounds[0]
    for j, fraction in enumerate(fractions[1:], 1):
        target = draws * spending(fraction, alpha)
        target -= CALIBRATION_MARGIN * math.sqrt(target * (1 - target / draws))
        need = math.floor(target) - int((~alive).sum())
        survivors = np.sort(null[alive, j])
        bound = survivors[-need] if 0 < need <= len(survivors) else math.inf
        bounds.append(float(bound))
        alive &= null[:, j] < bound
    return (first, *(_sf(statistic, c, n, k) for c, n in zip(bounds[1:], seeds[1:],
                                                              strict=True)))


def statistic_of(estimates: Sequence[Estimate]) -> tuple[str, int]:
    """The statistic whose levels a condition on these values takes: Tukey's range where
    it reads a spread (a spread alone, or spreads compared: the bootstrap's statistic is
    a range's too), t where it reads means only, none ("exact") without noise."""
    noisy = [e for e in estimates if e.kind != "exact"]
    if not noisy:
        return "exact", 0
    spreads = [e.k for e in noisy if e.kind == "spread"]
    return ("Tukey", max(spreads)) if spreads else ("t", 0)


def claim_levels(claim: dict[str, Any], values: Mapping[str, Estimate],
                 seeds: Mapping[str, Sequence[int]], fractions: tuple[float, ...],
                 spending: Spending = spent) -> tuple[float, ...]:
    """The claim's level at each look: the smallest of its conditions' `levels`, each for
    its statistic on the fewest seeds its noisy values have at each look (`seeds`: per
    value, its seeds at each look of `fractions`)."""
    each = []
    for text in claim["holds"]:
        names = [n for n in judge.condition_names(text) if values[n].kind != "exact"]
        statistic, k = statistic_of([values[n] for n in names])
        if statistic == "exact":  # no noise: the level decides nothing
            continue
        fewest = tuple(min(seeds[n][j] for n in names) for j in range(len(fractions)))
        if min(fewest) < 2:  # a look without a noise estimate: it cannot hold there
            fewest = tuple(max(n, 2) for n in fewest)
        each.append(levels(fractions, statistic, fewest, k, spending=spending))
    return (tuple(map(min, zip(*each, strict=True))) if each
            else boundaries(fractions, spending=spending))


@dataclass(frozen=True)
class Decision:
    """A claim at one look: `kind` one of plan.looks.DECISIONS, the look's nominal level, why."""

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
           missing: Sequence[str] = (), spending: Spending = spent,
           seeds: Mapping[str, Sequence[int]] | None = None) -> Decision:
    """The claim at the look with information fractions `fractions` (its looks so far,
    this one last; 1: all its seeds); `seeds_max`: each value's seeds at the last look;
    `seeds`: each value's seeds at each look of `fractions` (needed from the second look
    on; at a first look, today's); `spending`: the alpha-spending function (the
    design's, or one compared with it)."""
    if missing or failed:
        level = boundaries(fractions, spending=spending)[-1]
        kind = "not run" if missing else "out of regime"
        return Decision(kind, level, "; ".join(missing) if missing else "; ".join(
            f"{g.name} ({g.cell}): {g.detail}" for g in failed))
    if seeds is None:
        if len(fractions) > 1:
            raise ValueError(f"looks at {fractions!r} need each value's seeds at every look")
        seeds = {name: (e.n,) for name, e in values.items()}
    level = claim_levels(claim, values, seeds, fractions, spending)[-1]
    conditions = tested(claim, values, level)
    now = verdict(conditions, level)
    texts = "; ".join(f"{c.text}: Holm p {c.p_holm:.2g}" for c in conditions)
    if now != "open":
        return Decision(now, level, f"{texts} (level {level:.2g})", tuple(conditions))
    if fractions[-1] >= 1:
        return Decision("futile", level, f"undecided with all its seeds: {texts}",
                        tuple(conditions))
    to_come = {name: (*seeds[name], seeds_max.get(name, seeds[name][-1])) for name in values}
    last = claim_levels(claim, values, to_come, (*fractions, 1.0), spending)[-1]
    if fractions[-1] >= FUTILITY_FROM and not reachable(claim, conditions, values, seeds_max,
                                                         last):
        return Decision("futile", level, "its maximum seeds would hold or fail it with "
                        f"predictive power under {FUTILITY_POWER:.0%} from today's data: "
                        f"{texts}", tuple(conditions))
    return Decision("continue", level, texts, tuple(conditions))
