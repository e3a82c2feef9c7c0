"""The claims' t-based tests against statsmodels (a test-only reference, as Keras is for
the recipe) on the same arrays: Schuirmann's TOST, one-sided t, Welch, Holm."""

import gc

import numpy as np
import pytest

from initmem.analysis import inference

smw = pytest.importorskip("statsmodels.stats.weightstats")
multitest = pytest.importorskip("statsmodels.stats.multitest")

RNG = np.random.default_rng(36)
# The laptop study's b = 128 deltas have about this noise: 3 seeds, sd near 2.4 pp.
PAIRS = [RNG.normal(loc, sd, size=n) for loc, sd, n in
         [(15.0, 2.4, 3), (0.4, 1.0, 5), (-0.8, 2.0, 8), (2.0, 3.0, 15), (0.1, 0.5, 30)]]


@pytest.mark.parametrize("d", PAIRS)
@pytest.mark.parametrize("margin", [1.0, 2.5, 20.0])
def test_tost_is_statsmodels_ttost_paired(d, margin):
    """A paired difference (mean of per-seed differences) within +-margin: statsmodels
    tests the pair (x1, x2) = (d, 0)."""
    ours = inference.test_equivalent(inference.mean(d), margin)
    theirs, _, _ = smw.ttost_paired(d, np.zeros_like(d), -margin, margin)
    assert ours.p == pytest.approx(theirs, rel=1e-9)


@pytest.mark.parametrize("d", PAIRS)
def test_one_sided_tests_are_statsmodels_ttest_1samp(d):
    e = inference.mean(d)
    _, p_larger, _ = smw.DescrStatsW(d).ttest_mean(1.0, alternative="larger")
    _, p_smaller, _ = smw.DescrStatsW(d).ttest_mean(1.0, alternative="smaller")
    assert inference.test_greater(e, 1.0, 1.0).p == pytest.approx(p_larger, rel=1e-9)
    assert inference.test_less(e, 1.0).p == pytest.approx(p_smaller, rel=1e-9)
    low, _ = smw.DescrStatsW(d).tconfint_mean(alpha=0.10)  # its 90% two-sided = 95% one-sided
    assert inference.test_greater(e, 1.0, 1.0).interval[0] == pytest.approx(low, rel=1e-9)


@pytest.mark.parametrize(("a", "b"), [(PAIRS[0], PAIRS[1]), (PAIRS[2], PAIRS[3]),
                                      (PAIRS[4], PAIRS[2])])
def test_welch_is_statsmodels_ttest_ind_unequal(a, b):
    d = inference.combine([(1.0, inference.mean(a)), (-1.0, inference.mean(b))])
    _, p, df = smw.ttest_ind(a, b, alternative="larger", usevar="unequal")
    assert d.df == pytest.approx(df, rel=1e-9)
    assert inference.test_greater(d, 0.0, 0.0).p == pytest.approx(p, rel=1e-9)
    low, high = smw.CompareMeans(smw.DescrStatsW(a), smw.DescrStatsW(b)).tconfint_diff(
        usevar="unequal")
    assert d.interval() == pytest.approx((low, high), rel=1e-9)


def test_holm_is_statsmodels_multipletests(monkeypatch):
    # multipletests runs gc.collect() on every call (0.3 s with the suite's heap).
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(0)
    for m in rng.integers(1, 9, size=2000):
        p = rng.uniform(0, 0.2, size=m) ** rng.uniform(0.5, 2)
        _, theirs, _, _ = multitest.multipletests(p, method="holm")
        assert inference.holm(list(p)) == pytest.approx(list(theirs), rel=1e-12)
