"""The size of our values against the paper's, apart from the verdict
(initmem.analysis.magnitude)."""

import pandas as pd

from initmem.analysis import magnitude
from initmem.analysis.inference import Estimate

SPREAD = Estimate(15.8, "spread", sigma=1.2, n=5, df=16, k=5, paired=True)  # 13.5-18.1
STATS = {"spread": "spread"}


def runs(**fields) -> pd.DataFrame:
    base = {"dataset": "cifar10", "train_subset": None, "width": 1.0, "optimizer": "sgd"}
    return pd.DataFrame([{**base, **fields, "sigma_w": s, "test_acc_best": a}
                         for s, a in [(0.1, 0.34), (2.5, 0.17)]])


def test_the_papers_value_is_placed_against_our_interval():
    lo, hi = SPREAD.interval()
    assert magnitude.compare((lo + hi) / 2, SPREAD) == "consistent"
    assert magnitude.compare(22.8, SPREAD) == "smaller"
    assert magnitude.compare(1.0, SPREAD) == "larger"


def test_at_another_scale_the_sizes_are_not_comparable_and_it_says_why():
    """No per-value word there: both sizes in pp, and as a share of the best test accuracy
    above chance (15.8 of 34 - 10 here, 22.8 of 88.1 - 10 in the paper)."""
    word, why = magnitude.statement({"spread": 22.8}, {"spread": SPREAD},
                                    runs(train_subset=256, width=0.125), ["optimizer"],
                                    [65.4, 88.1], lambda n: "the spread", str, STATS)
    assert word == "not comparable at this scale"
    assert why.startswith("256 training images of the paper's 40,000; width 0.125 of the "
                          "paper's: test accuracy 17-34% here, the paper's 65.4-88.1%.")
    assert ("the paper's 22.8 pp (66% of the best test accuracy above chance here, 29% in "
            "the paper)") in why
    assert "smaller" not in why and "larger" not in why


def test_at_the_papers_scale_the_word_is_the_values_own_in_its_unit():
    word, why = magnitude.statement({"spread": 22.8}, {"spread": SPREAD}, runs(), ["optimizer"],
                                    None, str, str, STATS)
    assert word == "smaller" and why.endswith("pp, the paper's 22.8 pp: smaller.")


def test_a_clock_the_recipe_sets_gets_no_size_word():
    clock = Estimate(1.13)
    word, why = magnitude.statement({"spread": 16.0, "clock": 1.77},
                                    {"spread": SPREAD, "clock": clock}, runs(), ["optimizer"],
                                    None, str, str, {**STATS, "clock": "max_clock"})
    assert word == "consistent"
    assert why.endswith("the paper's 1.77 (set by the recipe: no size word).")
