"""Comparisons of spreads that account for the bias of max - min (a condition such as
`spread_sgd >> spread_adam` or `a - b >> c - d`; initmem.analysis.claims routes every
condition over two or more spreads here).

A spread is the largest minus the smallest of k noisy seed means, so it is biased upward:
by d_k sigma / sqrt(n) when the true means are equal (2.33 for k = 5), by less the further
apart they are. A Welch test of one spread against another therefore favours the noisier
cell, and more so with fewer seeds. Here the studentized statistic
T = (sum c_i S_i - theta) / se is referred to its parametric bootstrap distribution under
the null sum c_i R_i = theta (R_i the true spreads): each cell's k seed means are drawn
around true means R_i apart, with its seed noise, and its noise estimate from its
chi-square. The null is least favourable: the spreads the test asks to be larger (c_i > 0
for "greater") have their true means split between the two ends (the most bias at a given
R), the others one at each end and the rest midway (the least); and since the R are not
known, the p-value is the largest over a family of them on the boundary, from the one
nearest no spread at all (where the bias is largest) to the projection of the observed
spreads (NULL_STEPS). Nor is the seed noise known: on 2-5 seeds its estimate is often far
below the truth, and a favoured cell whose noise is underestimated has more bias than the
draws allow (its false holds reached 7-12% at 4:1 noise, 2-3 seeds against 5, or noise
that varies over sigma_w). So the maximum is also taken over a family of true noises
(`noise_family`): as estimated, and at the least favourable end of each cell's one-sided
NOISE_CONFIDENCE chi-square limits (the favoured cells' noise up, pooled or as estimated at
each sigma_w apart; the others' down). Bounds invert the same test (bisection on theta,
the same draws).

The same bias moves a spread between seed counts: `at_seeds` projects one to more seeds
(a staged study's futility look) through the bias every configuration has at least (the
least biased shape), removed at today's seeds and restored at the projected ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy

from initmem.analysis.inference import ALPHA, Estimate, Plan, Test, simulate

DRAWS = 2000
NULL_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0)
BOUND_STEPS = 12
NOISE_CONFIDENCE = 0.9
Terms = Sequence[tuple[float, Estimate]]


def applies(terms: Terms) -> bool:
    """Whether a condition compares spreads: two or more, and nothing else with noise;
    each with a noise estimate (a single-seed cell leaves the test without a p)."""
    noisy = [e for _, e in terms if e.kind != "exact"]
    return len(noisy) >= 2 and all(e.kind == "spread" and e.known for e in noisy)


def _se(c: np.ndarray, sigma: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Standard error of sum c_i S_i, each spread as its two extreme means' difference."""
    return np.sqrt((c ** 2 * 2 * sigma ** 2 / n).sum(-1))


def null_family(c: np.ndarray, spreads: np.ndarray, weights: np.ndarray,
                theta: float) -> list[np.ndarray]:
    """True spreads R >= 0 on the boundary c . R = theta: from the one nearest zero to
    the weighted projection of the observed spreads, NULL_STEPS apart."""
    positive = np.maximum(np.sign(theta) * c, 0)
    low = (abs(theta) * positive / (positive ** 2).sum() if theta and positive.any()
           else np.zeros_like(c))
    projected = spreads - weights * c * (c @ spreads - theta) / (weights * c ** 2).sum()
    high = np.maximum(projected, 0)
    return [low + s * (high - low) for s in NULL_STEPS]


def shape(k: int, extreme: bool) -> np.ndarray:
    """k true means on [0, 1]: split between the ends (extreme: max - min most biased, by
    E max of each half), else one at each end and the rest midway (least biased)."""
    if extreme:
        return (np.arange(k) >= k // 2).astype(float)
    return np.r_[0.0, np.full(k - 2, 0.5), 1.0]


RANGE_GRID = 0.01  # integration step of expected(), in units of a mean's noise


def expected(spread: float, noise: float, k: int) -> float:
    """E[max - min] of k means whose truths lie in the least biased shape `spread` apart,
    each with noise sd `noise`: the integral over x of P(min <= x < max)."""
    if noise <= 0:
        return spread
    truths = spread / noise * shape(k, extreme=False)
    x = np.arange(-8.0, truths[-1] + 8.0, RANGE_GRID)[:, None]
    below = scipy.stats.norm.cdf(x - truths)
    inside = 1 - below.prod(1) - (1 - below).prod(1)
    return noise * float(np.sum((inside[1:] + inside[:-1]) / 2) * RANGE_GRID)


def unbiased(value: float, noise: float, k: int) -> float:
    """The true spread whose expected observed spread is `value` (0 when no true spread
    expects as little: the bias at no spread is d_k noise)."""
    if noise <= 0:
        return value
    if value <= expected(0.0, noise, k):
        return 0.0
    return float(scipy.optimize.brentq(lambda r: expected(r, noise, k) - value, 0.0, value,
                                 xtol=1e-4 * noise))


def at_seeds(e: Estimate, n: int) -> float:
    """The spread n seeds would show on average if the truth were the one `e`'s spread
    implies at its own seeds."""
    truth = unbiased(e.value, e.sigma / math.sqrt(e.n), e.k)
    return expected(truth, e.sigma / math.sqrt(n), e.k)


@dataclass(frozen=True)
class Noise:
    """A true seed noise the null draws from: per spread term its sd at each sigma_w, and
    its pooled sd over the estimate's (what the drawn studies' standard errors scale by)."""

    by_sigma: list[np.ndarray]
    pooled: np.ndarray


class Bootstrap:
    """The null draws of one comparison, fixed once so that p and its inversion agree:
    standard normal means noise and chi-square noise estimates per spread term."""

    def __init__(self, terms: Terms, draws: int = DRAWS, seed: int = 0) -> None:
        """Draw the null noise of the spread terms of `terms` once: `draws` studies from `seed`."""
        rng = np.random.default_rng(seed)
        self.spreads = [(c, e) for c, e in terms if e.kind == "spread"]
        self.offset = sum(c * e.value for c, e in terms if e.kind == "exact")
        self.c = np.array([c for c, _ in self.spreads])
        self.sigma = np.array([e.sigma for _, e in self.spreads])
        self.n = np.array([e.n for _, e in self.spreads], float)
        self.observed = np.array([e.value for _, e in self.spreads])
        self.z = [rng.standard_normal((draws, e.k)) for _, e in self.spreads]
        self.chi = np.stack([rng.chisquare(e.df, draws) / e.df if math.isfinite(e.df)
                             else np.ones(draws) for _, e in self.spreads], -1)  # known
        self.value = float(self.c @ self.observed) + self.offset
        self.se = float(_se(self.c, self.sigma, self.n))
        self.noises: dict[str, list[Noise]] = {}  # by side, as noise_family draws them

    def _statistic(self, ranges: np.ndarray, side: str, noise: Noise) -> np.ndarray:
        """T* at true spreads `ranges`, each in its least favourable shape for `side`, and
        true seed noise `noise`."""
        drawn = []
        for (c, e), z, r, sd in zip(self.spreads, self.z, ranges, noise.by_sigma, strict=True):
            means = r * shape(e.k, (c > 0) == (side == "greater")) + sd / math.sqrt(e.n) * z
            drawn.append(np.ptp(means, axis=1))
        se = _se(self.c, noise.pooled * self.sigma * np.sqrt(self.chi), self.n)
        return (np.stack(drawn, -1) @ self.c - self.c @ ranges) / se

    def noise_family(self, side: str) -> list[Noise]:
        """True seed noise: as estimated; the least favourable within its confidence limits
        (NOISE_CONFIDENCE, one-sided, chi-square), the cells the test wants larger at their
        upper limit (more bias), the others at their lower one; and the favoured cells'
        noise as estimated at each sigma_w apart (noise that varies over sigma_w biases
        max - min more than its pooled value says). On 2-5 seeds the estimate is not the
        truth, and the bias of max - min grows with the noise."""
        if side in self.noises:
            return self.noises[side]
        df = np.array([e.df for _, e in self.spreads], float)
        favoured = (self.c > 0) == (side == "greater")
        upper = np.sqrt(df / scipy.stats.chi2.ppf(1 - NOISE_CONFIDENCE, df))
        lower = np.sqrt(df / scipy.stats.chi2.ppf(NOISE_CONFIDENCE, df))
        limits = np.where(favoured, upper, lower)
        pooled = [np.full(e.k, e.sigma) for _, e in self.spreads]
        rows = [np.array(e.by_sigma) if f and e.by_sigma else p
                for f, (_, e), p in zip(favoured, self.spreads, pooled, strict=True)]
        self.noises[side] = [
            Noise(pooled, np.ones(len(df))),
            Noise([f * p for f, p in zip(limits, pooled, strict=True)], limits),
            Noise([f * r for f, r in zip(limits, rows, strict=True)], limits)]
        return self.noises[side]

    def _null(self, theta: float, side: str) -> list[np.ndarray]:
        """T* under each member of the null family of sum c_i R_i + offset = theta, at
        each member of the noise family."""
        family = null_family(self.c, self.observed, 2 * self.sigma ** 2 / self.n,
                             theta - self.offset)
        return [self._statistic(ranges, side, noise) for ranges in family
                for noise in self.noise_family(side)]

    def critical(self, theta: float, level: float, side: str) -> float:
        """The least favourable critical value of T: "greater" holds above it, "less"
        below it."""
        if side == "greater":
            return max(float(np.quantile(t, level)) for t in self._null(theta, side))
        return min(float(np.quantile(t, 1 - level)) for t in self._null(theta, side))

    def p(self, theta: float, side: str) -> float:
        """p of H1: sum c_i R_i > theta ("greater") or < theta ("less"), the largest over
        the null family."""
        if self.se == 0:
            return float((self.value > theta) if side == "greater" else (self.value < theta))
        observed = (self.value - theta) / self.se
        return float(max(np.mean(t >= observed) if side == "greater" else
                         np.mean(t <= observed) for t in self._null(theta, side)))

    def bound(self, level: float, side: str) -> float:
        """The `side` ("lower"/"upper") confidence bound: the theta at which T sits at the
        one-sided test's critical value, theta = value - se q(theta) (a fixed point; q
        moves little with theta, so a few steps reach 1e-3 of the se)."""
        test = "greater" if side == "lower" else "less"
        theta = self.value
        for _ in range(BOUND_STEPS):
            step = self.value - self.se * self.critical(theta, level, test) - theta
            theta += step
            if abs(step) < 1e-3 * self.se:
                break
        return theta


def test_greater(terms: Terms, threshold: float, refute_below: float,
                 level: float = 1 - ALPHA) -> Test:
    """As inference.test_greater, by the bootstrap."""
    boot = Bootstrap(terms)
    limit = boot.bound(level, "upper")
    return Test(boot.p(threshold, "greater"), limit < refute_below,
                (boot.bound(1 - ALPHA, "lower"), math.inf), limit, "bootstrap")


def test_less(terms: Terms, threshold: float, level: float = 1 - ALPHA) -> Test:
    """As inference.test_less, by the bootstrap."""
    boot = Bootstrap(terms)
    limit = boot.bound(level, "lower")
    return Test(boot.p(threshold, "less"), limit > threshold,
                (-math.inf, boot.bound(1 - ALPHA, "upper")), limit, "bootstrap")


def test_equivalent(terms: Terms, margin: float, level: float = 1 - ALPHA) -> Test:
    """As inference.test_equivalent (two one-sided tests), by the bootstrap."""
    boot = Bootstrap(terms)
    lo, hi = boot.bound(level, "lower"), boot.bound(level, "upper")
    p = max(boot.p(-margin, "greater"), boot.p(margin, "less"))
    shown = (boot.bound(1 - ALPHA, "lower"), boot.bound(1 - ALPHA, "upper"))
    return Test(p, lo > margin or hi < -margin, shown, lo if lo > margin else hi, "bootstrap")


def holds_rate(terms: Sequence[Plan], op: str, bound: float, n: int, level: float,
               draws: int, rng: np.random.Generator) -> float:
    """inference.holds_rate for a comparison of spreads: simulated studies with n seeds
    whose T clears the bootstrap's critical value, taken once at the planned truth (the
    engine takes it at each study's own estimates)."""
    truths = [(t.coefficient, Estimate(t.truth, "spread", t.template.sigma, n,
                                       t.template.df_at(n), t.template.k, t.template.paired))
              for t in terms if t.template.kind == "spread"]
    offset = sum(t.coefficient * t.truth for t in terms if t.template.kind != "spread")
    boot = Bootstrap([*truths, (1.0, Estimate(offset))], draws=draws // 2)
    drawn = [simulate(t, n, draws, rng) for t in terms if t.template.kind == "spread"]
    value = sum(c * d[0] for (c, _), d in zip(truths, drawn, strict=True)) + offset
    se = _se(boot.c, np.stack([d[1] for d in drawn], -1), np.full(len(drawn), float(n)))
    if op == ">":
        return float(np.mean((value - bound) / se >= boot.critical(bound, level, "greater")))
    if op == "<":
        return float(np.mean((value - bound) / se <= boot.critical(bound, level, "less")))
    return float(np.mean(((value + bound) / se >= boot.critical(-bound, level, "greater"))
                         & ((value - bound) / se <= boot.critical(bound, level, "less"))))
