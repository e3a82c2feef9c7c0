"""The paper's qualitative claims (paper/claims.yaml) judged on a runs table.

Each claim holds, fails, or cannot be judged (its cells were not run, its presupposition
failed at this scale, or there are too few seeds to estimate seed noise), with our values
beside the paper's. The claims file's format is in its header; its schema is
claims.schema.yaml beside this module.

Seed noise: a cell's standard error at one sigma_w is its seed standard deviation over
sqrt(n); a cell with one seed takes the standard deviation pooled over every (recipe,
sigma_w) cell of the runs table with two or more seeds, and the verdict says so. A spread
(max - min of k seed means) is "larger than seed noise" when it exceeds the 95% quantile of
the range of k means of pure noise (the studentized range); a difference of two values
when it exceeds 2 standard errors (the values' errors added in quadrature).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import yaml
from scipy.stats import studentized_range

from initmem.analysis import metrics
from initmem.analysis.scorecard import tally
from initmem.analysis.tables import environment
from initmem.errors import InputError
from initmem.plan.inputs import load_yaml
from initmem.vocabulary import FIVE_SIGMAS, GENERATED, SYNTHETIC_MARK

SCHEMA_PATH = Path(__file__).parent / "claims.schema.yaml"
VERDICTS = ("holds", "fails", "cannot be judged")
CONDITION = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>>=|<=|>>|~)\s*(?P<rhs>.+)$")
TERM = re.compile(r"([+-]?)\s*([A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:e-?\d+)?)")
TEST_VALUE = "test_acc_best"


class ClaimsError(InputError):
    """The claims file is malformed; the message names the claim and the key."""


@dataclass(frozen=True)
class Value:
    """A value of a claim with its seed noise: `se` for differences, `null95` the largest
    value seed noise alone reaches 95% of the time (spreads and deltas), `pooled` when
    single-seed cells borrowed the pooled standard deviation."""

    value: float
    se: float = math.nan
    null95: float = math.nan
    pooled: bool = False


class NotJudged(Exception):
    """A value cannot be computed on these runs; the message says why."""


@cache
def schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def read_claims(path: str | Path) -> list[dict[str, Any]]:
    """The claims of a file, checked against the schema and for consistent names."""
    try:
        data = load_yaml(path, "claims file")
    except InputError as err:
        raise ClaimsError(str(err)) from None
    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(data),
                    key=lambda e: list(map(str, e.path)))
    if errors:
        lines = [f"{'.'.join(map(str, e.absolute_path)) or 'claims'}: {e.message}"
                 for e in errors]
        raise ClaimsError(f"{path}: invalid claims file:\n  " + "\n  ".join(lines))
    for claim in data["claims"]:
        _check_names(claim)
    ids = [c["id"] for c in data["claims"]]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        raise ClaimsError(f"{path}: claim ids repeat: {repeated}")
    return data["claims"]


def _check_names(claim: dict[str, Any]) -> None:
    for name, spec in claim["values"].items():
        if spec["cell"] not in claim["cells"]:
            raise ClaimsError(f"claim {claim['id']}: value {name} uses cell {spec['cell']!r}; "
                              f"its cells are {', '.join(claim['cells'])}")
    for text in [*claim.get("requires", []), *claim["holds"]]:
        match = CONDITION.match(text)
        if match is None:
            raise ClaimsError(f"claim {claim['id']}: condition {text!r} is not 'a OP b' with "
                              "OP one of >=, <=, >>, ~")
        for _, term in TERM.findall(match["lhs"] + " " + match["rhs"]):
            if not _is_number(term) and term not in claim["values"]:
                raise ClaimsError(f"claim {claim['id']}: condition {text!r} names {term!r}; "
                                  f"its values are {', '.join(claim['values'])}")


def _is_number(term: str) -> bool:
    return term[0].isdigit()


# ------------------------------------------------------------------------------ cells

def select_cell(runs: pd.DataFrame, spec: dict[str, Any]) -> pd.DataFrame:
    """Runs whose columns match: a scalar, a list (any of), or {min, max} (inclusive);
    `clock` filters the same way on the runs' final clocks."""
    filters = {k: v for k, v in spec.items() if k != "clock"} | spec.get("clock", {})
    frame = runs
    for column, wanted in filters.items():
        if isinstance(wanted, dict):
            values = frame[column].astype(float)
            keep = values.ge(wanted.get("min", -math.inf)) & values.le(wanted.get("max", math.inf))
            frame = frame[keep.fillna(False).to_numpy()]
        else:
            frame = metrics.select(frame, **{column: wanted})
    return frame


def pooled_std(runs: pd.DataFrame) -> tuple[float, int]:
    """Per-run std of test accuracy (pp) pooled over the (recipe, sigma_w) cells with two
    or more seeds: sqrt of their df-weighted mean variance; and how many such cells."""
    groups = runs.dropna(subset=[TEST_VALUE]).groupby([*metrics.recipe_keys(), "sigma_w"],
                                                       dropna=False)[TEST_VALUE]
    stats = pd.DataFrame({"var": groups.var(ddof=1), "n": groups.count()})
    stats = stats[stats["n"] >= 2]
    if stats.empty:
        return math.nan, 0
    df = stats["n"] - 1
    return 100 * math.sqrt(float((stats["var"] * df).sum() / df.sum())), len(stats)


def _configurations(frame: pd.DataFrame) -> list[pd.DataFrame]:
    keys = metrics.recipe_keys()
    return [group for _, group in frame.groupby(keys, dropna=False, sort=True)]


def _sigma_means(frame: pd.DataFrame, column: str, sigmas: tuple[float, ...],
                 pooled: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """Seed means (in %) and their standard errors at each sigma_w of one configuration."""
    means, ses, borrowed = [], [], False
    absent = []
    for sigma in sigmas:
        values = 100 * metrics.select(frame, sigma_w=sigma)[column].dropna().astype(float)
        if values.empty:
            absent.append(f"{sigma:g}")
            continue
        if len(values) >= 2:
            se = float(values.std(ddof=1)) / math.sqrt(len(values))
        else:
            se, borrowed = pooled, True
        means.append(float(values.mean()))
        ses.append(se)
    if absent:
        raise NotJudged(f"no {column} at sigma_w {', '.join(absent)}")
    return np.array(means), np.array(ses), borrowed


def _range95(k: int) -> float:
    """95% quantile of the range of k standard normals."""
    return float(studentized_range.ppf(0.95, k, 1e6))


def spread_value(frame: pd.DataFrame, pooled: float,
                 sigmas: tuple[float, ...] = FIVE_SIGMAS) -> Value:
    means, ses, borrowed = _sigma_means(frame, TEST_VALUE, sigmas, pooled)
    hi, lo = int(np.argmax(means)), int(np.argmin(means))
    if not np.isfinite(ses).all():
        raise NotJudged("single-seed cells and no multi-seed cell to estimate seed noise from")
    rms = float(np.sqrt(np.mean(ses ** 2)))
    return Value(float(means[hi] - means[lo]), float(math.hypot(ses[hi], ses[lo])),
                 _range95(len(sigmas)) * rms, borrowed)


def _one(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    configurations = _configurations(frame)
    if len(configurations) != 1:
        raise ClaimsError(f"{what} needs one configuration; its cell selects "
                          f"{len(configurations)} (add keys that tell them apart)")
    return configurations[0]


def compute(spec: dict[str, Any], cell: pd.DataFrame, epochs: pd.DataFrame | None,
            pooled: float) -> Value:
    """One value of a claim (see the claims file's header for each `stat`)."""
    stat = spec["stat"]
    done = cell[cell["status"].ne("missing").fillna(False).to_numpy()]
    if done.empty:
        raise NotJudged("not run" if cell.empty else "no run has a record yet")
    if stat == "spread":
        return spread_value(_one(done, "spread"), pooled)
    if stat in ("max_spread", "min_spread"):
        spreads = [spread_value(c, pooled) for c in _configurations(done)]
        pick = max if stat == "max_spread" else min
        return pick(spreads, key=lambda v: v.value)
    if stat == "min_train_acc":
        means, _, _ = _sigma_means(_one(done, stat), "train_acc_last", FIVE_SIGMAS, pooled)
        return Value(float(means.min()))
    if stat == "interpolated":
        return Value(100 * float(done["tau_interp"].notna().mean()))
    if stat == "train_acc_at":
        means, _, _ = _sigma_means(_one(done, stat), "train_acc_last", (spec["sigma_w"],),
                                   pooled)
        return Value(float(means[0]))
    if stat == "abs_delta":
        means, ses, borrowed = _sigma_means(_one(done, stat), TEST_VALUE, (0.1, 2.5), pooled)
        se = float(math.hypot(*ses))
        return Value(float(abs(means[0] - means[1])), se, 1.96 * se, borrowed)
    if stat == "max_clock":
        return Value(float(done[spec["clock"]].max()))
    if stat == "beta_decay":
        return Value(_beta_decay(_one(done, stat), epochs))
    raise ClaimsError(f"stat {stat!r} is not allowed")  # the schema's enum prevents this


def _beta_decay(runs: pd.DataFrame, epochs: pd.DataFrame | None) -> float:
    """Decades |beta(t)| falls: log10 of its peak over the first 10% of epochs over its
    median over the last 10% (the macros' beta decades)."""
    if epochs is None:
        raise NotJudged("|beta(t)| needs the epochs table (--epochs)")
    history = epochs[epochs["run_id"].isin(set(runs["run_id"]))]
    beta = metrics.beta(history).dropna(subset=["abs_beta"]).sort_values("epoch")
    if len(beta) < 2:
        raise NotJudged("fewer than two epochs with |beta(t)|")
    tenth = max(1, len(beta) // 10)
    first, last = beta["abs_beta"].head(tenth).max(), beta["abs_beta"].tail(tenth).median()
    return float(math.log10(first / last))


# ------------------------------------------------------------------------- conditions

def _expression(text: str, values: dict[str, Value]) -> tuple[float, float, Value | None]:
    """(value, standard error, the single Value when the expression is one name)."""
    terms = TERM.findall(text)
    total, variance, single = 0.0, 0.0, None
    for sign, term in terms:
        factor = -1.0 if sign == "-" else 1.0
        if _is_number(term):
            total += factor * float(term)
            continue
        v = values[term]
        total += factor * v.value
        variance += v.se ** 2
        single = v if len(terms) == 1 else None
    return total, math.sqrt(variance), single


def judge(text: str, values: dict[str, Value]) -> tuple[bool, str]:
    """Whether one condition holds, and the numbers that decided it."""
    match = CONDITION.match(text)
    lhs, lhs_se, single = _expression(match["lhs"], values)
    rhs, rhs_se, _ = _expression(match["rhs"], values)
    op, zero = match["op"], match["rhs"].strip() == "0"
    if op == ">=":
        return lhs >= rhs, f"{lhs:.3g} >= {rhs:.3g}"
    if op == "<=":
        return lhs <= rhs, f"{lhs:.3g} <= {rhs:.3g}"
    if zero and single is not None and math.isfinite(single.null95):
        bound = single.null95  # a spread or delta against what noise alone gives
    else:
        bound = 2 * math.hypot(lhs_se, rhs_se)
    if not math.isfinite(bound):
        raise NotJudged(f"no seed noise for {text!r}")
    if op == ">>":
        return lhs - rhs > bound, f"{lhs - rhs:.3g} > {bound:.2g} (noise)"
    return abs(lhs - rhs) <= bound, f"|{lhs - rhs:.3g}| <= {bound:.2g} (noise)"


@dataclass
class Verdict:
    claim: dict[str, Any]
    verdict: str
    reason: str
    values: dict[str, Value]

    def row(self) -> dict[str, Any]:
        paper = self.claim.get("paper", {})
        shown = "; ".join(f"{n} = {_fmt(v.value)}" + (f" (paper {_fmt(paper[n])})"
                                                       if n in paper else "")
                          for n, v in self.values.items())
        return {"id": self.claim["id"], "section": self.claim["section"],
                "verdict": self.verdict, "reason": self.reason, "values": shown,
                "paper": "; ".join(f"{n} = {_fmt(v)}" for n, v in paper.items()),
                "holds_if": "; ".join(self.claim["holds"]),
                **{f"ours.{n}": v.value for n, v in self.values.items()}}


def _fmt(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def evaluate(claim: dict[str, Any], runs: pd.DataFrame, epochs: pd.DataFrame | None,
             pooled: tuple[float, int]) -> Verdict:
    values, missing = {}, []
    for name, spec in claim["values"].items():
        try:
            values[name] = compute(spec, select_cell(runs, claim["cells"][spec["cell"]]),
                                   epochs, pooled[0])
        except NotJudged as why:
            missing.append(f"{name}: {why}")
    if missing:
        return Verdict(claim, "cannot be judged", "; ".join(missing), values)
    borrowed = [n for n, v in values.items() if v.pooled]
    note = (f" (seed noise of {', '.join(borrowed)} pooled from {pooled[1]} multi-seed cells)"
            if borrowed else "")
    try:
        for text in claim.get("requires", []):
            ok, numbers = judge(text, values)
            if not ok:
                return Verdict(claim, "cannot be judged",
                               f"presupposition {text} fails at this scale: {numbers}", values)
        results = [(text, *judge(text, values)) for text in claim["holds"]]
    except NotJudged as why:
        return Verdict(claim, "cannot be judged", str(why), values)
    failed = [f"{text}: {numbers}" for text, ok, numbers in results if not ok]
    if failed:
        return Verdict(claim, "fails", "not " + "; not ".join(failed) + note, values)
    return Verdict(claim, "holds", "; ".join(n for _, _, n in results) + note, values)


def judge_all(claims: list[dict[str, Any]], runs: pd.DataFrame,
              epochs: pd.DataFrame | None) -> pd.DataFrame:
    pooled = pooled_std(runs)
    return pd.DataFrame([evaluate(c, runs, epochs, pooled).row() for c in claims])


# ------------------------------------------------------------------------------ output

def render_tex(table: pd.DataFrame, synthetic: bool) -> str:
    return environment().get_template("claims.tex.j2").render(
        rows=table.to_dict("records"), synthetic=synthetic, synthetic_mark=SYNTHETIC_MARK,
        counts={v: int((table["verdict"] == v).sum()) for v in VERDICTS})


def render_markdown(table: pd.DataFrame) -> str:
    """The claims as a Markdown table (claim, section, ours with the paper's, verdict and
    the comparison or the reason it cannot be judged)."""
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")

    lines = ["| claim | section | ours (paper) | verdict | why |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{r['id']}` | {r['section']} | {cell(r['values'])} | **{r['verdict']}** | "
              f"{cell(r['reason'])} |" for r in table.to_dict("records")]
    return "\n".join(lines) + "\n"


def write_claims(runs_path: str | Path, epochs_path: str | Path | None,
                 claims_path: str | Path, out_csv: str | Path, out_tex: str | Path,
                 out_md: str | Path | None = None) -> pd.DataFrame:
    runs = pd.read_parquet(runs_path)
    epochs = None
    if epochs_path is not None:
        epochs = pd.read_parquet(epochs_path, columns=[*metrics.recipe_keys(), "run_id",
                                                       "epoch", "sigma_w", "val_acc"])
    table = judge_all(read_claims(claims_path), runs, epochs)
    for path in (out_csv, out_tex):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_csv, index=False)
    synthetic = bool(runs["record_source"].astype("string").eq(GENERATED).any())
    Path(out_tex).write_text(render_tex(table, synthetic))
    if out_md is not None:
        Path(out_md).write_text(render_markdown(table))
    return table


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, help="results/aggregate/runs.parquet")
    parser.add_argument("--epochs", help="results/aggregate/epochs.parquet (|beta(t)|)")
    parser.add_argument("--claims", default="paper/claims.yaml", help="the claims file")
    parser.add_argument("--out-csv", required=True, help="one row per claim (claims.csv)")
    parser.add_argument("--out-tex", required=True, help="the claims table (claims.tex)")
    parser.add_argument("--out-md", help="also as a Markdown table (for a README)")


def main(args: argparse.Namespace) -> int:
    table = write_claims(args.runs, args.epochs, args.claims, args.out_csv, args.out_tex,
                         args.out_md)
    print(tally(table["verdict"], VERDICTS, "claims"))
    return 0
