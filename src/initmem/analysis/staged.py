"""A staged study (initmem.plan.looks: which runs each look trains) simulated, replayed on
recorded runs, and judged look by look (initmem.analysis.sequential decides each claim).

The simulation draws each value's per-seed data at its truth (the paper's value times a
scale) and seed noise, looks at the first seeds as the study would, and decides with the
real rule. Values are drawn independently (two claims' values of one cell are not
correlated here), which only matters for the expected cost, not for a claim's errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy

from initmem.analysis import claims as judge
from initmem.analysis import design, inference, sequential
from initmem.analysis.inference import Estimate
from initmem.plan.looks import LOOKS, MIN_SEEDS, ClaimCells, Staging
from initmem.vocabulary import FIVE_SIGMAS, MISSING

# The paper's seed noise at full scale: Table 5's seed standard deviations run 0.3-2.3 pp
# (config/gpu_first.yaml plans with 1.5 pp, which covers Adam's and the deep nets').
NOISE_SD = 1.5


# ------------------------------------------------------------------------ simulation

def truths(claim: dict[str, Any], scale: float) -> dict[str, float] | None:
    """Each value's truth: the paper's times `scale` (a clock is not an effect: unscaled);
    None when the paper gives no value of one (the claim cannot be simulated)."""
    paper = claim.get("paper", {})
    if any(name not in paper for name in claim["values"]):
        return None
    return {name: paper[name] * (1.0 if spec["stat"] == "max_clock" else scale)
            for name, spec in claim["values"].items()}


def draw_values(claim: dict[str, Any], truth: dict[str, float], n: dict[str, int],
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One study's per-seed data of each value at its maximum seeds n[name]: a spread's
    sigma_w x seed table (its means linear between the truth at sigma_w 0.1 and 0 at 2.5,
    plus a seed level that the paired design cancels), or a mean's per-seed values."""
    drawn = {}
    for name, spec in claim["values"].items():
        stat, size = spec["stat"], n[name]
        if stat in ("spread", "max_spread", "min_spread"):
            means = truth[name] * np.linspace(1, 0, len(FIVE_SIGMAS))[:, None]
            drawn[name] = (means + NOISE_SD * rng.standard_normal((1, size))
                           + NOISE_SD * rng.standard_normal((len(FIVE_SIGMAS), size)))
        elif stat == "max_clock":
            drawn[name] = np.full(size, truth[name])
        else:
            sd = {"delta": math.sqrt(2) * NOISE_SD, "beta_decay": design.DECAY_NOISE}.get(
                stat, NOISE_SD)
            drawn[name] = truth[name] + sd * rng.standard_normal(size)
    return drawn


def estimate(stat: str, data: np.ndarray, n: int) -> Estimate:
    """A value's estimate from its first n seeds, as the engine computes it."""
    if stat in ("spread", "max_spread", "min_spread"):
        seeds = np.arange(n)
        return inference.spread({s: data[i, :n] for i, s in enumerate(FIVE_SIGMAS)},
                                {s: seeds for s in FIVE_SIGMAS})
    if stat == "max_clock":
        return inference.exact(float(data[0]))
    return inference.mean(data[:n])


def values_at(cells: ClaimCells, drawn: dict[str, np.ndarray], look: int
              ) -> dict[str, Estimate]:
    """Each value's estimate from the seeds its cell has run by a look (0-based)."""
    return {name: estimate(spec["stat"], drawn[name], cells.seeds_at(spec["cell"], look))
            for name, spec in cells.claim["values"].items()}


def run_claim(cells: ClaimCells, drawn: dict[str, np.ndarray],
              spending: sequential.Spending = sequential.spent) -> tuple[str, int]:
    """The claim's decision and the look (0-based) it was taken at, on one drawn study."""
    for look in range(len(LOOKS)):
        decision = sequential.decide(cells.claim, values_at(cells, drawn, look), [],
                                     cells.fractions(look), cells.seeds_max(),
                                     spending=spending, seeds=cells.seeds_by_look(look))
        if decision.kind != "continue":
            return decision.kind, look
    raise AssertionError("the last look always decides")  # fractions end at 1


def fixed_claim(cells: ClaimCells, drawn: dict[str, np.ndarray]) -> str:
    """The fixed design's decision on the same drawn study: every seed, one look at the
    full level."""
    last = len(LOOKS) - 1
    return sequential.decide(cells.claim, values_at(cells, drawn, last), [], (1.0,),
                             cells.seeds_max()).kind


def truly_holds(claim: dict[str, Any], truth: dict[str, float]) -> bool:
    """Whether every condition holds on the true values (no noise; >> strictly)."""
    exact = {name: inference.exact(v) for name, v in truth.items()}
    for text in claim["holds"]:
        c = judge.test_condition(text, exact, claim.get("paper", {}), 0.95)
        v = c.estimate.value
        if not {">>": v > c.threshold, ">=": v >= c.threshold, "<=": v <= c.threshold,
                "~": abs(v) < c.threshold}[c.op]:
            return False
    return True


@dataclass
class Simulated:
    """A staged study simulated `draws` times at one effect scale."""

    scale: float
    outcomes: pd.DataFrame  # draw, id, decision, look, truly_holds, fixed (its decision)
    hours: np.ndarray  # draws x looks

    def rate(self, kind: str, truth: bool, by: str = "decision") -> tuple[int, int]:
        """(count, trials) of decision `kind` among the claims whose truth is `truth`, by
        the staged design ("decision") or the fixed one ("fixed") on the same studies."""
        rows = self.outcomes[self.outcomes["truly_holds"] == truth]
        return int((rows[by] == kind).sum()), len(rows)


def simulate(staging: Staging, scale: float, draws: int, seed: int = 0,
             spending: sequential.Spending = sequential.spent) -> Simulated:
    """The staged study at effects `scale` times the paper's, its looks' levels spent by
    `spending`; a claim whose cells the config lacks is decided at the first look, as the
    workflow decides it ("not run"), and one that cannot be simulated (no paper value of
    one of its values) stays open to the end (its cost counted, its errors not)."""
    rng = np.random.default_rng(seed)
    rows, hours = [], []
    for draw in range(draws):
        open_at = [set() for _ in LOOKS]
        for cells in staging.claims:
            truth = truths(cells.claim, scale)
            last = len(LOOKS) - 1 if cells.complete else 0
            if truth is not None and cells.complete:
                drawn = draw_values(cells.claim, truth, cells.seeds_max(), rng)
                kind, last = run_claim(cells, drawn, spending)
                rows.append({"draw": draw, "id": cells.claim["id"], "decision": kind,
                             "look": last, "truly_holds": truly_holds(cells.claim, truth),
                             "fixed": fixed_claim(cells, drawn)})
            for look in range(last + 1):
                open_at[look].add(cells.claim["id"])
        hours.append(staging.look_hours(open_at))
    return Simulated(scale, pd.DataFrame(rows), np.array(hours))


def boundary_truths(claim: dict[str, Any], text: str) -> dict[str, float]:
    """Each value's truth with condition `text` at its boundary, the least favourable null
    for holding it: its values at 0 (a spread: equal means, the most bias) but the first,
    moved so that the condition's quantity equals its threshold (an equivalence: its
    margin); the claim's other values at the paper's (0 where it gives none)."""
    truth = {name: claim.get("paper", {}).get(name, 0.0) for name in claim["values"]}
    exact = {name: inference.exact(0.0) for name in claim["values"]}
    condition = judge.test_condition(text, exact, {}, 1 - inference.ALPHA)
    target = condition.threshold + (condition.offset if condition.op == "~" else 0.0)
    (first_c, first), *rest = condition.terms
    truth |= {name: 0.0 for _, name in rest}
    truth[first] = target / first_c
    return truth


def ever_holds(cells: ClaimCells, drawn: dict[str, np.ndarray]) -> bool:
    """Whether the claim holds at some look of a drawn study, were it never stopped for
    failing or futility (both only remove holds: an upper bound on its false holds)."""
    for look in range(len(LOOKS)):
        values = values_at(cells, drawn, look)
        level = sequential.claim_levels(cells.claim, values, cells.seeds_by_look(look),
                                        cells.fractions(look))[-1]
        if sequential.verdict(sequential.tested(cells.claim, values, level), level) == "holds":
            return True
    return False


def null_holds(cells: ClaimCells, text: str, draws: int, seed: int = 0) -> tuple[int, int]:
    """(false holds, studies): the claim at condition `text`'s boundary with its other
    conditions clearly true (so holding it is holding `text` at the claim's levels: the
    claim reduced to `text`, whose levels are no smaller than the claim's), over `draws`
    simulated staged studies."""
    alone = ClaimCells({**cells.claim, "holds": [text]}, cells.runs, cells.compared)
    truth, rng = boundary_truths(cells.claim, text), np.random.default_rng(seed)
    held = sum(ever_holds(alone, draw_values(alone.claim, truth, alone.seeds_max(), rng))
               for _ in range(draws))
    return held, draws


def interval(count: int, trials: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a rate (the Monte Carlo interval)."""
    lo = scipy.stats.beta.ppf(0.025, count, trials - count + 1) if count else 0.0
    hi = scipy.stats.beta.ppf(0.975, count + 1, trials - count) if count < trials else 1.0
    return float(lo), float(hi)


SCALES = (1.0, 0.5, 2.0, 0.0)  # the paper's effects, half, twice, none


def summary(staging: Staging, simulated: list[Simulated]) -> pd.DataFrame:
    """Per effect scale: the false-hold and false-fail rates with their Monte Carlo
    intervals, the share of true claims held by the staged design and by the fixed one on
    the same studies (`power`, `fixed_power`), what the claims decided, and the expected
    and maximum device-hours against the fixed design's."""
    fixed, most = staging.fixed_hours(), sum(staging.max_hours())
    rows = []
    for sim in simulated:
        total = sim.hours.sum(1)
        row = {"scale": sim.scale}
        for name, kind, truth, by in (("false_hold", "holds", False, "decision"),
                                      ("false_fail", "fails", True, "decision"),
                                      ("power", "holds", True, "decision"),
                                      ("fixed_power", "holds", True, "fixed")):
            count, trials = sim.rate(kind, truth, by)
            row[name] = count / trials if trials else math.nan
            row[f"{name}_ci"] = interval(count, trials) if trials else (math.nan, math.nan)
            row[f"{name}_of"] = trials
        counts = sim.outcomes["decision"].value_counts(normalize=True)
        row |= {kind: float(counts.get(kind, 0.0)) for kind in ("holds", "fails", "futile")}
        row |= {"expected_h": float(total.mean()),
                "expected_h_se": float(total.std(ddof=1) / math.sqrt(len(total))),
                "max_h": most, "fixed_h": fixed}
        rows.append(row)
    return pd.DataFrame(rows)


def render_summary(table: pd.DataFrame) -> str:
    """The summary as a Markdown table (rates in %, Clopper-Pearson 95% intervals); the
    share of true claims held by the staged design and by the fixed one on the same
    studies (every seed, one look at 5%) says what the looks cost in power."""
    def rate(r: dict, name: str, trials: bool = True) -> str:
        if not r[f"{name}_of"]:
            return "none false" if name == "false_hold" else "none true"
        lo, hi = r[f"{name}_ci"]
        of = f" of {r[f'{name}_of']}" if trials else ""
        return f"{100 * r[name]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]{of}"

    lines = ["| effects | false holds % [95% MC] | false fails % [95% MC] | true claims held %, "
             "staged / fixed [95% MC] | holds / fails / futile % | expected GPU-h (of fixed) "
             "| max GPU-h (of fixed) | fixed GPU-h |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table.to_dict("records"):
        power = (f"{rate(r, 'power', False)} / {rate(r, 'fixed_power', False)}"
                 if r["power_of"] else "none true")
        lines.append(
            f"| {r['scale']:g} x paper | {rate(r, 'false_hold')} | {rate(r, 'false_fail')} | "
            f"{power} | "
            f"{100 * r['holds']:.0f} / {100 * r['fails']:.0f} / {100 * r['futile']:.0f} | "
            f"{r['expected_h']:.0f} +- {1.96 * r['expected_h_se']:.0f} "
            f"({100 * r['expected_h'] / r['fixed_h']:.0f}%) | {r['max_h']:.0f} "
            f"({100 * r['max_h'] / r['fixed_h']:.0f}%) | {r['fixed_h']:.0f} |")
    return "\n".join(lines) + "\n"


def per_claim(staging: Staging, simulated: Simulated) -> pd.DataFrame:
    """Per claim at one effect scale: how often it held, failed or was futile, how often
    the fixed design held it on the same studies, its mean decision look (1-based), and
    the seeds of its compared cells (summed) it had then on average, against their seeds
    at the last look; a claim not simulated is open to the end (its decisions NaN)."""
    rows = []
    for cells in staging.claims:
        mine = simulated.outcomes[simulated.outcomes["id"] == cells.claim["id"]]
        looks = mine["look"] if not mine.empty else pd.Series([len(LOOKS) - 1])
        counts = mine["decision"].value_counts(normalize=True) if not mine.empty else {}
        rows.append({"id": cells.claim["id"], "simulated": not mine.empty,
                     **{kind: float(counts.get(kind, math.nan if mine.empty else 0.0))
                        for kind in ("holds", "fails", "futile")},
                     "fixed_holds": float((mine["fixed"] == "holds").mean()
                                          if not mine.empty else math.nan),
                     "look": float(looks.mean() + 1),
                     "seeds": float(looks.map(cells.compared_seeds).mean()),
                     "seeds_max": cells.compared_seeds(len(LOOKS) - 1)})
    return pd.DataFrame(rows)


def render_per_claim(table: pd.DataFrame, scale: float) -> str:
    """per_claim's table in Markdown."""
    lines = [f"| claim (at {scale:g} x paper) | holds / fails / futile % | fixed design "
             "holds % | mean look | expected seeds of its cells (of max) |",
             "| --- | --- | --- | --- | --- |"]
    for r in table.to_dict("records"):
        kinds = (" / ".join(f"{100 * r[k]:.0f}" for k in ("holds", "fails", "futile"))
                 if r["simulated"] else "not simulated: open to the end")
        fixed = f"{100 * r['fixed_holds']:.0f}" if r["simulated"] else "-"
        lines.append(f"| `{r['id']}` | {kinds} | {fixed} | {r['look']:.1f} | "
                     f"{r['seeds']:.1f} ({r['seeds_max']}) |")
    return "\n".join(lines) + "\n"


def render_looks(staging: Staging, simulated: Simulated) -> str:
    """Per look, the expected device-hours (simulated at `simulated.scale` times the
    paper's effects) and the maximum (every claim open to the end), and the fixed
    design's beside them."""
    expected, most = simulated.hours.mean(0), staging.max_hours()
    lines = [f"staged: {len(LOOKS)} looks at {', '.join(f'{f:.0%}' for f in LOOKS)} of each "
             f"cell's seeds (at least {MIN_SEEDS}); expected at {simulated.scale:g}x the "
             f"paper's effects over {len(simulated.hours)} simulated studies",
             f"{'look':<6} {'expected h':>11} {'max h':>8}"]
    lines += [f"{j + 1:<6} {e:>11.1f} {m:>8.1f}" for j, (e, m) in enumerate(zip(expected, most,
                                                                                strict=True))]
    fixed = staging.fixed_hours()
    lines.append(f"{'all':<6} {expected.sum():>11.1f} {sum(most):>8.1f}   fixed design: "
                 f"{fixed:.1f} h in one look (expected {expected.sum() / fixed:.0%}, "
                 f"max {sum(most) / fixed:.0%} of it)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- replay

def recorded_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of a runs table that have records."""
    return runs[runs["status"].ne(MISSING).fillna(False).to_numpy()]


def decide_at(cells: ClaimCells, look: int, recorded: pd.DataFrame,
              epochs: pd.DataFrame | None) -> tuple[sequential.Decision, set[str]]:
    """A claim at a look (0-based) on the recorded runs of its cells by then, and their
    ids."""
    seen = recorded[recorded["run_id"].isin(cells.run_ids(look))]
    _, values, missing, checked = judge.observe(cells.claim, seen, epochs)
    decision = sequential.decide(cells.claim, values, [g for g in checked if g.passed is False],
                                 cells.fractions(look), cells.seeds_max(), missing,
                                 seeds=cells.seeds_by_look(look))
    return decision, set(seen["run_id"])


def replay(staging: Staging, runs: pd.DataFrame, epochs: pd.DataFrame | None
           ) -> tuple[pd.DataFrame, int]:
    """A finished study's runs judged look by look as the staged study would have seen
    them: per claim, the verdict on every run (the fixed design's), the staged decision
    and the look (1-based) it came at, and the recorded runs of its cells by then; and how
    many recorded runs the staged study would have trained in all."""
    recorded = recorded_runs(runs)
    rows, used = [], set(recorded["run_id"]) & staging.unread()
    for cells in staging.claims:
        claim = cells.claim
        full = judge.judge_claim(claim, runs, epochs, judge.planning_sigma(runs))
        for look in range(len(LOOKS)):
            decision, seen = decide_at(cells, look, recorded, epochs)
            if decision.kind != "continue":
                break
        used |= seen
        every = recorded["run_id"].isin(cells.run_ids(len(LOOKS) - 1)).sum()
        rows.append({"id": claim["id"], "fixed": full.kind, "staged": decision.kind,
                     "look": look + 1, "runs": len(seen), "runs_fixed": int(every),
                     "agree": _agree(full.kind, decision.kind), "reason": decision.reason})
    return pd.DataFrame(rows), len(used)


def _agree(fixed: str, staged_kind: str) -> bool:
    """The same verdict: holds and fails as such; futile is the fixed design's
    underpowered; out of regime and not run as such."""
    return {"futile": "underpowered"}.get(staged_kind, staged_kind) == fixed


def render_replay(table: pd.DataFrame, used: int, recorded: int) -> str:
    """The replay's table (replay) as Markdown, with the runs it would have trained."""
    lines = ["| claim | on every run | staged | at look | its runs by then (of all) |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{r['id']}` | {r['fixed']} | {r['staged']}"
              f"{'' if r['agree'] else ' (differs)'} | {r['look']} | {r['runs']} "
              f"({r['runs_fixed']}) |" for r in table.to_dict("records")]
    lines.append(f"\nthe staged study would have trained {used} of the {recorded} recorded "
                 f"runs; {int(table['agree'].sum())} of {len(table)} verdicts agree")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------- the study's looks

def judge_look(staging: Staging, look: int, runs: pd.DataFrame, epochs: pd.DataFrame | None,
               previous: pd.DataFrame | None) -> pd.DataFrame:
    """The decisions after a look (0-based) of a running staged study: a claim decided at
    an earlier look (`previous`, that look's table) keeps its decision; an open one is
    judged on the runs recorded for it by now. `waits` names what an open claim waits
    for: the next look's seeds of its cells."""
    before = {} if previous is None else previous.set_index("id").to_dict("index")
    recorded, rows = recorded_runs(runs), []
    for cells in staging.claims:
        kept = before.get(cells.claim["id"])
        if kept is not None and kept["decision"] != "continue":
            rows.append({"id": cells.claim["id"], **kept})
            continue
        decision, seen = decide_at(cells, look, recorded, epochs)
        waits = ("" if decision.kind != "continue" else "look " + str(look + 2) + ": " + ", ".join(
            f"{c} {cells.seeds_at(c, look + 1)} seeds" for c in cells.compared))
        rows.append({"id": cells.claim["id"], "decision": decision.kind, "look": look + 1,
                     "runs": len(seen), "waits": waits, "reason": decision.reason})
    return pd.DataFrame(rows)


