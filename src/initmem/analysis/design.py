"""`initmem claims --plan`: what a config can judge, decided before anything is trained.

For each claim of the claims file, on the config's expected runs:
- its cells: which of them the config runs;
- its clock gates, on the clocks the recipes reach (computed from the schedule exactly as
  the records sum them), against the paper's (initmem.analysis.gates.clock);
- Keras' BatchNorm gate: the updates a run gets, against the updates the moving variance
  needs to come within BN_VAR_FACTOR of the batch variance from BN_START_RATIO off at
  momentum 0.99 (the laptop study measured 1,062x after 60 updates at sigma_w 0.1);
- its seeds: how many each compared cell runs, against how many the engine's power
  analysis asks for at the paper's effect and a planning seed noise (measured on a
  reference runs table's same cell, or given);
- its cost: the device-hours of the packs that hold its runs (the config's throughput
  model: a CPU CSV gives CPU hours, else the built-in GPU estimate).
The trained gate can only be seen after training; the plan says so.
A cell the config does not run is planned at the config's scale: the reference config's
(the paper's) same cell with the config's data and width (SCALE_FIELDS), so the plan says
why a small study leaves it out (its clock would fall short, its BatchNorm would lag) or
that it could run it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from initmem.analysis import claims as judge
from initmem.analysis import gates, inference
from initmem.analysis.inference import ALPHA, Estimate
from initmem.markup import md_escape
from initmem.plan import cost
from initmem.plan.architectures import BATCHNORM_ARCHS
from initmem.plan.cells import planned_table
from initmem.plan.grid import expand_runs, pack_runs
from initmem.plan.spec import Pack, Run, SpecError
from initmem.vocabulary import FIVE_SIGMAS

BN_MOMENTUM_DECAY = 0.99  # Keras BatchNormalization momentum
BN_START_RATIO = 1000.0
BN_UPDATES = math.ceil(math.log(gates.BN_VAR_FACTOR / BN_START_RATIO)
                       / math.log(BN_MOMENTUM_DECAY))
# What sets a study's scale, as against its experiments (config `common`).
SCALE_FIELDS = ("dataset", "width", "train_subset", "eval_subset", "best_test_subset")
# What a config can do with a claim it runs in regime, as the plan, README and docs say
# it: hold it with 80% power if the paper is right; only refute it (its seeds are too few
# to confirm the paper's effect, but enough to rule it out if it is absent); or not plan
# it (the paper gives no value to plan for).
OUTCOMES = ("confirmable with power", "refutable only", "cannot be planned")
# Seed noise of |beta(t)|'s decades where no reference measures it: the laptop study
# measured 0.05 (SGD) to 0.13 (Adam) decades between seeds at b = 16.
DECAY_NOISE = 0.2


@dataclass
class Study:
    """Runs as the plan sees them, derived once: their table (as planned_runs) and their
    packs, priced by an execution's throughput model."""

    table: pd.DataFrame
    packs: list[Pack]
    throughput: cost.Throughput

    @classmethod
    def of(cls, runs: list[Run], execution: dict[str, Any]) -> Study:
        """The study of these runs, packed and priced as `execution` says."""
        return cls(planned_table(runs), list(pack_runs(runs, execution["pack_size"]).values()),
                   cost.throughput(execution))

    @classmethod
    def at_scale(cls, config: dict[str, Any], reference: dict[str, Any]) -> Study:
        """The reference config's (the paper's) runs at the config's scale: its common data
        and width fields replace theirs (a run impossible there, b above its images, is
        left out); packed and priced by the config's execution."""
        scale = {k: config["common"][k] for k in SCALE_FIELDS if k in config["common"]}
        runs = []
        for run in expand_runs(reference):
            try:
                runs.append(Run(dataclasses.replace(run.recipe, **scale), run.sigma_w,
                                run.seed))
            except SpecError:
                continue
        return cls.of(runs, config["execution"])

    def hours(self, cells: list[pd.DataFrame]) -> float:
        """Device-hours of the packs that hold any run of these cells."""
        run_ids = set().union(*(set(cell["run_id"]) for cell in cells))
        return cost.gpu_hours([p for p in self.packs if any(r.run_id in run_ids for r in p.runs)],
                              self.throughput)


@dataclass
class ClaimPlan:
    """What a config can do with one claim: the compared cells it lacks, the clock and BatchNorm
    obstacles, the seeds each cell runs against those it needs, and the device-hours."""
    claim: dict[str, Any]
    missing: list[str]
    clock: list[gates.Gate]
    batchnorm: list[str]
    seeds: dict[str, tuple[int, int | None]]  # cell -> (seeds run, seeds needed)
    hours: float  # of the config's runs; with stand-ins, theirs at the config's scale
    unplanned: list[str]  # why a condition has no seed count (no paper value to plan for)
    scaled: list[str]  # the missing cells the reference's runs at this scale stand in for

    @property
    def outcome(self) -> str:
        """The plan in words: not in the config, out of regime, or one of OUTCOMES, with why."""
        out = [g for g in self.clock if g.passed is False]
        obstacles = "; ".join([*(f"{g.cell}: {g.detail}" for g in out), *self.batchnorm])
        if self.missing:
            text = "cannot: not in the config (" + ", ".join(self.missing) + ")"
            if len(self.scaled) == len(self.missing):
                text += ("; at its scale out of regime: " + obstacles if obstacles else
                         "; at its scale its clocks and BatchNorm updates would suffice "
                         f"({self.seeds_text()}; {self.hours:.3g} device-hours for "
                         f"{', '.join(self.scaled)} with the reference's seeds)")
            return text
        if obstacles:
            return "out of regime: " + obstacles
        short = {c: s for c, s in self.seeds.items() if s[1] is None or s[0] < s[1]}
        if self.unplanned:
            return f"{OUTCOMES[2]}: " + "; ".join(self.unplanned)
        if short:
            return f"{OUTCOMES[1]}: " + ", ".join(
                f"{c} runs {have} seeds, confirming needs "
                f"{'more than 200' if need is None else need}" for c, (have, need) in short.items())
        return (f"{OUTCOMES[0]}: its clocks, BatchNorm updates and seeds suffice (trained: "
                "seen after training)")

    def seeds_text(self) -> str:
        """Each compared cell's seeds, run of needed ('>200': no count up to 200 is enough)."""
        return "; ".join(f"{c}: {h} of {'>200' if n is None else n}"
                         for c, (h, n) in self.seeds.items()) or "seeds: unplanned"

    def row(self) -> dict[str, Any]:
        """The claim's row of the plan table."""
        return {"id": self.claim["id"], "plan": self.outcome,
                "clock": "; ".join(g.text() for g in self.clock),
                "batchnorm": "; ".join(self.batchnorm) or "enough updates",
                "seeds": self.seeds_text() if self.seeds else "",
                "device_hours": round(self.hours, 2)}


def plan_claim(claim: dict[str, Any], study: Study, noise: pd.DataFrame | None,
               noise_sd: float, scaled: Study | None = None) -> ClaimPlan:
    """The claim on the study's runs; the cells it lacks stand in from `scaled`."""
    cells = {name: judge.select_cell(study.table, spec) for name, spec in claim["cells"].items()}
    compared = list(dict.fromkeys(v["cell"] for v in claim["values"].values()))
    missing = [c for c in compared if cells[c].empty]
    stand_ins = {} if scaled is None else {
        c: cell for c in missing
        if not (cell := judge.select_cell(scaled.table, claim["cells"][c])).empty}
    complete = len(stand_ins) == len(missing)
    hours = (scaled.hours(list(stand_ins.values())) if missing and complete
             else study.hours([cells[c] for c in compared]))
    cells.update(stand_ins)
    clock = [gates.clock(c["cell"], cells[c["cell"]], c)
             for c in claim.get("gates", {}).get("clock", []) if not cells[c["cell"]].empty]
    batchnorm = [f"{c}: {int(cells[c]['updates'].min())} updates, BatchNorm needs "
                 f"{BN_UPDATES}" for c in compared if not cells[c].empty
                 and cells[c]["arch"].isin(BATCHNORM_ARCHS).any()
                 and cells[c]["updates"].min() < BN_UPDATES]
    seeds, unplanned = _seeds(claim, cells, noise, noise_sd) if complete else ({}, [])
    return ClaimPlan(claim, missing, clock, batchnorm, seeds, hours, unplanned,
                     list(stand_ins))


def _seeds(claim: dict[str, Any], cells: dict[str, pd.DataFrame], noise: pd.DataFrame | None,
           noise_sd: float) -> tuple[dict[str, tuple[int, int | None]], list[str]]:
    """Per compared cell: the seeds it runs, and the most any condition on it needs; and
    the conditions that cannot be planned, with why."""
    values = {name: _template(spec, cells[spec["cell"]], noise, claim, noise_sd)
              for name, spec in claim["values"].items()}
    m = len(claim["holds"])
    need: dict[str, int | None] = {}
    unplanned = []
    for text in claim["holds"]:
        condition = judge.test_condition(text, values, claim.get("paper", {}), 1 - ALPHA / m)
        n, why = judge.plan_seeds(condition, values, claim.get("paper", {}), (math.nan, 0.0),
                                  1 - ALPHA / m)
        if why.startswith("the paper gives no value"):
            unplanned.append(f"{text}: {why}")
            continue
        for _, name in condition.terms:
            cell = claim["values"][name]["cell"]
            if values[name].kind != "exact":
                before = need.get(cell, 0)
                need[cell] = None if n is None or before is None else max(before, n)
    return {cell: (_seeds_run(cells[cell]), n) for cell, n in need.items()}, unplanned


def _seeds_run(cell: pd.DataFrame) -> int:
    return int(cell.groupby("sigma_w")["seed"].nunique().min())


def _template(spec: dict[str, Any], cell: pd.DataFrame, noise: pd.DataFrame | None,
              claim: dict[str, Any], noise_sd: float) -> Estimate:
    """The value's design with a planning noise: the reference's same cell where it has
    two or more seeds (with its degrees of freedom, which the plan's upper confidence
    limit widens), else noise_sd (DECAY_NOISE for |beta| decades), taken as known."""
    sigma, df = (DECAY_NOISE if spec["stat"] == "beta_decay" else noise_sd), math.inf
    if noise is not None:
        try:
            measured = judge.compute(spec, judge.select_cell(noise, claim["cells"][spec["cell"]]),
                                     None)
            if measured.known and measured.kind != "exact":
                sigma, df = measured.sigma, measured.df
        except (judge.NotJudged, judge.ClaimsError):
            pass
    n = _seeds_run(cell)
    if spec["stat"] in ("spread", "max_spread", "min_spread"):
        return Estimate(0.0, "spread", sigma, n, df, len(FIVE_SIGMAS), True)
    if spec["stat"] == "max_clock":
        return inference.exact(float(cell[spec["clock"]].max()))
    return Estimate(0.0, "mean", sigma, n, df)


def plan_table(claims: list[dict[str, Any]], config: dict[str, Any],
               noise: pd.DataFrame | None, noise_sd: float,
               reference: dict[str, Any] | None = None) -> pd.DataFrame:
    """One plan row per claim; with a reference config (the paper's), the cells the
    config does not run are planned at its scale."""
    study = Study.of(expand_runs(config), config["execution"])
    scaled = None if reference is None else Study.at_scale(config, reference)
    return pd.DataFrame([plan_claim(c, study, noise, noise_sd, scaled).row() for c in claims])


def render_markdown(plan: pd.DataFrame, device: str) -> str:
    """The plan table as Markdown; `device` names what the device-hours are of."""
    lines = [f"| claim | plan | device-hours ({device}) | seeds (run of needed) |",
             "| --- | --- | --- | --- |"]
    lines += [f"| `{r['id']}` | {md_escape(r['plan'])} | {r['device_hours']:.3g} | "
              f"{md_escape(r['seeds'])} |"
              for r in plan.to_dict("records")]
    return "\n".join(lines) + "\n"
