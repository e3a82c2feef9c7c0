"""The paper's qualitative claims (paper/claims.yaml) judged on one or more runs tables.

A claim is judged in three steps:
1. Its values are computed on its cells (a spread, a seed mean, ...) with their seed noise
   (initmem.analysis.inference); a cell that was not run makes it "cannot be judged
   (not run)".
2. Its gates check the presuppositions per compared cell (initmem.analysis.gates): trained
   as the sentence presupposes, a valid evaluation, the mechanism's clock in the paper's
   regime. A failed gate: "cannot be judged (out of regime)", naming the gate, the cell and
   the numbers.
3. Each condition of `holds` is tested; Holm's correction within the claim:
   holds      every condition's one-sided test passes at 5% (Holm-adjusted p): its
              one-sided 95% bound lies on the claimed side (an equivalence: Schuirmann's
              TOST, its 90% interval inside the margin); spreads compared by the
              bias-aware bootstrap of initmem.analysis.spread_gap
   fails      some condition's one-sided bound (Bonferroni level) excludes the claimed
              effect: below half the paper's effect, or wholly outside a margin
   cannot be judged (underpowered), otherwise: the interval covers both, with the seeds
              per cell that would separate the paper's effect from zero at this noise.
A gated claim also quotes what its conditions alone would say, marked as not a verdict.
Apart from the verdict (direction), initmem.analysis.magnitude says how large our values
are against the paper's. Several archives of one config are judged each; a claim whose
verdicts differ is marked "not robust". The claims file's format is in its header; its
schema is plan/schemas/claims.schema.yaml (initmem.plan.claims_file reads it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from initmem.analysis import gates, inference, magnitude, metrics, spread_gap
from initmem.analysis.inference import ALPHA, Estimate
from initmem.analysis.tables import environment
from initmem.markup import md_escape
from initmem.plan.cells import recipe_keys, select_cell
from initmem.plan.claims_file import CONDITION, TERM, ClaimsError, is_number, read_claims
from initmem.vocabulary import FIVE_SIGMAS, MISSING, SYNTHETIC_MARK, generated, sigma_w_key

VERDICTS = ("holds", "fails", "cannot be judged")
TEST_VALUE = "test_acc_best"


class NotJudged(Exception):
    """A value cannot be computed on these runs; the message says why."""


# ------------------------------------------------------------------------------ cells


def done_runs(cell: pd.DataFrame) -> pd.DataFrame:
    """The cell's runs with a record; NotJudged when there are none."""
    done = cell[cell["status"].ne(MISSING).fillna(False).to_numpy()]
    if done.empty:
        raise NotJudged("not run" if cell.empty else "no run has a record yet")
    return done


def _configurations(frame: pd.DataFrame) -> list[pd.DataFrame]:
    return [group for _, group in frame.groupby(recipe_keys(), dropna=False, sort=True)]


def _one(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    configurations = _configurations(frame)
    if len(configurations) != 1:
        raise ClaimsError(f"{what} needs one configuration; its cell selects "
                          f"{len(configurations)} (add keys that tell them apart)")
    return configurations[0]


def _by_sigma(frame: pd.DataFrame, column: str, sigmas: tuple[float, ...]
              ) -> tuple[dict[float, np.ndarray], dict[float, np.ndarray]]:
    """Each sigma_w's values (in %) and seeds; NotJudged names the sigma_w without runs."""
    frame = frame.dropna(subset=[column])
    sigma_w = frame["sigma_w"].to_numpy(float)
    value, seed = 100 * frame[column].to_numpy(float), frame["seed"].to_numpy(int)
    values, seeds, absent = {}, {}, []
    for sigma in sigmas:
        at = sigma_w == sigma_w_key(sigma)
        if not at.any():
            absent.append(f"{sigma:g}")
        values[sigma], seeds[sigma] = value[at], seed[at]
    if absent:
        raise NotJudged(f"no {column} at sigma_w {', '.join(absent)}")
    return values, seeds


def spread_of(configuration: pd.DataFrame) -> Estimate:
    """max - min over the five sigma_w of a configuration's seed-mean best test accuracy (pp)."""
    values, seeds = _by_sigma(configuration, TEST_VALUE, FIVE_SIGMAS)
    return inference.spread(values, seeds)


def delta_of(configuration: pd.DataFrame) -> Estimate:
    """mean test accuracy at sigma_w 0.1 minus at 2.5 (pp), paired by seed when it can be."""
    values, seeds = _by_sigma(configuration, TEST_VALUE, (0.1, 2.5))
    low, high = values[0.1], values[2.5]
    if sorted(seeds[0.1]) == sorted(seeds[2.5]):
        differences = low[np.argsort(seeds[0.1])] - high[np.argsort(seeds[2.5])]
        return replace(inference.mean(differences), paired=True)
    return inference.combine([(1.0, inference.mean(low)), (-1.0, inference.mean(high))])


def compute(spec: dict[str, Any], cell: pd.DataFrame, epochs: pd.DataFrame | None) -> Estimate:
    """One value of a claim (see the claims file's header for each `stat`)."""
    stat, done = spec["stat"], done_runs(cell)
    if stat == "spread":
        return spread_of(_one(done, "spread"))
    if stat in ("max_spread", "min_spread"):
        spreads = [spread_of(c) for c in _configurations(done)]
        return (max if stat == "max_spread" else min)(spreads, key=lambda e: e.value)
    if stat == "train_acc_at":
        values, _ = _by_sigma(_one(done, stat), "train_acc_last", (spec["sigma_w"],))
        return inference.mean(values[spec["sigma_w"]])
    if stat == "delta":
        return delta_of(_one(done, stat))
    if stat == "max_clock":
        return inference.exact(float(done[spec["clock"]].max()))
    if stat == "beta_decay":
        return inference.mean(beta_decays(_one(done, stat), epochs))
    raise ClaimsError(f"stat {stat!r} is not allowed")  # the schema's enum prevents this


def beta_window(history: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The first and last tenth of a configuration's epochs (the |beta(t)| windows)."""
    epochs = np.sort(history["epoch"].unique())
    tenth = max(1, len(epochs) // 10)
    return (history[history["epoch"].isin(epochs[:tenth])],
            history[history["epoch"].isin(epochs[-tenth:])])


def beta_decays(runs: pd.DataFrame, epochs: pd.DataFrame | None) -> np.ndarray:
    """Per seed, decades |beta(t)| = |d ValAcc / d sigma_w| falls: log10 of its peak over
    the first 10% of epochs over its median over the last 10% (the macros' decades)."""
    history = _history(runs, epochs)
    decays = []
    for _, seed_history in history.groupby("seed"):
        beta = metrics.beta(seed_history).dropna(subset=["abs_beta"])
        if beta["epoch"].nunique() >= 2:
            first, last = beta_window(beta)
            decays.append(math.log10(first["abs_beta"].max() / last["abs_beta"].median()))
    if not decays:
        raise NotJudged("fewer than two epochs with |beta(t)|")
    return np.array(decays)


def _history(runs: pd.DataFrame, epochs: pd.DataFrame | None) -> pd.DataFrame:
    if epochs is None:
        raise NotJudged("|beta(t)| needs the epochs table (--epochs)")
    return epochs[epochs["run_id"].isin(set(runs["run_id"]))]


# ------------------------------------------------------------------------------ gates

def check_gates(claim: dict[str, Any], cells: dict[str, pd.DataFrame],
                epochs: pd.DataFrame | None) -> list[gates.Gate]:
    """Every gate of the claim on its compared cells (`cells`: each cell's runs; cells that
    were not run are left to the values, which say so)."""
    spec, results = claim.get("gates", {}), []
    done = {name: _done_or_none(frame) for name, frame in cells.items()}
    for name in dict.fromkeys(v["cell"] for v in claim["values"].values()):
        if done[name] is not None:
            results += gates.evaluation(name, done[name])
    for value in claim["values"].values():
        frame = done[value["cell"]]
        if value["stat"] == "beta_decay" and frame is not None and epochs is not None:
            first, _ = beta_window(_history(frame, epochs))
            results.append(gates.evaluation_over_epochs(value["cell"], first))
    for name, thresholds in spec.get("trained", {}).items():
        if done[name] is not None:
            results += gates.trained(name, done[name], thresholds)
    for clock in spec.get("clock", []):
        if done[clock["cell"]] is not None:
            results.append(gates.clock(clock["cell"], done[clock["cell"]], clock))
    return results


def _done_or_none(cell: pd.DataFrame) -> pd.DataFrame | None:
    try:
        return done_runs(cell)
    except NotJudged:
        return None


# ------------------------------------------------------------------------- conditions

@dataclass
class Condition:
    """One condition of `holds`, tested: the estimate of its named side (sum c_i value_i;
    for ~, lhs - rhs with the constants), the threshold or margin it is held to, its
    test, and the paper's value of the same quantity (for refutation and planning)."""

    text: str
    op: str
    terms: list[tuple[float, str]]
    offset: float  # constants moved out of an equivalence (~)
    estimate: Estimate
    threshold: float
    test: inference.Test
    effect: float | None  # the paper's value of the same quantity, where it gives every term
    level: float = 1 - ALPHA
    p_holm: float = math.nan


def _terms(text: str, sign: float) -> list[tuple[float, str]]:
    return [(-sign if s == "-" else sign, t) for s, t in TERM.findall(text)]


def condition_names(text: str) -> list[str]:
    """The values a condition reads (its named terms, either side)."""
    match = CONDITION.match(text)
    return [t for _, t in _terms(match["lhs"], 1.0) + _terms(match["rhs"], -1.0)
            if not is_number(t)]


def test_condition(text: str, values: dict[str, Estimate], paper: dict[str, float],
                   level: float) -> Condition:
    """lhs OP rhs as sum c_i value_i against a threshold (the constants moved right):
    >> and >= ask for more (>>: refuted below half the paper's effect), <= for less, and
    ~ for lhs - rhs within the margin (two one-sided tests)."""
    match = CONDITION.match(text)
    terms = _terms(match["lhs"], 1.0) + _terms(match["rhs"], -1.0)
    threshold = -sum(c * float(t) for c, t in terms if is_number(t))
    named = [(c, t) for c, t in terms if not is_number(t)]
    estimate = inference.combine([(c, values[t]) for c, t in named])
    effect = (sum(c * paper[t] for c, t in named) - threshold
              if all(t in paper for _, t in named) else None)
    op, offset = match["op"], 0.0
    compared = [(c, values[t]) for c, t in named]
    if op == "~":
        offset = threshold
        estimate = replace(estimate, value=estimate.value - offset)
        compared.append((1.0, inference.exact(-offset)))
        threshold = float(match["margin"])
    # A comparison of spreads is tested by the bias-aware bootstrap, anything else by t
    # (or Tukey): both modules give the same three tests.
    tests, subject = ((spread_gap, compared) if spread_gap.applies(compared)
                      else (inference, estimate))
    if op == "~":
        test = tests.test_equivalent(subject, threshold, level)
    elif op == "<=":
        test = tests.test_less(subject, threshold, level)
    else:
        refute = threshold + effect / 2 if op == ">>" and effect and effect > 0 else threshold
        test = tests.test_greater(subject, threshold, refute, level)
    return Condition(text, op, named, offset, estimate, threshold, test, effect, level)


def plan_seeds(condition: Condition, values: dict[str, Estimate], paper: dict[str, float],
               planning: tuple[float, float], level: float) -> tuple[int | None, str]:
    """Seeds per cell at which the condition would hold in 80% of studies if the paper's
    values were true, at the 80% upper confidence limit of this study's seed noise (so that
    a low draw of the noise does not promise too few seeds); and what the plan rests on."""
    plans, borrowed = [], False
    for c, name in condition.terms:
        e = values[name]
        if e.kind != "exact" and name not in paper:
            return None, f"the paper gives no value of {name} to plan for"
        if e.kind != "exact" and not e.known:
            if not math.isfinite(planning[0]):
                return None, "no multi-seed cell to estimate seed noise from"
            e, borrowed = replace(e, sigma=planning[0], df=planning[1]), True
        if e.kind != "exact":
            e = replace(e, sigma=inference.upper_sigma(e.sigma, e.df))
        plans.append(inference.Plan(c, e, paper.get(name, e.value)))
    if condition.offset:
        plans.append(inference.Plan(1.0, inference.exact(-condition.offset), -condition.offset))
    single_spread = len(plans) == 1 and plans[0].template.kind == "spread"
    op = {">>": ">", ">=": ">", "<=": "<"}.get(condition.op, "<" if single_spread else "~")
    comparison = spread_gap.applies([(p.coefficient, p.template) for p in plans])
    seeds = inference.seeds_needed(plans, op, condition.threshold, level, rate=(
        spread_gap.holds_rate if comparison else inference.holds_rate))
    note = ("at the 80% upper confidence limit of the seed noise; for single-seed cells that "
            "of the study's multi-seed cells, for planning only" if borrowed else
            "at the 80% upper confidence limit of the seed noise measured here")
    return seeds, note


def planning_sigma(runs: pd.DataFrame) -> tuple[float, float]:
    """Per-run standard deviation of test accuracy (pp) pooled over the (recipe, sigma_w)
    cells with two or more seeds, and its degrees of freedom: used only to plan seeds for
    single-seed cells, never in a verdict."""
    groups = runs.dropna(subset=[TEST_VALUE]).groupby([*recipe_keys(), "sigma_w"],
                                                       dropna=False)[TEST_VALUE]
    cells = pd.DataFrame({"var": groups.var(ddof=1), "n": groups.count()})
    cells = cells[cells["n"] >= 2]
    if cells.empty:
        return math.nan, 0.0
    df = cells["n"] - 1
    return 100 * math.sqrt(float((cells["var"] * df).sum() / df.sum())), float(df.sum())


# --------------------------------------------------------------------------- verdicts

def gates_in_short(checked: list[gates.Gate]) -> str:
    """'evaluation: pass, trained: FAIL (sgd), clock: pass': each gate once, with the
    cells where it failed."""
    failed: dict[str, list[str]] = {}
    for g in checked:
        cells = failed.setdefault(g.name, [])
        if g.passed is False and g.cell not in cells:
            cells.append(g.cell)
    return ", ".join(f"{n}: FAIL ({', '.join(c)})" if c else f"{n}: pass"
                     for n, c in failed.items())


@dataclass
class Verdict:
    """A claim judged on one runs table: its verdict, kind and reason, values, gates, conditions."""
    claim: dict[str, Any]
    verdict: str
    kind: str  # holds | fails | not run | out of regime | underpowered
    reason: str
    values: dict[str, Estimate]
    gates: list[gates.Gate]
    conditions: list[Condition]
    seeds: int | None = None
    ungated: str = ""  # out of regime: the kind the conditions alone would give
    size: tuple[str, str] = ("", "")  # magnitude against the paper's: word, sentence

    def row(self) -> dict[str, Any]:
        """The verdict as a row of the claims table, with each value and its 95% interval."""
        paper = self.claim.get("paper", {})
        return {"id": self.claim["id"], "section": self.claim["section"],
                "verdict": self.verdict, "kind": self.kind, "reason": self.reason,
                "paper": "; ".join(f"{self.label(n)}: {_fmt(v)}" for n, v in paper.items()),
                "ours": "; ".join(f"{self.label(n)}: {_shown(e)}"
                                  for n, e in self.values.items()),
                "gates": "; ".join(g.text() for g in self.gates),
                "gates_in_short": gates_in_short(self.gates),
                "seeds_needed": self.seeds, "without_gates": self.ungated,
                "magnitude": self.size[0], "magnitude_why": self.size[1],
                **{f"ours.{n}": e.value for n, e in self.values.items()},
                **{f"ci_low.{n}": e.interval()[0] for n, e in self.values.items()},
                **{f"ci_high.{n}": e.interval()[1] for n, e in self.values.items()}}

    def label(self, name: str) -> str:
        """A value's name in the table: its `label`, else its name with spaces."""
        return self.claim["values"].get(name, {}).get("label", name.replace("_", " "))


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    x += 0.0  # no "-0"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def _shown(e: Estimate) -> str:
    """A value with its 95% interval, in words where it has none."""
    if e.kind == "exact":
        return _fmt(e.value)
    if not e.known:
        return f"{_fmt(e.value)} (one seed: no interval)"
    lo, hi = e.interval()
    return f"{_fmt(e.value)} [{_fmt(lo)}, {_fmt(hi)}]"


def observe(claim: dict[str, Any], runs: pd.DataFrame, epochs: pd.DataFrame | None
            ) -> tuple[dict[str, pd.DataFrame], dict[str, Estimate], list[str], list[gates.Gate]]:
    """A claim's cells on these runs, its values, why any cannot be computed, its gates."""
    cells = {name: select_cell(runs, spec) for name, spec in claim["cells"].items()}
    values, missing = {}, []
    for name, spec in claim["values"].items():
        try:
            values[name] = compute(spec, cells[spec["cell"]], epochs)
        except NotJudged as why:
            missing.append(f"{spec.get('label', name)}: {why}")
    return cells, values, missing, check_gates(claim, cells, epochs)


def judge_claim(claim: dict[str, Any], runs: pd.DataFrame, epochs: pd.DataFrame | None,
                planning: tuple[float, float] = (math.nan, 0.0)) -> Verdict:
    """A claim's verdict on these runs: not run when a value cannot be computed, out of regime
    when a gate fails (quoting what its conditions alone would say), else its conditions'.
    `planning` is the pooled seed noise (planning_sigma) that plans seeds when underpowered."""
    cells, values, missing, checked = observe(claim, runs, epochs)
    make = _maker(claim, values, checked)
    if missing:
        return make("not run", "Its runs are not all there: " + "; ".join(missing) + ".")
    judged = _judge_conditions(claim, values, planning, make)
    compared = pd.concat([done_runs(cells[n]) for n in
                          dict.fromkeys(v["cell"] for v in claim["values"].values())])
    judged.size = magnitude.statement(claim.get("paper", {}), values, compared,
                                      recipe_keys(), claim.get("paper_accuracy"),
                                      judged.label, _shown,
                                      {n: spec["stat"] for n, spec in claim["values"].items()})
    failed = [g for g in checked if g.passed is False]
    if failed:
        verdict = make("out of regime", "The paper's presuppositions do not hold here: "
                       + "; ".join(f"{g.name} ({g.cell}): {g.detail}" for g in failed) + ".")
        verdict.ungated, verdict.size = judged.kind, judged.size
        verdict.reason += (" Not a verdict, since the gate fails: without it the data would "
                           f"say \"{judged.reason}\"")
        return verdict
    return judged


def _judge_conditions(claim: dict[str, Any], values: dict[str, Estimate],
                      planning: tuple[float, float], make) -> Verdict:
    """The verdict the conditions give, Holm-corrected (gates aside)."""
    m, paper = len(claim["holds"]), claim.get("paper", {})
    conditions = [test_condition(t, values, paper, 1 - ALPHA / m) for t in claim["holds"]]
    for condition, p in zip(conditions, inference.holm([c.test.p for c in conditions]),
                            strict=True):
        condition.p_holm = p
    if all(c.p_holm <= ALPHA for c in conditions):
        return make("holds", " ".join(_phrase(c, values, claim) for c in conditions),
                    conditions)
    refuted = [c for c in conditions if c.test.refuted]
    if refuted:
        return make("fails", " ".join(_refutation(c, values, claim) for c in refuted),
                    conditions)
    open_ = [c for c in conditions if not c.p_holm <= ALPHA]
    plans = [plan_seeds(c, values, paper, planning, 1 - ALPHA / m) for c in open_]
    seeds = [s for s, _ in plans]
    need = max(seeds) if seeds and all(s is not None for s in seeds) else None
    advice = (f"About {need} seeds per cell would separate the paper's effect from no effect "
              f"({plans[0][1]})." if need else
              "No seed count up to 200 separates the paper's effect here ("
              + "; ".join(n for s, n in plans if s is None) + ").")
    text = " ".join(_phrase(c, values, claim) for c in open_) + " " + advice
    return make("underpowered", text, conditions, need)


def _maker(claim: dict[str, Any], values: dict[str, Estimate], checked: list[gates.Gate]):
    def make(kind: str, text: str, conditions: list[Condition] | None = None,
             seeds: int | None = None) -> Verdict:
        verdict = kind if kind in ("holds", "fails") else "cannot be judged"
        lead = {"holds": "Holds.", "fails": "Fails."}.get(kind, f"Cannot be judged ({kind}).")
        return Verdict(claim, verdict, kind, f"{lead} {text}", values, checked,
                       conditions or [], seeds)
    return make


def _expression(condition: Condition, claim: dict[str, Any]) -> str:
    labels = claim["values"]
    parts = []
    for c, name in condition.terms:
        label = labels[name].get("label", name.replace("_", " "))
        parts.append(("- " if c < 0 else "+ " if parts else "") + label)
    return " ".join(parts)


def _claimed(condition: Condition) -> str:
    t = _fmt(condition.threshold)
    return {">>": f"above {t}", ">=": f"at least {t}", "<=": f"below {t}"}.get(
        condition.op, f"within +-{t}")


def _bound_name(condition: Condition, level: float) -> str:
    """How a bound at `level` is read: Tukey's (a spread alone), the bias-aware bootstrap
    (spreads compared) or one-sided t."""
    method = condition.test.method
    return f"{'one-sided' if method == 't' else method} {100 * level:.3g}%"


def _test_words(condition: Condition) -> str:
    """The bound the decision reads and its p, named by convention."""
    lo, hi = condition.test.interval
    p = ("" if math.isnan(condition.test.p) else
         f"; p = {condition.test.p:.2g}, Holm p = {condition.p_holm:.2g}")
    if condition.op == "~" and condition.estimate.kind != "spread":
        method = "" if condition.test.method == "t" else f" ({condition.test.method})"
        return f"90% CI{method} {_fmt(lo)} to {_fmt(hi)}, two one-sided tests{p}"
    side, bound = ("upper", hi) if math.isinf(lo) else ("lower", lo)
    return f"{_bound_name(condition, 1 - ALPHA)} {side} bound {_fmt(bound)}{p}"


def _phrase(condition: Condition, values: dict[str, Estimate], claim: dict[str, Any]) -> str:
    words = ("one seed, so no interval" if not condition.estimate.known
             else _test_words(condition))
    return (f"{_expression(condition, claim)} = {_fmt(condition.estimate.value)} "
            f"({words}); claimed {_claimed(condition)}.")


def _refutation(condition: Condition, values: dict[str, Estimate], claim: dict[str, Any]) -> str:
    what = (f"half the paper's {_fmt(condition.effect)}"
            if condition.op == ">>" and condition.effect and condition.effect > 0
            else _claimed(condition))
    side = {">>": "upper", ">=": "upper", "<=": "lower"}.get(
        condition.op, "lower" if condition.test.limit > 0 else "upper")
    return (f"{_expression(condition, claim)} = {_fmt(condition.estimate.value)}; its "
            f"{_bound_name(condition, condition.level)} {side} bound "
            f"{_fmt(condition.test.limit)} (Bonferroni over the claim's conditions) "
            f"excludes {what}.")


def judge_all(claims: list[dict[str, Any]], runs: pd.DataFrame,
              epochs: pd.DataFrame | None) -> pd.DataFrame:
    """Each claim's verdict on one runs table, as the claims table."""
    sigma = planning_sigma(runs)
    return pd.DataFrame([judge_claim(c, runs, epochs, sigma).row() for c in claims])


def robustness(tables: dict[str, pd.DataFrame]) -> pd.Series:
    """Per claim, whether the verdicts of several archives agree. An archive without the
    claim's runs (a rerun of some cells only) does not vote: it was not rerun there."""
    verdicts = pd.DataFrame({label: t.set_index("id")["verdict"] for label, t in tables.items()})
    ran = pd.DataFrame({label: t.set_index("id")["kind"] != "not run"
                        for label, t in tables.items()})
    if len(tables) == 1:
        return pd.Series("one archive", index=verdicts.index)

    def say(claim: str) -> str:
        row = verdicts.loc[claim][ran.loc[claim]]
        if len(row) < 2:
            return "not rerun: its runs are in one archive only" if len(row) else "not run"
        if row.nunique() == 1:
            return f"robust: the same in {len(row)} archives"
        return "not robust: " + ", ".join(f"{v} in {k}" for k, v in row.items())
    return pd.Series([say(c) for c in verdicts.index], index=verdicts.index)


# ------------------------------------------------------------------------------ output

DISPLAY = ["id", "section", "paper", "ours", "magnitude", "magnitude_why", "gates", "verdict",
           "kind", "reason", "seeds_needed", "without_gates"]


def value_rows(verdicts: list[Verdict]) -> pd.DataFrame:
    """Every value of every claim with its 95% interval and noise (claims_values.csv)."""
    rows = []
    for v in verdicts:
        for name, e in v.values.items():
            lo, hi = e.interval()
            rows.append({"id": v.claim["id"], "value": name, "label": v.label(name),
                         "estimate": e.value, "ci_low": lo, "ci_high": hi, "kind": e.kind,
                         "seed_sd": e.sigma, "seeds": e.n, "df": e.df, "paired": e.paired,
                         "paper": v.claim.get("paper", {}).get(name)})
    return pd.DataFrame(rows)


def render_tex(table: pd.DataFrame, synthetic: bool) -> str:
    """The claims table as the paper's LaTeX table, marked when the runs are synthetic."""
    rows = table.to_dict("records")
    return environment().get_template("claims.tex.j2").render(
        rows=rows, synthetic=synthetic, synthetic_mark=SYNTHETIC_MARK,
        counts={v: int((table["verdict"] == v).sum()) for v in VERDICTS},
        several="robustness" in table)


def render_markdown(table: pd.DataFrame) -> str:
    """The claims as a Markdown table: the paper's numbers, ours with 95% intervals, their
    size against the paper's, the gates, the verdict and its reason in a sentence."""
    robust = "robustness" in table
    head = ("| claim | paper | ours [95% CI] | size against the paper's | gates | verdict | "
            "why |" + (" robustness |" if robust else ""))
    lines = [head, "|" + " --- |" * (8 if robust else 7)]
    for r in table.to_dict("records"):
        size = f"**{r['magnitude']}**: {md_escape(r['magnitude_why'])}" if r["magnitude"] else ""
        line = (f"| `{r['id']}` ({md_escape(r['section'])}) | {md_escape(r['paper'])} | "
                f"{md_escape(r['ours'])} | {size} | {md_escape(r['gates_in_short'])} | "
                f"**{r['verdict']}** | {md_escape(r['reason'])} |")
        lines.append(line + (f" {md_escape(r['robustness'])} |" if robust else ""))
    return "\n".join(lines) + "\n"


@dataclass
class Source:
    """One runs table (with its epochs) to judge, and its name in the robustness column."""

    label: str
    runs: pd.DataFrame
    epochs: pd.DataFrame | None


def judge_sources(claims: list[dict[str, Any]], sources: list[Source]
                  ) -> tuple[pd.DataFrame, list[Verdict]]:
    """The first source's verdicts, with the agreement of all of them per claim."""
    tables, first = {}, []
    for source in sources:
        sigma = planning_sigma(source.runs)
        verdicts = [judge_claim(c, source.runs, source.epochs, sigma) for c in claims]
        tables[source.label] = pd.DataFrame([v.row() for v in verdicts])
        first = first or verdicts
    table = tables[sources[0].label]
    if len(sources) > 1:
        table = table.assign(robustness=robustness(tables).reindex(table["id"]).to_numpy())
    return table, first


def write_claims(sources: list[Source], claims_path: str | Path,
                 out_csv: str | Path | None = None, out_tex: str | Path | None = None,
                 out_md: str | Path | None = None,
                 out_values: str | Path | None = None) -> pd.DataFrame:
    """The claims judged on `sources`, written to each output named (none: nothing)."""
    table, verdicts = judge_sources(read_claims(claims_path), sources)
    for path in filter(None, (out_csv, out_tex, out_md, out_values)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if out_csv is not None:
        table[[c for c in [*DISPLAY, "robustness"] if c in table]].to_csv(out_csv, index=False)
    if out_tex is not None:
        synthetic = any(generated(s.runs).any() for s in sources)
        Path(out_tex).write_text(render_tex(table, synthetic))
    if out_md is not None:
        Path(out_md).write_text(render_markdown(table))
    if out_values is not None:
        value_rows(verdicts).to_csv(out_values, index=False)
    return table
