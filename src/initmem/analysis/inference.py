"""The statistics behind the claims' verdicts (initmem.analysis.claims).

An Estimate is one value of a claim with what its seed noise says about it: a spread over
sigma_w, a seed mean, a paired difference, or an exact count. Seed noise is estimated
within the estimate's own configuration, never pooled across regimes:

- A spread (max - min over sigma_w of seed means) with every seed run at every sigma_w is
  a repeated-measures design: the same seed shares its initial draws and data order across
  sigma_w, so the seed's own level cancels and the noise is the seed x sigma_w residual,
  with (k - 1)(n - 1) degrees of freedom. Otherwise the within-sigma_w variance is pooled
  over the k cells, with sum(n_i - 1) degrees of freedom.
- Its 95% interval is Tukey's: every pairwise difference of sigma_w means lies within
  q(0.95; k, df) sigma / sqrt(n) of its truth simultaneously, so the true spread (the
  largest true difference) lies within the same distance of the observed one.
- Differences of estimates from separate configurations are Welch t intervals (degrees of
  freedom by Welch-Satterthwaite); a spread enters one with the standard error of its two
  extreme means' difference.

Each condition of a claim gives a p-value for "holds" by the conventions a referee knows:
a one-sided test has its one-sided p (holds at 5% when its one-sided 95% bound lies past
the threshold), an equivalence is Schuirmann's two one-sided tests (p the larger of the
two, holds at 5% when the 90% interval lies inside the margin). A spread's bound stays
Tukey's simultaneous 95% one (a range test, exact at no effect, conservative otherwise).
Holm's step-down corrects the p-values within a claim. Power is simulated from the
estimates' own model with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import scipy

from initmem.analysis.metrics import mem

ALPHA = 0.05
POWER = 0.80
# Seed counts tried when planning, and the simulated studies per count; a count suffices
# when its simulated power clears POWER by three Monte Carlo standard errors.
SEED_STEPS = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200)
PLAN_DRAWS = 4000


@dataclass(frozen=True)
class Estimate:
    """A value (pp, %, decades) with its noise. `kind` is "spread", "mean" (a seed mean or
    paired difference) or "exact" (no seed noise: a count, a clock). `sigma` is the per-seed
    standard deviation, `n` the seeds behind each mean, `df` the degrees of freedom of
    `sigma` (0: one seed, no estimate), `k` the sigma_w values of a spread."""

    value: float
    kind: str = "exact"
    sigma: float = 0.0
    n: int = 1
    df: float = math.inf
    k: int = 0
    paired: bool = False
    by_sigma: tuple[float, ...] = ()

    @property
    def se(self) -> float:
        """Standard error of the value as a difference enters it (a spread: of its two
        extreme means' difference)."""
        return self.sigma * math.sqrt(means_in(self.kind) / self.n)

    @property
    def known(self) -> bool:
        """Whether its noise can be estimated (an exact value always)."""
        return self.kind == "exact" or (self.df > 0 and math.isfinite(self.sigma))

    def df_at(self, n: int) -> float:
        """Degrees of freedom of the same design with n seeds."""
        if self.kind == "spread":
            return (self.k - 1) * (n - 1) if self.paired else self.k * (n - 1)
        return n - 1 if self.kind == "mean" else math.inf

    def bound(self, level: float, side: str) -> float:
        """The one-sided `level` confidence bound on `side` ("lower" or "upper"): t for a
        mean or difference, Tukey's simultaneous bound for a spread."""
        if self.kind == "spread" or not self.known or self.kind == "exact":
            return self.interval(level)[0 if side == "lower" else 1]
        half = float(scipy.stats.t.ppf(level, self.df)) * self.se
        return self.value - half if side == "lower" else self.value + half

    def interval(self, level: float = 1 - ALPHA) -> tuple[float, float]:
        """The two-sided `level` confidence interval: Tukey's for a spread (never below 0), t for a
        mean; the whole line when its noise cannot be estimated."""
        if self.kind == "exact":
            return self.value, self.value
        if not self.known:
            return -math.inf, math.inf
        if self.kind == "spread":
            half = range_quantile(level, self.k, self.df) * self.sigma / math.sqrt(self.n)
            return max(0.0, self.value - half), self.value + half
        half = float(scipy.stats.t.ppf(0.5 + level / 2, self.df)) * self.se
        return self.value - half, self.value + half


def means_in(kind: str) -> int:
    """How many independent seed means a value of this kind adds up (its variance is that
    many times sigma^2 / n): a spread two (its extremes), a mean one, an exact value none."""
    return {"spread": 2, "mean": 1, "exact": 0}[kind]


@cache
def range_quantile(level: float, k: int, df: float) -> float:
    """Quantile of the studentized range of k means (df = inf: the known-sigma range)."""
    return float(scipy.stats.studentized_range.ppf(level, k, min(df, 1e6)))


# ------------------------------------------------------------------------- estimates

def spread(values: dict[float, np.ndarray], seeds: dict[float, np.ndarray]) -> Estimate:
    """max - min over sigma_w of seed means, `values[sigma]` the runs' values (pp) with
    their `seeds`; paired when every sigma_w has the same seeds."""
    sigmas = sorted(values)
    means = np.array([values[s].mean() for s in sigmas])
    sizes = [len(values[s]) for s in sigmas]
    first = sorted(seeds[sigmas[0]].tolist())
    paired = min(sizes) >= 2 and all(sorted(seeds[s].tolist()) == first for s in sigmas)
    if paired:
        table = np.array([values[s][np.argsort(seeds[s])] for s in sigmas])  # k x n
        residual = (table - table.mean(1, keepdims=True) - table.mean(0, keepdims=True)
                    + table.mean())
        df = (len(sigmas) - 1) * (table.shape[1] - 1)
        rows = (residual ** 2).sum(1) * len(sigmas) / df
    else:
        df = sum(n - 1 for n in sizes)
        rows = np.array([float(((values[s] - values[s].mean()) ** 2).sum()) for s in sigmas])
        rows = rows * len(sigmas) / df if df else np.full(len(sigmas), math.nan)
    sigma = math.sqrt(float(rows.mean()))
    return Estimate(mem(means), "spread", sigma, min(sizes), df,
                    len(sigmas), paired, tuple(float(math.sqrt(r)) for r in rows))


def mean(values: np.ndarray) -> Estimate:
    """A seed mean (or the mean of per-seed paired differences) with its t noise."""
    n = len(values)
    sigma = float(np.std(values, ddof=1)) if n >= 2 else math.nan
    return Estimate(float(np.mean(values)), "mean", sigma, n, n - 1)


def exact(value: float) -> Estimate:
    """A value without seed noise (a count, a clock)."""
    return Estimate(float(value))


def combine(terms: Sequence[tuple[float, Estimate]]) -> Estimate:
    """sum c_i E_i: a single term keeps its kind (a spread keeps Tukey's interval); a
    combination is a Welch t estimate."""
    if len(terms) == 1 and terms[0][0] == 1.0:
        return terms[0][1]
    value = sum(c * e.value for c, e in terms)
    noisy = [(c, e) for c, e in terms if e.kind != "exact"]
    if not noisy:
        return exact(value)
    if not all(e.known for _, e in noisy):
        return Estimate(value, "mean", math.nan, 1, 0)
    variance = sum((c * e.se) ** 2 for c, e in noisy)
    denominator = sum((c * e.se) ** 4 / e.df for c, e in noisy if e.se > 0)
    df = variance ** 2 / denominator if denominator > 0 else math.inf
    return Estimate(value, "mean", math.sqrt(variance), 1, df)


# ------------------------------------------------------------------------ conditions

@dataclass(frozen=True)
class Test:
    """One condition's test: its p for holds (nan: no noise estimate); the bounds at 1 -
    ALPHA that decision reads (`interval`: one-sided bounds leave the other end infinite,
    an equivalence shows its 1 - 2 ALPHA interval); and whether the claimed effect is
    ruled out (`refuted`) by the bound at the refutation level (`limit`). `method` names
    how the bounds are read: "t", "Tukey" (a spread) or "bootstrap" (spreads compared)."""

    p: float
    refuted: bool
    interval: tuple[float, float]
    limit: float = math.nan
    method: str = "t"


def test_greater(d: Estimate, threshold: float, refute_below: float,
                 level: float = 1 - ALPHA) -> Test:
    """H1: the value exceeds `threshold` (one-sided p); refuted when the one-sided `level`
    upper bound lies below `refute_below` (half the paper's effect, or the threshold)."""
    limit = d.bound(level, "upper")
    shown = (d.bound(1 - ALPHA, "lower"), math.inf)
    return Test(_one_sided_p(d, d.value - threshold), limit < refute_below, shown, limit,
                _method(d))


def test_less(d: Estimate, threshold: float, level: float = 1 - ALPHA) -> Test:
    """H1: the value lies below `threshold` (an upper bound, not non-rejection); refuted
    when the one-sided `level` lower bound lies above it."""
    limit = d.bound(level, "lower")
    shown = (-math.inf, d.bound(1 - ALPHA, "upper"))
    return Test(_one_sided_p(d, threshold - d.value), limit > threshold, shown, limit,
                _method(d))


def _method(d: Estimate) -> str:
    return "Tukey" if d.kind == "spread" else "t"


def _one_sided_p(d: Estimate, excess: float) -> float:
    """The one-sided p of "the value is past its bound by `excess` > 0": exact values by
    their sign, a spread by the studentized range (Tukey), anything else by t."""
    if not d.known:
        return math.nan
    if d.kind == "exact":
        return 0.0 if excess >= 0 else 1.0
    if d.sigma == 0:
        return 0.0 if excess > 0 else 1.0
    if d.kind == "spread":
        return float(scipy.stats.studentized_range.sf(max(excess, 0.0) * math.sqrt(d.n) / d.sigma,
                                                d.k, min(d.df, 1e6)))
    return float(scipy.stats.t.sf(excess / d.se, d.df))


def test_equivalent(d: Estimate, margin: float, level: float = 1 - ALPHA) -> Test:
    """Schuirmann's two one-sided tests: H1 |value| < margin, p the larger one-sided p,
    shown with the 1 - 2 ALPHA interval (a spread, never negative: value < margin);
    refuted when a one-sided `level` bound lies wholly outside the margin."""
    if d.kind == "spread":
        return test_less(d, margin, level)
    lo, hi = d.bound(level, "lower"), d.bound(level, "upper")
    refuted = lo > margin or hi < -margin
    shown = d.interval(1 - 2 * ALPHA)
    if not d.known:
        return Test(math.nan, False, shown, math.nan)
    p = max(_one_sided_p(d, d.value + margin), _one_sided_p(d, margin - d.value))
    return Test(p, refuted, shown, lo if lo > margin else hi)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (nan stays nan and counts as a test)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (math.isnan(pvalues[i]), pvalues[i]))
    adjusted, running = [math.nan] * m, 0.0
    for rank, i in enumerate(order):
        if math.isnan(pvalues[i]):
            break
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------- power

@dataclass(frozen=True)
class Plan:
    """What to simulate for one term: its true value under the paper, its seed noise."""

    coefficient: float
    template: Estimate
    truth: float


def simulate(term: Plan, n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of (value, sigma_hat) of one term at n seeds, as the engine would compute
    them: a spread's k means with the paper's spread between the extremes."""
    e, df = term.template, term.template.df_at(n)
    sigma_hat = (e.sigma * np.sqrt(rng.chisquare(df, draws) / df) if e.kind != "exact"
                 else np.zeros(draws))
    if e.kind == "spread":
        truth = np.full(e.k, term.truth / 2)
        truth[0], truth[-1] = 0.0, term.truth
        means = truth + e.sigma / math.sqrt(n) * rng.standard_normal((draws, e.k))
        return np.stack([means.max(1) - means.min(1), sigma_hat])
    if e.kind == "mean":
        return np.stack([term.truth + e.sigma / math.sqrt(n) * rng.standard_normal(draws),
                         sigma_hat])
    return np.stack([np.full(draws, term.truth), sigma_hat])


def holds_rate(terms: Sequence[Plan], op: str, bound: float, n: int, level: float,
               draws: int, rng: np.random.Generator) -> float:
    """Fraction of simulated studies with n seeds per mean in which the condition holds at
    `level` (the same decision rule as test_greater / test_less / test_equivalent: the
    one-sided `level` bounds past the threshold, both inside an equivalence margin)."""
    drawn = [simulate(t, n, draws, rng) for t in terms]
    if len(terms) == 1 and terms[0].template.kind == "spread" and terms[0].coefficient == 1:
        value, sigma_hat = drawn[0]
        half = range_quantile(level, terms[0].template.k, terms[0].template.df_at(n)) \
            * sigma_hat / math.sqrt(n)
        lo, hi = np.maximum(0, value - half), value + half
    else:
        value = sum(t.coefficient * d[0] for t, d in zip(terms, drawn, strict=True))
        variances = [(t.coefficient * d[1]) ** 2 * means_in(t.template.kind) / n
                     for t, d in zip(terms, drawn, strict=True) if t.template.kind != "exact"]
        se = np.sqrt(sum(variances)) if variances else np.zeros(draws)
        dfs = [t.template.df_at(n) for t in terms if t.template.kind != "exact"]
        df = _welch_df(terms, n) if len(dfs) > 1 else (dfs[0] if dfs else math.inf)
        half = float(scipy.stats.t.ppf(level, df)) * se  # one-sided bounds, as the tests read
        lo, hi = value - half, value + half
    if op == ">":
        return float(np.mean(lo > bound))
    if op == "<":
        return float(np.mean(hi < bound))
    return float(np.mean((lo > -bound) & (hi < bound)))


def _welch_df(terms: Sequence[Plan], n: int) -> float:
    parts = [((t.coefficient * t.template.sigma) ** 2 * means_in(t.template.kind) / n,
              t.template.df_at(n)) for t in terms if t.template.kind != "exact"]
    total = sum(v for v, _ in parts)
    return total ** 2 / sum(v ** 2 / df for v, df in parts)


def seeds_needed(terms: Sequence[Plan], op: str, bound: float, level: float,
                 seed: int = 0, rate: Callable[..., float] = holds_rate) -> int | None:
    """The fewest seeds per mean (of SEED_STEPS) at which the condition holds in at least
    POWER of simulated studies (by `rate`, the decision rule's holds_rate), or None when
    200 seeds do not suffice."""
    rng = np.random.default_rng(seed)
    margin = 3 * math.sqrt(POWER * (1 - POWER) / PLAN_DRAWS)
    for n in SEED_STEPS:
        if rate(terms, op, bound, n, level, PLAN_DRAWS, rng) >= POWER + margin:
            return n
    return None


def upper_sigma(sigma: float, df: float, confidence: float = 0.8) -> float:
    """The one-sided upper confidence limit of a standard deviation estimated with df
    degrees of freedom (chi-square): what sample sizes are planned with."""
    if not math.isfinite(df):
        return sigma
    return sigma * math.sqrt(df / float(scipy.stats.chi2.ppf(1 - confidence, df)))
