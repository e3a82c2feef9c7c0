"""The claims' statistics on numbers worked by hand (initmem.analysis.inference)."""

import math

import numpy as np
import pytest
from scipy import stats

from initmem.analysis import inference
from initmem.analysis.inference import Estimate

# k = 3 sigma_w values x 2 seeds; seed 1 sits above seed 0 at every sigma_w.
TABLE = {0.1: [10.0, 12.0], 1.0: [6.0, 10.0], 2.5: [2.0, 4.0]}


def spread_of(table: dict, seeds=((0, 1), (0, 1), (0, 1))) -> Estimate:
    values = {s: np.array(v) for s, v in table.items()}
    return inference.spread(values, {s: np.array(k) for s, k in zip(table, seeds, strict=True)})


def test_a_paired_spread_takes_its_noise_from_the_seed_by_sigma_residual():
    """Residuals of 10 12 / 6 10 / 2 4 after removing sigma_w and seed means: +-1/3,
    +-2/3, +-1/3; their sum of squares 4/3 over (3 - 1)(2 - 1) = 2 df."""
    e = spread_of(TABLE)
    assert (e.value, e.kind, e.k, e.n, e.df, e.paired) == (8.0, "spread", 3, 2, 2, True)
    assert e.sigma == pytest.approx(math.sqrt(2 / 3))
    assert e.se == pytest.approx(math.sqrt(2 / 3) * math.sqrt(2 / 2))  # of mean_hi - mean_lo


def test_an_unpaired_spread_pools_the_within_sigma_variance():
    """Seeds differ between sigma_w values: sums of squares 2 + 8 + 2 over 3 df, sigma 2."""
    e = spread_of(TABLE, seeds=((0, 1), (2, 3), (0, 1)))
    assert (e.df, e.paired) == (3, False)
    assert e.sigma == pytest.approx(2.0)


def test_the_spread_interval_is_tukeys():
    e = spread_of(TABLE)
    q = stats.studentized_range.ppf(0.95, 3, 2)
    assert q == pytest.approx(8.33, abs=0.01)  # the printed table's q(0.95; 3, 2)
    half = q * math.sqrt(2 / 3) / math.sqrt(2)
    assert e.interval() == pytest.approx((8.0 - half, 8.0 + half))


def test_a_lower_end_below_zero_is_clipped_for_a_spread():
    e = Estimate(1.0, "spread", sigma=2.0, n=2, df=2, k=3)
    assert e.interval()[0] == 0.0


def test_one_seed_has_no_noise_estimate_and_no_interval():
    e = inference.mean(np.array([70.0]))
    assert not e.known
    assert e.interval() == (-math.inf, math.inf)
    assert math.isnan(inference.test_greater(e, 0, 0).p)


def test_welch_combination_of_two_means():
    """mean(1, 2, 3) - mean(2, 4): se^2 = 1/3 + 1, Welch df = (4/3)^2 / ((1/3)^2/2 + 1)."""
    d = inference.combine([(1.0, inference.mean(np.array([1.0, 2, 3]))),
                           (-1.0, inference.mean(np.array([2.0, 4])))])
    assert d.value == pytest.approx(-1.0)
    assert d.se == pytest.approx(math.sqrt(4 / 3))
    assert d.df == pytest.approx((4 / 3) ** 2 / ((1 / 3) ** 2 / 2 + 1))


def test_a_spread_enters_a_difference_with_its_extremes_standard_error():
    s = Estimate(10.0, "spread", sigma=2.0, n=4, df=12, k=5, paired=True)
    d = inference.combine([(1.0, s), (-1.0, inference.exact(3.0))])
    assert d.se == pytest.approx(2.0 * math.sqrt(2 / 4))
    assert d.df == pytest.approx(12)


def test_greater_uses_the_one_sided_t_p_and_refutes_below_half_the_effect():
    d = Estimate(2.0, "mean", sigma=2.0, n=4, df=3)  # se 1
    result = inference.test_greater(d, 0.0, refute_below=10.0)
    assert result.p == pytest.approx(stats.t.sf(2.0, 3))
    assert result.interval == pytest.approx((2.0 - stats.t.ppf(0.95, 3), math.inf))
    hi = 2.0 + stats.t.ppf(0.95, 3)  # the one-sided upper bound at the level given
    assert result.limit == pytest.approx(hi)
    assert result.refuted == (hi < 10.0)
    assert inference.test_greater(d, 0.0, refute_below=12.0).refuted


def test_a_spread_above_zero_is_the_studentized_range_test():
    e = spread_of(TABLE)
    p = inference.test_greater(e, 0.0, 0.0).p
    assert p == pytest.approx(stats.studentized_range.sf(8.0 * math.sqrt(2) / math.sqrt(2 / 3),
                                                         3, 2))
    assert (p < 0.05) == (e.interval()[0] > 0)


def test_an_upper_bound_holds_only_when_the_interval_lies_below_it():
    e = Estimate(2.0, "mean", sigma=1.0, n=16, df=15)  # se 0.25
    assert inference.test_less(e, 3.0).p < 0.05
    assert inference.test_less(e, 2.3).p > 0.05
    assert inference.test_less(e, 1.0).refuted  # the interval lies wholly above 1


def test_equivalence_is_schuirmanns_two_one_sided_tests():
    """0.2 +- se 0.25 within a margin of 1: p = max(t.sf(4.8, 15), t.sf(3.2, 15)), not
    doubled, and the interval shown is the 90% one."""
    e = Estimate(0.2, "mean", sigma=1.0, n=16, df=15)
    result = inference.test_equivalent(e, 1.0)
    assert result.p == pytest.approx(stats.t.sf(3.2, 15))
    assert result.interval == pytest.approx(e.interval(0.90))
    assert result.p < 0.05 and not result.refuted
    far = inference.test_equivalent(Estimate(3.0, "mean", sigma=1.0, n=16, df=15), 1.0)
    assert far.refuted and far.p > 0.05


def test_holm_steps_down():
    """0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the running 0.06."""
    assert inference.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    adjusted = inference.holm([0.01, math.nan])
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1])


def test_seeds_needed_grow_as_the_noise_grows():
    def plan(sigma: float) -> int | None:
        template = Estimate(0.0, "spread", sigma=sigma, n=3, df=8, k=5, paired=True)
        return inference.seeds_needed([inference.Plan(1.0, template, 10.0)], ">", 0.0, 0.95)

    assert plan(1.0) == 2
    assert plan(3.0) < plan(6.0) <= 200
    assert plan(100.0) is None
