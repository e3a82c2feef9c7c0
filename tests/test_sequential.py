"""The staged design's decision rule on small simulated looks: the spending boundaries,
each decision, and its error rates across looks (seconds; the thorough Monte Carlo is
bench/staged_design.py)."""

import math

import numpy as np
import pandas as pd
import pytest

from initmem.analysis import gates, inference, sequential, staged

NOMINAL = 0.05


def test_obrien_fleming_spending_reaches_alpha_only_at_the_end():
    assert sequential.spent(1.0) == pytest.approx(NOMINAL)
    assert sequential.spent(1 / 3) < 1e-3 < sequential.spent(2 / 3) < NOMINAL


def test_boundaries_are_the_published_group_sequential_ones():
    """Three equal looks, one-sided 2.5%: z = 3.71, 2.51, 1.99 (Jennison & Turnbull,
    Lan-DeMets O'Brien-Fleming); a single look is the fixed design's level."""
    z = [float(-inference.stats.norm.ppf(a / 2)) for a in sequential.boundaries((1 / 3, 2 / 3, 1))]
    assert z == pytest.approx([3.71, 2.51, 1.99], abs=0.01)
    assert sequential.boundaries((1.0,)) == pytest.approx((NOMINAL,))


@pytest.mark.parametrize("fractions", [(0.5, 0.5), (0.7, 0.4), (0.0, 1.0)])
def test_bad_fractions_are_refused_naming_them(fractions):
    with pytest.raises(ValueError, match="fraction"):
        sequential.boundaries(fractions)


def delta_claim(paper: float = 10.0) -> dict:
    return {"id": "remembers", "cells": {"sgd": {}},
            "values": {"delta": {"stat": "delta", "cell": "sgd"}},
            "holds": ["delta >> 0"], "paper": {"delta": paper}}


def mean(value: float, sd: float, n: int) -> inference.Estimate:
    return inference.Estimate(value, "mean", sd, n, n - 1)


def decide(value: float, sd: float, n: int, fractions=(1 / 3,), failed=()):
    return sequential.decide(delta_claim(), {"delta": mean(value, sd, n)}, list(failed),
                             fractions, {"delta": 15})


def test_a_large_effect_holds_at_the_first_look():
    assert decide(10.0, 1.0, 5).kind == "holds"


def test_an_effect_far_below_the_papers_fails_only_when_overwhelming():
    assert decide(0.0, 1.0, 5).kind == "continue"  # the first look's level is 0.0002
    assert decide(0.0, 0.3, 5).kind == "fails"


def test_a_claim_the_maximum_seeds_cannot_decide_is_futile_early():
    """delta 2.5 with seed noise 10 pp: at 15 seeds its interval would still cover both 0
    and half the paper's 10 pp."""
    assert decide(2.5, 10.0, 5).kind == "futile"
    assert decide(3.0, 2.0, 5).kind == "continue"


def test_undecided_at_the_last_look_is_futile():
    assert decide(3.0, 8.0, 15, fractions=(1 / 3, 2 / 3, 1.0)).kind == "futile"


def test_gates_come_first_and_a_claim_out_of_regime_buys_no_seeds():
    failed = [gates.Gate("trained", "sgd", False, "run 3 ends at 60%")]
    decision = decide(10.0, 1.0, 5, failed=failed)
    assert decision.kind == "out of regime" and "run 3 ends at 60%" in decision.reason


def test_a_value_not_run_says_so():
    decision = sequential.decide(delta_claim(), {}, [], (1 / 3,), {}, ["delta: not run"])
    assert decision.kind == "not run"


def cells(seeds: int) -> staged.ClaimCells:
    return staged.ClaimCells(delta_claim(), {"sgd": list(range(seeds))},
                             {"sgd": pd.DataFrame({"seed": [], "run_id": []})}, ["sgd"])


def rates(truth: float, draws: int, seed: int) -> pd.Series:
    rng = np.random.default_rng(seed)
    claim_cells = cells(15)
    kinds = [staged.run_claim(claim_cells, staged.draw_values(
        claim_cells.claim, {"delta": truth}, {"delta": 15}, rng))[0] for _ in range(draws)]
    return pd.Series(kinds).value_counts(normalize=True)


def test_without_an_effect_the_staged_claim_holds_at_most_nominally():
    """400 studies at delta 0 (3 looks of a 15-seed cell): a false hold in at most 5%
    (the one-sided rate is 2.5%; 5% is the fixed design's level)."""
    assert rates(0.0, 400, 0).get("holds", 0.0) <= NOMINAL


def test_at_the_papers_effect_the_staged_claim_holds_and_never_fails():
    found = rates(10.0, 200, 1)
    assert found.get("holds", 0.0) >= 0.95 and found.get("fails", 0.0) == 0.0


def test_a_cell_runs_its_seeds_in_thirds_but_never_fewer_than_three():
    assert [staged.seeds_at(15, j) for j in range(3)] == [5, 10, 15]
    assert [staged.seeds_at(25, j) for j in range(3)] == [9, 17, 25]
    assert [staged.seeds_at(3, j) for j in range(3)] == [3, 3, 3]
    assert cells(3).fractions(2) == (1.0,)
    assert cells(15).fractions(1) == pytest.approx((1 / 3, 2 / 3))
    assert math.isclose(cells(15).fractions(2)[-1], 1.0)
