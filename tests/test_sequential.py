"""The staged design's decision rule on small simulated looks: the spending boundaries,
each decision, and its error rates across looks (seconds; the thorough Monte Carlo is
bench/staged_design.py)."""

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from analysis_frames import runs_table
from fakes import write_fake_run
from scipy import stats
from workflow_helpers import job_counts, snakemake

from initmem.analysis import gates, inference, sequential, staged
from initmem.analysis.claims import read_claims
from initmem.cli import main
from initmem.plan import looks
from initmem.plan.grid import ConfigError, load_config, validate_config
from initmem.records import status

ROOT = Path(__file__).parents[1]

NOMINAL = 0.05


def test_the_power_spending_reaches_alpha_only_at_the_end():
    assert sequential.spent(1.0) == pytest.approx(NOMINAL)
    assert sequential.spent(0.5) == pytest.approx(NOMINAL / 4)  # RHO 2


@pytest.mark.parametrize("name", sorted(sequential.SPENDING))
def test_every_compared_spending_function_spends_alpha_by_the_last_look(name):
    spending = sequential.SPENDING[name]
    spent = [spending(t, NOMINAL) for t in (0.01, *looks.LOOKS)]
    assert spent == sorted(spent) and spent[0] < NOMINAL / 50
    assert spent[-1] == pytest.approx(NOMINAL)


def test_boundaries_are_the_published_group_sequential_ones():
    """Three equal looks, one-sided 2.5%, O'Brien-Fleming spending: z = 3.71, 2.51, 1.99
    (Jennison & Turnbull); a single look is the fixed design's one-sided level."""
    levels = sequential.boundaries((1 / 3, 2 / 3, 1), alpha=0.025,
                                   spending=sequential.obrien_fleming)
    z = [float(stats.norm.isf(a)) for a in levels]
    assert z == pytest.approx([3.71, 2.51, 1.99], abs=0.01)
    assert sequential.boundaries((1.0,)) == pytest.approx((NOMINAL,))


def test_the_boundaries_spend_alpha_as_the_spending_function_says():
    """200,000 Brownian paths under no effect cross the five looks' one-sided boundaries
    by look j as often as spent(t_j) says: 5% one-sided by the last."""
    fractions = np.array(looks.LOOKS)
    z = stats.norm.isf(np.array(sequential.boundaries(looks.LOOKS)))
    rng = np.random.default_rng(0)
    steps = rng.standard_normal((200_000, len(fractions))) * np.sqrt(np.diff(fractions, prepend=0))
    crossed = np.maximum.accumulate(np.cumsum(steps, 1) / np.sqrt(fractions) >= z, axis=1)
    expected = [sequential.spent(t) for t in fractions]
    assert crossed.mean(0) == pytest.approx(expected, abs=0.0015)


def crossed(statistic: str, seeds: tuple, k: int, levels: tuple, draws: int = 100_000) -> float:
    """The share of fresh null studies (not those that calibrated) whose statistic on each
    look's seeds reaches its level at some look."""
    null = sequential._null_statistics(statistic, seeds, k, np.random.default_rng(99), draws)
    bounds = [sequential._isf(statistic, a, n, k) for a, n in zip(levels, seeds, strict=True)]
    return float((null >= np.array(bounds)).any(1).mean())


# The staged study's fewest seeds (issue 50): a 5-seed configuration's looks at 2, 3, 4,
# 5 seeds (a spread's Tukey test), at 2, 2, 3, 4, 5 (the paired delta's t), a 3-seed one's
# at 2, 3.
FEW_SEEDS = [("Tukey", (0.4, 0.6, 0.8, 1.0), (2, 3, 4, 5), 5),
             ("t", (0.4, 0.6, 0.8, 1.0), (2, 3, 4, 5), 0),
             ("t", (2 / 3, 1.0), (2, 3), 0)]


@pytest.mark.parametrize(("statistic", "fractions", "seeds", "k"), FEW_SEEDS)
def test_calibrated_levels_hold_alpha_for_t_and_tukey_on_few_seeds(statistic, fractions,
                                                                     seeds, k):
    """Normal-theory levels spend more than 5% on t or Tukey statistics of 1-16 degrees of
    freedom; the calibrated ones at most 5% (within 3 Monte Carlo standard errors of
    100,000 fresh studies, 0.2 pp), and not much less."""
    se = math.sqrt(NOMINAL * (1 - NOMINAL) / 100_000)
    normal = crossed(statistic, seeds, k, sequential.boundaries(fractions))
    calibrated = crossed(statistic, seeds, k, sequential.levels(fractions, statistic, seeds, k))
    assert normal > NOMINAL + 3 * se
    assert NOMINAL - 0.005 <= calibrated <= NOMINAL + 3 * se


def test_a_first_look_spends_exactly_what_the_spending_function_says():
    assert sequential.levels((0.2,), "t", (3,)) == (sequential.spent(0.2),)
    assert sequential.levels((0.2, 1.0), "Tukey", (3, 15), 5)[0] == sequential.spent(0.2)


@pytest.mark.parametrize(("statistic", "seeds"), [("z", (2, 3)), ("t", (1, 3)), ("t", (3,))])
def test_levels_of_an_unknown_statistic_or_too_few_seeds_are_refused(statistic, seeds):
    with pytest.raises(ValueError, match=f"{statistic!r} on seeds"):
        sequential.levels((0.5, 1.0), statistic, seeds)


def test_a_claim_takes_its_strictest_conditions_levels():
    """A spread and a delta on 2, 3 seeds: each look's level is the smaller of the Tukey
    and t calibrations."""
    claim = {"holds": ["spread >> 0", "delta >> 0"], "paper": {}}
    values = {"spread": inference.Estimate(5.0, "spread", 1.0, 3, 8, 5, True),
              "delta": mean(5.0, 1.0, 3)}
    fractions, seeds = (2 / 3, 1.0), {"spread": (2, 3), "delta": (2, 3)}
    both = sequential.claim_levels(claim, values, seeds, fractions)
    tukey = sequential.levels(fractions, "Tukey", (2, 3), 5)
    t = sequential.levels(fractions, "t", (2, 3))
    assert both == tuple(map(min, tukey, t))
    with pytest.raises(ValueError, match="seeds at every look"):
        sequential.decide(claim, values, [], fractions, {"spread": 3, "delta": 3})


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
    """The delta claim at a look of a 15-seed cell, its seeds in proportion."""
    seeds = {"delta": (*(round(15 * f) for f in fractions[:-1]), n)}
    return sequential.decide(delta_claim(), {"delta": mean(value, sd, n)}, list(failed),
                             fractions, {"delta": 15}, seeds=seeds)


def test_a_large_effect_holds_at_the_first_look():
    assert decide(10.0, 1.0, 5).kind == "holds"


def test_a_look_spends_as_the_spending_function_it_is_given():
    """delta 3 +- 1 pp on 5 seeds: p 0.0013, under t^2's level at a third of the
    information (0.0056) and over O'Brien-Fleming's (0.00069)."""
    claim, values = delta_claim(), {"delta": mean(3.0, 1.0, 5)}
    obf = sequential.decide(claim, values, [], (1 / 3,), {"delta": 15},
                            spending=sequential.obrien_fleming)
    assert obf.level == pytest.approx(sequential.obrien_fleming(1 / 3))
    assert (decide(3.0, 1.0, 5).kind, obf.kind) == ("holds", "continue")


def test_an_effect_far_below_the_papers_fails_only_when_overwhelming():
    # the first look's level is 0.0056: its one-sided bound 0 + t(0.9972; 4) 3 / sqrt(5)
    # still reaches half the paper's 10 pp
    assert decide(0.0, 3.0, 5).kind == "continue"
    assert decide(0.0, 0.3, 5).kind == "fails"


def test_a_claim_the_maximum_seeds_cannot_decide_is_futile_early():
    """delta 2.5 with seed noise 20 pp: even a lucky draw of the 9 seeds to come (its
    80% predictive quantile either way) leaves the 15-seed interval over both 0 and half
    the paper's 10 pp; before 40% of its information no claim is futile."""
    decision = decide(2.5, 20.0, 6, fractions=(0.4,))
    assert decision.kind == "futile" and "predictive power under 20%" in decision.reason
    assert decide(2.5, 20.0, 5).kind == "continue"
    assert decide(3.0, 2.0, 5).kind == "continue"


def spread_claim() -> dict:
    """adaptive_forget_b128's bound on Adam's spread (the paper's 4.3 pp, at most 6.6)."""
    return {"id": "washes_out", "values": {"s": {"stat": "spread", "cell": "adam"}},
            "holds": ["s <= 6.6"], "paper": {"s": 4.3}}


def test_futility_asks_for_predictive_power_not_todays_spread_at_the_maximum_seeds():
    """60 simulated first looks (5 of 25 seeds, seed noise 1.5 pp) at the paper's 4.3 pp,
    which the fixed design's 25 seeds hold in 99.5% of studies: today's spread kept at 25
    seeds (the rule before) is left open, so futile, in about a sixth of them; predictive
    power stops a few at most, and the first look (a fifth of the information) none. A
    spread of 7 pp on 10 seeds is futile."""
    claim, rng = spread_claim(), np.random.default_rng(0)
    last = sequential.boundaries((0.2, 1.0))[-1]
    kept, unreachable, futile = 0, 0, 0
    for _ in range(60):
        now = {"s": staged.estimate("spread", staged.draw_values(claim, {"s": 4.3}, {"s": 25},
                                                                 rng)["s"], 5)}
        at_max = {"s": replace(now["s"], n=25, df=now["s"].df_at(25))}
        kept += sequential.verdict(sequential.tested(claim, at_max, last), last) == "open"
        conditions = sequential.tested(claim, now, sequential.boundaries((0.2,))[0])
        unreachable += not sequential.reachable(claim, conditions, now, {"s": 25}, last)
        futile += sequential.decide(claim, now, [], (0.2,), {"s": 25}).kind == "futile"
    assert kept >= 6 and unreachable <= kept / 3 and futile == 0
    hopeless = inference.Estimate(7.0, "spread", 1.5, 10, 36, 5, True)
    assert sequential.decide(claim, {"s": hopeless}, [], (0.2, 0.4), {"s": 25},
                             seeds={"s": (5, 10)}).kind == "futile"


def test_a_lucky_draw_moves_an_equivalence_to_its_middle_and_no_further():
    """|beta|'s SGD decay 0.1 decades, to be within 0.5 of 0: the seeds to come move it
    at best to 0 (not past it, which would leave the margin's middle again), at worst
    away from 0; a bound moves its whole way."""
    values = {"d": mean(0.1, 1.0, 5)}
    equivalence = sequential.tested({"holds": ["d ~ 0 within 0.5"]}, values, 0.05)[0]
    assert [sequential.moved(equivalence, values, {"d": 0.4}, z)["d"].value
            for z in (1.0, -1.0)] == pytest.approx([0.0, 0.5])
    bound = sequential.tested({"holds": ["d <= 0.5"]}, values, 0.05)[0]
    assert sequential.moved(bound, values, {"d": 0.4}, 1.0)["d"].value == pytest.approx(-0.3)


def test_undecided_at_the_last_look_is_futile():
    assert decide(3.0, 8.0, 15, fractions=(1 / 3, 2 / 3, 1.0)).kind == "futile"


def test_gates_come_first_and_a_claim_out_of_regime_buys_no_seeds():
    failed = [gates.Gate("trained", "sgd", False, "run 3 ends at 60%")]
    decision = decide(10.0, 1.0, 5, failed=failed)
    assert decision.kind == "out of regime" and "run 3 ends at 60%" in decision.reason


def test_a_value_not_run_says_so():
    decision = sequential.decide(delta_claim(), {}, [], (1 / 3,), {}, ["delta: not run"])
    assert decision.kind == "not run"


def cells(seeds: int) -> looks.ClaimCells:
    """The delta claim on one configuration of `seeds` seeds at sigma_w 0.1 and 2.5."""
    runs = pd.DataFrame([{"run_id": f"s{seed}-{sigma}", "seed": seed, "order": seed,
                          "of": seeds} for seed in range(seeds) for sigma in (0.1, 2.5)])
    return looks.ClaimCells(delta_claim(), {"sgd": runs}, ["sgd"])


def rates(truth: float, draws: int, seed: int) -> pd.Series:
    rng = np.random.default_rng(seed)
    claim_cells = cells(15)
    kinds = [staged.run_claim(claim_cells, staged.draw_values(
        claim_cells.claim, {"delta": truth}, {"delta": 15}, rng))[0] for _ in range(draws)]
    return pd.Series(kinds).value_counts(normalize=True)


def test_without_an_effect_the_staged_claim_holds_at_most_nominally():
    """400 studies at delta 0 (5 looks of a 15-seed cell): a false hold in at most 5%
    (one-sided 5%, the fixed design's level, spent over the looks)."""
    assert rates(0.0, 400, 0).get("holds", 0.0) <= NOMINAL


def test_at_the_papers_effect_the_staged_claim_holds_and_never_fails():
    found = rates(10.0, 200, 1)
    assert found.get("holds", 0.0) >= 0.95 and found.get("fails", 0.0) == 0.0


def test_a_cell_runs_its_seeds_in_fifths_but_never_fewer_than_two():
    assert [looks.seeds_at(15, j) for j in range(5)] == [3, 6, 9, 12, 15]
    assert [looks.seeds_at(25, j) for j in range(5)] == [5, 10, 15, 20, 25]
    assert [looks.seeds_at(3, j) for j in range(5)] == [2, 2, 2, 3, 3]
    assert cells(3).fractions(4) == pytest.approx((2 / 3, 1.0))
    assert cells(15).fractions(1) == pytest.approx((0.2, 0.4))
    assert math.isclose(cells(15).fractions(4)[-1], 1.0)


def test_a_conditions_boundary_puts_its_values_at_the_threshold_and_the_rest_at_the_papers():
    claim = {"values": {"a": {}, "b": {}, "d": {}}, "paper": {"a": 20.0, "b": 2.0, "d": 3.0},
             "holds": []}
    assert staged.boundary_truths(claim, "a >> b") == {"a": 0.0, "b": 0.0, "d": 3.0}
    assert staged.boundary_truths(claim, "b <= 5.7") == {"a": 20.0, "b": 5.7, "d": 3.0}
    assert staged.boundary_truths(claim, "a ~ b within 2.5") == {"a": 2.5, "b": 0.0, "d": 3.0}
    assert staged.boundary_truths(claim, "d >= 1") == {"a": 20.0, "b": 2.0, "d": 1.0}


def test_at_its_boundary_a_5_seed_delta_claim_holds_at_most_nominally():
    """150 staged studies of a 5-seed cell (looks at 2, 3, 4, 5 seeds: the t on 1-4
    degrees of freedom) at delta 0, counted as held at any look: at most 5% within three
    Monte Carlo standard errors (the plumbing of the calibrated levels into the engine's
    tests; their rate, on 100,000 studies, is test_calibrated_levels_hold_alpha...)."""
    held, draws = staged.null_holds(cells(5), "delta >> 0", 150)
    assert held / draws <= NOMINAL + 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / draws)


GPU_FIRST = ROOT / "config" / "gpu_first.yaml"
CLAIMS = ROOT / "paper" / "claims.yaml"


def sgd_delta_claim() -> dict:
    """The delta claim on config/gpu_first.yaml's SGD b = 16 cell (15 seeds)."""
    return {**delta_claim(), "cells": {"sgd": {"family": "main", "optimizer": "sgd", "b": 16}}}


def test_a_look_trains_only_the_seeds_its_open_claims_add():
    staging = looks.Staging.of(load_config(GPU_FIRST), [sgd_delta_claim()])
    assert [staging.claims[0].seeds_at("sgd", j) for j in range(5)] == [3, 6, 9, 12, 15]
    stopped = staging.look_hours([{"remembers"}, set(), set(), set(), set()])
    assert stopped[0] > 0 and stopped[1:] == [0.0] * 4
    most = staging.max_hours()
    assert all(h > 0 for h in most)
    assert stopped[0] == most[0]
    # staged packs of a look are smaller than the fixed study's: at most a few % dearer
    assert staging.fixed_hours() <= sum(most) <= 1.1 * staging.fixed_hours()


def test_the_runs_asked_for_are_those_of_the_looks_each_claim_was_open_at():
    """The aggregate's expected runs of a staged study: a claim decided at look 2 asked
    for its cell's first 6 seeds of 15; the runs no claim reads are asked for at look 1."""
    staging = looks.Staging.of(load_config(GPU_FIRST), [sgd_delta_claim()])
    decided = pd.DataFrame([{"id": "remembers", "decision": "holds", "look": 2}])
    asked = staging.asked(decided)
    cell = staging.claims[0].run_ids(1)
    assert asked == cell | staging.unread() and cell <= asked
    assert len({staging.runs[r].seed for r in cell}) == 6
    assert staging.asked(decided.assign(look=1)) == staging.claims[0].run_ids(0) | \
        staging.unread()
    assert staging.asked(decided.assign(decision="continue", look=5)) == set(staging.runs)
    # what `initmem status` counts: nothing more once decided, every seed while open
    assert staging.needed(decided) == asked and staging.needed(None) == set(staging.runs)
    assert staging.needed(decided.assign(decision="continue", look=1)) == set(staging.runs)


def test_claims_asked_writes_the_runs_a_staged_studys_looks_asked_for(tmp_path, capsys):
    """The workflow's rule asked_runs, on config/gpu_first.yaml's last look: every claim
    decided at look 1 asks for look 1's runs only."""
    staging = looks.Staging.of(load_config(GPU_FIRST), read_claims(CLAIMS))
    decisions = pd.DataFrame([{"id": c.claim["id"], "decision": "not run", "look": 1}
                              for c in staging.claims])
    decisions.to_csv(tmp_path / "look5.csv", index=False)
    out = tmp_path / "looks" / "runs.txt"
    assert main(["claims", "--asked", str(tmp_path / "look5.csv"), "--config",
                 str(GPU_FIRST), "--out-runs", str(out)]) == 0
    assert out.read_text().split() == sorted(staging.wanted(0, set(decisions["id"])))
    assert f"of the config's {len(staging.runs)} runs asked for" in capsys.readouterr().out
    assert main(["claims", "--asked", str(tmp_path / "look5.csv"), "--config",
                 str(GPU_FIRST)]) == 2
    assert "--asked needs --config" in capsys.readouterr().err


def test_a_cell_of_several_configurations_runs_each_ones_seeds_in_looks():
    """sgd_clock_threshold's cells read the 5,000-epoch runs (3 seeds) and the main grid's
    (15): look 1 trains 2 of the first's seeds, not the 3 a fifth of 15 would take."""
    claim = next(c for c in read_claims(CLAIMS) if c["id"] == "sgd_clock_threshold")
    staging = looks.Staging.of(load_config(GPU_FIRST), [claim])
    cells = staging.claims[0]

    def seeds(family: str, look: int) -> set[int]:
        return {staging.runs[r].seed for r in cells.run_ids(look)
                if staging.runs[r].recipe.family == family}

    assert seeds("long_sgd", 0) == {0, 1} and seeds("long_sgd", 3) == {0, 1, 42}
    assert len(seeds("main", 0)) == 3 and cells.seeds_at("sgd", 0) == 3
    assert cells.seeds_max()["spread_low"] == 15


def test_a_claim_whose_cells_the_config_lacks_costs_only_the_first_look():
    """The workflow decides it "not run" at look 1; the plan's simulation must not price
    its planned cells' later seeds (config/laptop_staged.yaml: sgd_clock_threshold's
    low-clock cell is planned, its high-clock one is not)."""
    claim = next(c for c in read_claims(CLAIMS) if c["id"] == "sgd_clock_threshold")
    staging = looks.Staging.of(load_config(ROOT / "config" / "laptop_staged.yaml"), [claim])
    assert not staging.claims[0].complete
    hours = staged.simulate(staging, 1.0, 2).hours
    assert (hours[:, 0] > 0).all() and (hours[:, 1:] == 0).all()


def test_the_summary_table_gives_rates_with_intervals_and_hours_beside_the_fixed():
    staging = looks.Staging.of(load_config(GPU_FIRST), [sgd_delta_claim()])
    table = staged.summary(staging, [staged.simulate(staging, s, 6, seed=3) for s in (1.0, 0.0)])
    text = staged.render_summary(table)
    assert "| 1 x paper | none false | 0.0 [0.0, 45.9] of 6 |" in text
    assert "| 0 x paper |" in text and "none true" in text
    assert (table["expected_h"] <= table["max_h"] + 1e-9).all()
    claims = staged.per_claim(staging, staged.simulate(staging, 1.0, 6, seed=3))
    row = claims.iloc[0]
    assert row["holds"] + row["fails"] + row["futile"] == pytest.approx(1.0)
    assert 3 <= row["seeds"] <= row["seeds_max"] == 15 and 1 <= row["look"] <= 5
    assert "| `remembers` |" in staged.render_per_claim(claims, 1.0)


def test_the_clopper_pearson_interval_covers_the_rate():
    assert staged.interval(0, 20) == pytest.approx((0.0, 0.168), abs=1e-3)
    assert staged.interval(20, 20)[1] == 1.0


@pytest.mark.slow
def test_the_staged_gpu_study_keeps_both_error_rates_nominal():
    """The bench's table on config/gpu_first.yaml's claims at 10 studies per scale (about a
    two minutes): no false hold at no effect beyond Monte Carlo noise of 5%, no false fail at
    the paper's effects, and its maximum within 110% of the fixed design's."""
    staging = looks.Staging.of(load_config(GPU_FIRST), read_claims(CLAIMS))
    simulated = [staged.simulate(staging, s, 10, seed=i) for i, s in enumerate((1.0, 0.0))]
    table = staged.summary(staging, simulated)
    assert table["false_hold"].max() <= NOMINAL + 0.05 and table["false_fail"].max() <= NOMINAL
    assert table["max_h"].iloc[0] <= 1.1 * table["fixed_h"].iloc[0]


def sgd_runs(staging: looks.Staging, delta: float, rng: np.random.Generator) -> pd.DataFrame:
    """Records of the SGD b = 16 cell's runs: accuracy at sigma_w 0.1 above 2.5 by `delta`
    pp, seed noise 1 pp."""
    cell = staging.claims[0].runs["sgd"]
    rows = [{"run_id": r.run_id, "family": "main", "b": 16, "sigma_w": r.sigma_w,
             "seed": r.seed, "status": "completed", "eval_subset": 10_000,
             "test_acc_best": (80 + (delta if r.sigma_w == 0.1 else 0.0)
                               + rng.standard_normal()) / 100}
            for r in (staging.runs[i] for i in cell["run_id"])]
    return runs_table(rows)


def test_a_replayed_study_stops_each_claim_at_its_look_with_the_runs_it_used():
    staging = looks.Staging.of(load_config(GPU_FIRST), [sgd_delta_claim()])
    table, used = staged.replay(staging, sgd_runs(staging, 4.0, np.random.default_rng(0)), None)
    row = table.iloc[0]
    assert (row["fixed"], row["staged"], bool(row["agree"])) == ("holds", "holds", True)
    # 3 seeds (look 1) have 2 degrees of freedom at level 0.002: 4 pp is too little there,
    # 6 seeds (look 2) suffice; 10 pp holds at look 1
    assert row["look"] == 2 and row["runs"] == 30 == used and row["runs_fixed"] == 75
    table, used = staged.replay(staging, sgd_runs(staging, 10.0, np.random.default_rng(0)), None)
    assert table.iloc[0][["staged", "look", "runs"]].tolist() == ["holds", 1, 15] and used == 15
    table, _ = staged.replay(staging, sgd_runs(staging, 0.5, np.random.default_rng(0)), None)
    assert table.iloc[0][["fixed", "staged", "look"]].tolist() == ["fails", "fails", 2]


@pytest.mark.slow
def test_the_laptop_archives_replayed_look_by_look_reach_the_same_verdicts(tmp_path, capsys):
    laptop = ROOT / "results" / "laptop" / "v2"
    assert main(["claims", "--staged", "--config", str(ROOT / "config" / "laptop_v2.yaml"),
                 "--archive", str(laptop / "runs.tar"), "--archive",
                 str(laptop / "rerun" / "runs.tar"), "--out-csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    assert out.count("16 of 16 verdicts agree") == 2
    assert "would have trained 40 of the 55 recorded runs" in out


@pytest.mark.slow
def test_the_staged_gpu_study_dry_runs_its_first_look_through_the_slurm_profile(tmp_path):
    """`snakemake --profile slurm all --configfile config/gpu_first.yaml`, dry: the first
    look's packs train (fifths of the seeds, apart from later looks'), then its checkpoint
    judges; later looks wait for its decisions (slow: 13-16 s)."""
    done = snakemake(tmp_path, GPU_FIRST, "-n", "all", profile="slurm")
    assert done.returncode == 0, done.stdout + done.stderr
    counts = job_counts(done.stdout)
    trains = [rule for rule in counts if rule.startswith("train_")]
    assert trains and all(rule.startswith("train_look1-") for rule in trains)
    assert counts["look_1"] == 1 and "look_2" not in counts
    assert "checkpoint jobs" in done.stdout


def test_status_shows_the_look_and_what_each_open_claim_waits_for(tmp_path):
    args = (GPU_FIRST, tmp_path / "runs", None, ROOT / "paper" / "published",
            ROOT / "paper" / "claims.yaml")
    before = status.render(status.sweep_status(*args))
    assert "staged: look 1 of 5 training (no look decided yet)" in before
    assert "872 runs" in before and "look1-main" not in before  # counted by recipe
    # per look (issue 51): its state, its runs trained and its device-hours against plan
    assert "  look 1: training; 0 of 268 runs trained, 0.00 device-hours of 108.44 " \
        "planned\n  look 2: waits for look 1's decisions\n" in before
    (tmp_path / "looks").mkdir()
    pd.DataFrame([{"id": "sgd_interpolates_yet_remembers_b16", "decision": "holds",
                   "look": 1, "runs": 15, "waits": "", "reason": ""},
                  {"id": "adaptive_forget_b128", "decision": "continue", "look": 1,
                   "runs": 30, "waits": "look 2: adam 10 seeds", "reason": ""}]
                 ).to_csv(tmp_path / "looks" / "look1.csv", index=False)
    after = status.render(status.sweep_status(*args))
    assert "staged: look 1 of 5 decided: 1 holds, 1 continue" in after
    assert re.search(r"  look 1: decided; 0 of 268 runs trained, 0.00 device-hours of "
                     r"108.44 planned\n  look 2: training; 0 of (\d+) runs trained, 0.00 "
                     r"device-hours of [\d.]+ planned\n  look 3: waits for look 2's "
                     r"decisions\n", after), after
    assert "adaptive_forget_b128 waits for look 2: adam 10 seeds" in after


def test_a_look_keeps_earlier_decisions_and_says_what_an_open_claim_waits_for(tmp_path):
    staging = looks.Staging.of(load_config(GPU_FIRST), [sgd_delta_claim()])
    runs = sgd_runs(staging, 4.0, np.random.default_rng(0))
    first = staged.judge_look(staging, 0, runs, None, None)
    assert first[["decision", "look", "runs", "waits"]].values.tolist() == [
        ["continue", 1, 15, "look 2: sgd 6 seeds"]]
    first.to_csv(tmp_path / "look1.csv", index=False)
    assert looks.open_claims(tmp_path / "look1.csv") == {"remembers"}
    second = staged.judge_look(staging, 1, runs, None, first)
    assert second[["decision", "look"]].values.tolist() == [["holds", 2]]
    assert staged.judge_look(staging, 4, runs, None, second).equals(second)


@pytest.mark.parametrize(("args", "message"), [
    (["--look", "6"], "the looks are 1 to 5"),
    (["--look", "2"], "--previous .* is needed from look 2 on"),
    (["--look", "1", "--previous", "x.csv"], "and only there")])
def test_a_bad_look_is_refused_naming_it(tmp_path, capsys, args, message):
    assert main(["claims", "--config", str(GPU_FIRST), *args,
                 "--out-csv", str(tmp_path / "l.csv")]) == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.slow
def test_once_a_look_decides_every_claim_nothing_more_trains(tmp_path):
    """The first look's runs recorded (3 fake epochs each: every claim is out of regime or
    not run), its checkpoint judges for real; then `all` trains nothing more (about two
    minutes: two Snakemake runs over config/gpu_first.yaml)."""
    staging = looks.Staging.of(load_config(GPU_FIRST), read_claims(CLAIMS))
    rng = np.random.default_rng(0)
    for run_id in sorted(staging.wanted(0, {c.claim["id"] for c in staging.claims})):
        run = staging.runs[run_id]
        write_fake_run(tmp_path / "results" / "runs", run, 3,
                       -0.04 * run.sigma_w + 0.02 * rng.standard_normal())
    done = snakemake(tmp_path, GPU_FIRST, "results/looks/look1.csv")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "continue" not in (tmp_path / "results" / "looks" / "look1.csv").read_text()
    done = snakemake(tmp_path, GPU_FIRST, "-n", "all", profile="slurm")
    assert done.returncode == 0, done.stdout + done.stderr
    counts = job_counts(done.stdout)
    assert counts["look_2"] == 1 and not any(rule.startswith("train_") for rule in counts)


def test_a_staged_study_trains_one_pack_per_job():
    config = yaml.safe_load(GPU_FIRST.read_text())
    config["execution"]["packs_per_job"] = 2
    with pytest.raises(ConfigError, match=r"packs_per_job=2 with staged: true is not allowed"):
        validate_config(config)


def six_seed_study(tmp_path: Path) -> Path:
    """A staged study of one cell, config/test.yaml's synthetic scale: SGD at b = 16 over
    the five sigma_w, six seeds (two at look 1, three at look 2), 20 epochs; every claim
    but sgd_interpolates_yet_remembers_b16 reads a cell it lacks (not run)."""
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["staged"] = True
    config["execution"]["pack_size"] = 5
    config["seed_sets"] = {"six": [0, 1, 2, 3, 4, 5]}
    config["sigma_sets"] = {"five": [0.1, 0.5, 1.0, 1.8, 2.5]}
    config["families"] = {"main": {
        "recipe": {"arch": "resnet9", "optimizer": "sgd", "b": 16, "epochs": 20},
        "sigma_w": "five", "seeds": "six"}}
    path = tmp_path / "six_seeds.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.mark.slow
def test_a_look_that_leaves_a_claim_open_schedules_exactly_its_next_seeds(tmp_path):
    """Look 1's runs recorded (fake: accuracy 4 pp lower per unit of sigma_w, seed noise
    2 pp, clocks a thousandth of the fakes' so that the memory claim's clock gate passes),
    its checkpoint judges for real and leaves the claim open (2 seeds: too few at look 1's
    level); Snakemake re-evaluates the checkpoint and schedules look 2: exactly the third
    seed's 5 runs, then look 2's checkpoint; `initmem status` says look 1 decided and what
    the claim waits for."""
    config = six_seed_study(tmp_path)
    staging = looks.Staging.of(load_config(config), read_claims(CLAIMS))
    every = {c.claim["id"] for c in staging.claims}
    runs_root = tmp_path / "results" / "runs"
    rng = np.random.default_rng(0)
    for run_id in sorted(staging.wanted(0, every)):
        run = staging.runs[run_id]
        write_fake_run(runs_root, run, offset=-0.04 * run.sigma_w + 0.02 * rng.standard_normal(),
                       clocks=1e-3)
    first = len(staging.wanted(0, every))
    text = status.render(status.sweep_status(config, runs_root, None,
                                             ROOT / "paper" / "published", CLAIMS))
    assert f"  look 1: deciding; {first} of {first} runs trained" in text, text
    done = snakemake(tmp_path, config, "results/looks/look1.csv")
    assert done.returncode == 0, done.stdout + done.stderr
    look1 = pd.read_csv(tmp_path / "results" / "looks" / "look1.csv").set_index("id")
    assert look1.loc["sgd_interpolates_yet_remembers_b16", "decision"] == "continue"
    assert set(look1["decision"]) == {"continue", "not run"}

    done = snakemake(tmp_path, config, "-n", "all", profile="slurm")
    assert done.returncode == 0, done.stdout + done.stderr
    counts = job_counts(done.stdout)
    look2 = {pack_id: pack for pack_id, pack in staging.packs().items()
             if pack_id.startswith("look2-")}
    assert {rule for rule in counts if rule.startswith("train_")} == {
        f"train_{pack_id}" for pack_id in look2}
    assert sorted((r.seed, r.sigma_w) for p in look2.values() for r in p.runs) == [
        (2, s) for s in (0.1, 0.5, 1.0, 1.8, 2.5)]
    assert counts["look_2"] == 1 and "look_1" not in counts

    text = status.render(status.sweep_status(config, runs_root, None,
                                             ROOT / "paper" / "published", CLAIMS))
    assert "staged: look 1 of 5 decided: 1 continue, 15 not run" in text
    assert "sgd_interpolates_yet_remembers_b16 waits for look 2: sgd 3 seeds" in text
    assert f"  look 1: decided; {first} of {first} runs trained" in text, text
    assert "  look 2: training; 0 of 5 runs trained, 0.00 device-hours of " in text, text
