"""A config's study in looks: which runs each look trains, and what it costs.

Each configuration of a claim's cells runs its seeds (in the config's order) in LOOKS: at
look j the first max(MIN_SEEDS, ceil(f_j n)) of its n seeds, so one of MIN_SEEDS seeds or
fewer is whole at the first look. A claim's information fraction at a look is its compared
cells' runs then over their runs at the last look. A look trains the runs of the claims
still open (every claim at the first look), packed and priced as the fixed study is
(initmem.plan.cost on the config's execution); runs no claim reads go in the first look.
A look's decisions (initmem.analysis.sequential decides each claim; its table is written
as results/looks/look<j>.csv) say which claims stay open, and so what the next look
trains. This is planning: the workflow reads it to make its packs
(workflow/rules/common.smk, looks.smk); the simulation of the design is
initmem.analysis.staged.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from initmem import untrusted
from initmem.plan import cost
from initmem.plan.cells import planned_runs, recipe_keys, select_cell
from initmem.plan.claims_file import read_claims
from initmem.plan.grid import expand_runs, make_packs, pack_runs
from initmem.plan.spec import Pack, Run

DECISIONS = ("holds", "fails", "futile", "continue", "out of regime", "not run")


LOOKS = (0.2, 0.4, 0.6, 0.8, 1.0)


MIN_SEEDS = 2  # the fewest that measure seed noise (a paired spread: 4 degrees of freedom)


def seeds_at(n: int, look: int) -> int:
    """Seeds of an n-seed cell run by look `look` (0-based)."""
    return min(n, max(MIN_SEEDS, math.ceil(LOOKS[look] * n - 1e-9)))


@dataclass
class ClaimCells:
    """One claim's cells in the staged study: each cell's planned runs, each with its
    seed's place among its configuration's seeds (`order`) and that configuration's number
    of seeds (`of`), and the cells its values compare. A cell may span configurations of
    different seed counts (a clock's cell reads the 5,000-epoch runs' 3 seeds and the main
    grid's 15): each configuration runs its own seeds in looks."""

    claim: dict[str, Any]
    runs: dict[str, pd.DataFrame]
    compared: list[str] = field(default_factory=list)
    # (cell, look) -> its runs by then: asked millions of times by a simulation
    _runs_by: dict[tuple[str, int], pd.DataFrame] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, claim: dict[str, Any], runs: dict[str, pd.DataFrame]) -> ClaimCells:
        """The claim's cells from their planned runs (in the config's seed order)."""
        return cls(claim, {name: _ordered(frame) for name, frame in runs.items()},
                   list(dict.fromkeys(v["cell"] for v in claim["values"].values())))

    @property
    def complete(self) -> bool:
        """Whether the config plans every cell its values compare."""
        return all(not self.runs[c].empty for c in self.compared)

    def _by(self, cell: str, look: int) -> pd.DataFrame:
        if (cell, look) not in self._runs_by:
            frame = self.runs[cell]
            self._runs_by[cell, look] = frame[
                frame["order"] < [seeds_at(n, look) for n in frame["of"]]]
        return self._runs_by[cell, look]

    def seeds_at(self, cell: str, look: int) -> int:
        """The most seeds any configuration of the cell has run by this look."""
        return int(self._by(cell, look)["order"].max() + 1) if not self.runs[cell].empty else 0

    def run_ids(self, look: int) -> set[str]:
        """Every run of the claim's cells by this look."""
        return set().union(*(self._by(c, look)["run_id"] for c in self.runs))

    def _looks(self, look: int) -> tuple[list[int], list[int]]:
        """Its distinct looks up to this one (where its compared cells gained runs) and
        their compared cells' runs then."""
        seen = [sum(len(self._by(c, j)) for c in self.compared) for j in range(look + 1)]
        distinct = [j for j in range(look + 1) if j == 0 or seen[j] > seen[j - 1]]
        return distinct, [seen[j] for j in distinct]

    def fractions(self, look: int) -> tuple[float, ...]:
        """Its information fractions at its distinct looks up to this one: its compared
        cells' runs then over their runs at the last look (a claim whose cells the config
        does not run has one look, where it is not run)."""
        total = sum(len(self.runs[c]) for c in self.compared)
        if total == 0:
            return (1.0,)
        return tuple(runs / total for runs in self._looks(look)[1])

    def seeds_by_look(self, look: int) -> dict[str, tuple[int, ...]]:
        """Each value's seeds at its distinct looks up to this one (aligned with
        `fractions`): what its looks' levels are calibrated on."""
        return {name: tuple(self.seeds_at(spec["cell"], j) for j in self._looks(look)[0])
                for name, spec in self.claim["values"].items()}

    def compared_seeds(self, look: int) -> int:
        """The seeds of its compared cells by this look, summed."""
        return sum(self.seeds_at(c, look) for c in self.compared)

    def seeds_max(self) -> dict[str, int]:
        """Each value's seeds at the last look."""
        return {name: self.seeds_at(spec["cell"], len(LOOKS) - 1)
                for name, spec in self.claim["values"].items()}


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """The cell's run ids and seeds, each with its seed's place among its configuration's
    seeds and their number."""
    parts = []
    for _, group in frame.groupby(recipe_keys(), dropna=False, sort=False):
        place = {seed: i for i, seed in enumerate(dict.fromkeys(group["seed"]))}
        parts.append(pd.DataFrame({"run_id": group["run_id"], "seed": group["seed"],
                                   "order": group["seed"].map(place), "of": len(place)}))
    columns = ["run_id", "seed", "order", "of"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


@dataclass
class Staging:
    """The config's runs in looks: per claim its cells, and each run by id."""

    claims: list[ClaimCells]
    runs: dict[str, Run]
    pack_size: int
    throughput: cost.Throughput
    priced: dict[frozenset[str], float] = field(default_factory=dict)  # hours by run set

    @classmethod
    def of(cls, config: dict[str, Any], claims: list[dict[str, Any]]) -> Staging:
        """The config's runs in looks for these claims (their cells' planned runs)."""
        runs = expand_runs(config)
        table = planned_runs(config)
        staged = [ClaimCells.of(claim, {name: select_cell(table, spec)
                                        for name, spec in claim["cells"].items()})
                  for claim in claims]
        return cls(staged, {r.run_id: r for r in runs}, config["execution"]["pack_size"],
                   cost.throughput(config["execution"]))

    def hours(self, run_ids: Iterable[str]) -> float:
        """Device-hours of these runs packed as the fixed study packs its runs."""
        key = frozenset(run_ids)
        if key not in self.priced:
            chosen = [r for r in self.runs.values() if r.run_id in key]
            self.priced[key] = cost.gpu_hours(pack_runs(chosen, self.pack_size).values(),
                                              self.throughput)
        return self.priced[key]

    def fixed_hours(self) -> float:
        """Device-hours of every run of the config: the fixed design's."""
        return self.hours(self.runs)

    def unread(self) -> set[str]:
        """Runs no claim reads (trained whole at the first look)."""
        return set(self.runs) - set().union(*(c.run_ids(len(LOOKS) - 1) for c in self.claims))

    def wanted(self, look: int, open_ids: set[str]) -> set[str]:
        """The runs a look (0-based) needs when the claims `open_ids` are open at it."""
        runs = set().union(*(c.run_ids(look) for c in self.claims if c.claim["id"] in open_ids))
        return runs | self.unread() if look == 0 else runs

    def look_hours(self, open_at: list[set[str]]) -> list[float]:
        """Device-hours of each look when the claims of `open_at[j]` (ids) are open at it:
        the runs it adds to those already trained."""
        done, hours = set(), []
        for look, ids in enumerate(open_at):
            wanted = self.wanted(look, ids)
            hours.append(self.hours(wanted - done))
            done |= wanted
        return hours

    def packs(self) -> dict[str, Pack]:
        """The staged study's packs: the runs each look adds when every claim is open,
        packed apart (ids 'look<j>-' and the fixed design's), so that a look's training
        jobs hold its seeds only."""
        every, done, packs = {c.claim["id"] for c in self.claims}, set(), {}
        for look in range(len(LOOKS)):
            wanted = self.wanted(look, every)
            runs = [r for r in self.runs.values() if r.run_id in wanted - done]
            packs |= {f"look{look + 1}-{pack_id}": pack
                      for pack_id, pack in pack_runs(runs, self.pack_size).items()}
            done |= wanted
        return packs

    def asked(self, decisions: pd.DataFrame) -> set[str]:
        """The runs the looks asked for by the last look of `decisions` (judge_look's
        table): look i trains what the claims open at it add, and a claim decided at look
        k was open at looks 1 to k. The rest of the config's runs are never needed."""
        asked = self.wanted(0, set())  # the runs no claim reads, trained whole at look 1
        for look in range(int(decisions["look"].max()) if len(decisions) else 0):
            asked |= self.wanted(look, set(decisions.loc[decisions["look"] > look, "id"]))
        return asked

    def needed(self, decisions: pd.DataFrame | None) -> set[str]:
        """The runs the study asked for by the looks of `decisions` (judge_look's table;
        None: no look decided yet, every run may be) and those its later looks may still
        ask for: the seeds of the claims left open."""
        if decisions is None:
            return set(self.runs)
        open_ids = set(decisions.loc[decisions["decision"] == "continue", "id"])
        later = range(int(decisions["look"].max()), len(LOOKS))
        return self.asked(decisions).union(*(self.wanted(look, open_ids) for look in later))

    def max_hours(self) -> list[float]:
        """Device-hours of each look when every claim stays open to the end."""
        every = {c.claim["id"] for c in self.claims}
        return self.look_hours([every] * len(LOOKS))


DECISIONS_BYTES = 16 * 1024 * 1024  # a look's table: a row per claim


def read_decisions(path: str | Path) -> pd.DataFrame:
    """A look's decisions (judge_look's table, as CSV), read as a file of a shared results
    folder: a regular file of bounded size (a link or a FIFO is refused, not followed)."""
    data = untrusted.read_bytes(path, DECISIONS_BYTES, "a look's decisions (CSV)")
    return pd.read_csv(io.BytesIO(data), keep_default_na=False)


def decided_looks(folder: Path) -> list[Path]:
    """The looks' decision files of `folder` (look<j>.csv), in look order."""
    files = [p for p in folder.glob("look*.csv") if p.stem.removeprefix("look").isdigit()]
    return sorted(files, key=lambda p: int(p.stem.removeprefix("look")))


def open_claims(decisions: str | Path) -> set[str]:
    """The claims a look's decisions (judge_look's table, as CSV) leave open."""
    table = read_decisions(decisions)
    return set(table.loc[table["decision"] == "continue", "id"])


def study_packs(config: dict[str, Any], claims_path: str | Path) -> dict[str, Pack]:
    """The packs the workflow trains: a staged study's (config `staged`), each look's
    apart, else the fixed design's."""
    if not config["staged"]:
        return make_packs(config)
    return Staging.of(config, read_claims(claims_path)).packs()


def looks_text(staging: Staging, folder: Path, recorded: set[str],
               spent: dict[str, float]) -> str:
    """Where a staged study stands (`initmem status`): its last decided look, each look's
    state (`look_lines`), and what each claim still open waits for. `recorded`: the run
    ids with good records; `spent`: device-seconds by pack id."""
    files = decided_looks(folder)
    each = look_lines(staging, folder, recorded, spent)
    if not files:
        return "\n".join([f"staged: look 1 of {len(LOOKS)} training (no look decided yet)",
                          *each])
    table = read_decisions(files[-1])
    counts = table["decision"].value_counts()
    lines = [f"staged: look {files[-1].stem.removeprefix('look')} of {len(LOOKS)} decided: "
             + ", ".join(f"{counts[k]} {k}" for k in DECISIONS if k in counts),
             *each]
    waiting = table[table["decision"] == "continue"]
    lines += [f"  {r['id']} waits for {r['waits']}" for r in waiting.to_dict("records")]
    if waiting.empty:
        lines.append("  every claim is decided: no more seeds to train")
    return "\n".join(lines)


def last_decisions(folder: Path) -> pd.DataFrame | None:
    """The decisions of the last look decided (its look<j>.csv in `folder`), or None."""
    files = decided_looks(folder)
    return read_decisions(files[-1]) if files else None


def needed_runs(staging: Staging, folder: Path) -> set[str]:
    """The runs the staged study still needs after the looks decided in `folder`."""
    return staging.needed(last_decisions(folder))


def look_lines(staging: Staging, folder: Path, recorded: set[str],
               spent: dict[str, float]) -> list[str]:
    """A line per look, in order, until one waits: training (some of its runs without
    records), deciding (all recorded, its decisions not written), decided (with what it
    decided), or not needed (every claim decided before it); its runs trained of those the
    claims open at it add, and the device-hours its packs spent against the plan of those
    runs (`Staging.hours`, initmem cost's model)."""
    lines, done = [], set()
    for look in range(1, len(LOOKS) + 1):
        previous = folder / f"look{look - 1}.csv"
        if look > 1 and not previous.exists():
            lines.append(f"  look {look}: waits for look {look - 1}'s decisions")
            break
        open_ids = ({c.claim["id"] for c in staging.claims} if look == 1
                    else open_claims(previous))
        if not open_ids:
            lines.append(f"  look {look}: not needed (every claim decided by look {look - 1})")
            break
        wanted = staging.wanted(look - 1, open_ids)
        new, done = wanted - done, done | wanted
        decided = folder / f"look{look}.csv"
        state = ("decided" if decided.exists() else
                 "deciding" if new <= recorded else "training")
        hours = sum(s for pack_id, s in spent.items()
                    if pack_id.startswith(f"look{look}-")) / 3600
        lines.append(f"  look {look}: {state}; {len(new & recorded)} of {len(new)} runs "
                     f"trained, {hours:.2f} device-hours of {staging.hours(new):.2f} planned")
    return lines
