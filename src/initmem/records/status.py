"""`initmem status`: where a config's sweep stands, while it trains.

Every run of the config is counted once, per family and recipe x b, as
    completed, early_stopped, diverged   its records are good (`initmem verify`): their status
    damaged     its records do not read, or are stale (`initmem verify` names them)
    running     no records yet; a live or stalled trainer holds its pack (heartbeat)
    failed      no records yet; its pack's last trainer stopped without finishing (killed,
                crashed, preempted, interrupted): a rerun resumes it from its checkpoint
    queued      no records, no trainer: not started
A staged study (config `staged`) counts the packs of all its looks (runs of looks it
never needs stay queued), and says which look was decided last, each look's state
(training, deciding, decided, not needed, or waiting for the one before) with its runs
trained and its device-hours against the plan of the runs it trains, and what each claim
still open waits for (the looks' decisions, results/looks beside the records).
Trainers come from the heartbeats beside the checkpoints (records.heartbeat): each with
its state and why, pack, epoch of its total, last beat, host and projected finish; a
live one on this host with no Snakemake above it is an orphan (its Snakemake was killed).
Another host's trainer is judged by one SLURM snapshot per call (records.cluster): one
SLURM says is gone is dead once it stops beating, never an orphan, and its pack's runs
count as failed; while it still beats (a node cut off from SLURM) it is live and "cut
off", its runs running, and status says what becomes of its pack. Device-
hours spent are each finished pack's longest wall time (a pack's runs train at once) plus
each running pack's elapsed time, against `initmem cost`'s projection of the same packs;
the ETA divides what remains of the projection, scaled by the pace so far (time spent
over the projection of what it trained), among the trainers running now. Where `squeue`
answers, the SLURM jobs of the training rules (the Snakemake SLURM plugin's
`rule_train_<job>` comments) with their states; where `sacct` answers too (a cluster with
accounting), also the past week's ended ones: completed, failed with their exit code,
preempted, requeued, timed out, cancelled.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from initmem import checkout
from initmem.markup import screen_control, terminal
from initmem.plan import cost, looks
from initmem.plan.claims_file import read_claims
from initmem.plan.grid import load_config, make_packs
from initmem.plan.spec import Pack
from initmem.records import cluster, heartbeat
from initmem.records.verify import DAMAGED, GOOD, verify_run
from initmem.vocabulary import COMPLETED, DIVERGED, EARLY_STOPPED, MISSING

RUNNING, FAILED, QUEUED = "running", "failed", "queued"
STATES = (COMPLETED, EARLY_STOPPED, DIVERGED, RUNNING, QUEUED, FAILED, DAMAGED)
HOLDING = (heartbeat.LIVE, heartbeat.STALLED)
SQUEUE_FORMAT = "%i|%T|%M|%r|%k"  # job id, state, time used, reason, comment
SACCT_FORMAT = "JobIDRaw,State,Elapsed,ExitCode,Comment%300"
TRAINING_COMMENT = "rule_train_"  # the SLURM plugin's --comment of a rule train_<job>


@dataclass
class Trainer:
    """A heartbeat as status shows it."""

    pack_id: str  # the config's pack id, or its key when the config has no such pack
    state: str
    why: str  # the state's reason, in words
    pid: int
    host: str
    epoch: int
    epochs: int
    part: str  # "i of n": CPU sub-packs train one after another
    last_beat_s: float  # seconds since
    elapsed_s: float
    done: float  # the fraction of the pack's epochs trained
    projected_finish: float | None  # Unix time
    orphan: bool
    ended: str | None
    cut_off: bool  # live, though SLURM says it is gone (heartbeat.Verdict)


@dataclass
class SweepStatus:
    """Where a config's sweep stands at `when` (Unix time): its runs by state, its trainers,
    device-hours and ETA, its SLURM jobs and a staged study's looks."""
    config: str
    when: float
    counts: list[dict[str, Any]]  # per family, recipe_id, b: STATES
    total: dict[str, int]
    trainers: list[Trainer]
    hours: dict[str, float]  # spent, projected, remaining
    eta: float | None  # Unix time
    slurm: list[dict[str, str]] = field(default_factory=list)
    looks: str = ""  # a staged study's last decided look and what its open claims wait for


def sweep_status(config_path: str | Path, records: str | Path,
                 checkpoints: str | Path | None = None,
                 published: str | Path = checkout.PUBLISHED,
                 claims: str | Path = checkout.CLAIMS) -> SweepStatus:
    """The status of every run of the config (module docstring); one call, no side effect."""
    config = load_config(config_path)
    records = Path(records)
    root = Path(checkpoints) if checkpoints else records / ".checkpoints"
    staging = (looks.Staging.of(config, read_claims(claims)) if config["staged"]
               else None)
    packs = staging.packs() if staging else make_packs(config)
    # a staged study's seeds that no open claim will ask for are not queued work
    needed = looks.needed_runs(staging, records.parent / "looks") if staging else None
    if needed is not None:
        packs = {pack_id: pack for pack_id, pack in packs.items()
                 if any(run.run_id in needed for run in pack.runs)}
    beats = {pack_id: b for pack_id, pack in packs.items()
             if (b := heartbeat.read(heartbeat.path_of(root, pack))) is not None}
    now, slurm = time.time(), cluster.Snapshot()
    verdicts = {pack_id: heartbeat.state(b, now, slurm=slurm) for pack_id, b in beats.items()}
    rows, walls, finished, recorded = [], {}, [], set()
    for pack_id, pack in packs.items():
        states, run_walls = _run_states(pack, records, verdicts.get(pack_id), recorded, needed)
        rows.append({"family": pack.recipe.family, "recipe_id": pack.recipe.recipe_id,
                     "b": pack.recipe.b, **states})
        walls[pack_id] = max(run_walls, default=0.0)
        if states[RUNNING] + states[QUEUED] + states[FAILED] == 0:
            finished.append(pack_id)
    trainers = [_trainer(pack_id, beat, verdicts[pack_id], now)
                for pack_id, beat in beats.items()]
    trainers += _strays(root, {p.key for p in packs.values()}, now, slurm)
    execution = config["execution"]
    stopping = cost.config_stopping(config, published)
    seconds = {pack_id: cost.pack_seconds(pack, cost.throughput(execution), stopping,
                                          execution["compaction"])
               for pack_id, pack in packs.items()}  # as the workflow's PACK_SECONDS
    hours, eta = _projection(seconds, walls, finished, trainers, now)
    progress = (looks.looks_text(staging, records.parent / "looks", recorded,
                                 _spent_by_pack(walls, trainers)) if staging else "")
    return SweepStatus(str(config_path), now, _merge(rows), _sum(rows), trainers, hours, eta,
                       slurm_jobs(cost.training_jobs(seconds, execution["packs_per_job"])),
                       progress)


def _run_states(pack: Pack, records: Path, verdict: heartbeat.Verdict | None,
                recorded: set[str], needed: set[str] | None) -> tuple[Counter, list[float]]:
    """The pack's runs counted by state (`verdict`: its trainer's heartbeat, if any), and
    the wall times of its finished ones; the ids of those added to `recorded`. `needed`:
    a staged study's runs still needed (the others are not counted), None: every run."""
    counts, walls = Counter({s: 0 for s in STATES}), []
    pending = QUEUED
    if verdict is not None:
        pending = RUNNING if verdict.state in HOLDING else FAILED
    for run in pack.runs:
        if needed is not None and run.run_id not in needed:
            continue
        finding, summary = verify_run(records, run)
        if finding.state == GOOD:
            recorded.add(run.run_id)
            counts[summary["status"].iloc[0]] += 1
            walls.append(float(summary["wall_time_s"].iloc[0]))
        else:
            counts[pending if finding.state == MISSING else DAMAGED] += 1
    return counts, walls


def _merge(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The packs' rows summed per family, recipe and b."""
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row["family"], row["recipe_id"], row["b"])
        into = merged.setdefault(key, {**row, **{s: 0 for s in STATES}})
        for s in STATES:
            into[s] += row[s]
    return list(merged.values())


def _sum(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {s: sum(row[s] for row in rows) for s in STATES}


def _trainer(pack_id: str, beat: dict[str, Any], verdict: heartbeat.Verdict,
             now: float) -> Trainer:
    state = verdict.state
    left = None
    if state in HOLDING and beat.get("epoch_s"):
        epochs_left = beat["epochs"] - beat["epoch"] + 1
        parts_left = beat.get("parts", 1) - beat.get("part", 1)
        left = (epochs_left + parts_left * beat["epochs"]) * beat["epoch_s"]
    part, parts = beat.get("part", 1), beat.get("parts", 1)
    done = (part - 1 + (beat["epoch"] - 1) / beat["epochs"]) / parts
    return Trainer(pack_id, state, verdict.why, beat["pid"], beat["host"], beat["epoch"],
                   beat["epochs"], f"{part} of {parts}", now - beat["beat"],
                   beat["beat"] - beat["start"], done,
                   None if left is None else beat.get("progress", beat["beat"]) + left,
                   state == heartbeat.LIVE and _orphan(beat), beat.get("ended"),
                   verdict.cut_off)


def _strays(root: Path, keys: set[str], now: float,
            slurm: cluster.Snapshot) -> list[Trainer]:
    """Heartbeats of packs the config does not have (an older config's trainers)."""
    strays = []
    for path in sorted(root.glob(f"*{heartbeat.SUFFIX}")):
        beat = heartbeat.read(path)
        if beat is not None and beat["pack"] not in keys:
            strays.append(_trainer(f"{beat['pack']} (not of this config)", beat,
                                   heartbeat.state(beat, now, slurm=slurm), now))
    return strays


def _orphan(beat: dict[str, Any]) -> bool:
    """A trainer on this host with no Snakemake among its ancestors (Linux /proc)."""
    if beat["host"] != socket.gethostname():
        return False
    pid = beat["pid"]
    while pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False  # gone, or no /proc: cannot tell
        if b"snakemake" in cmdline and pid != beat["pid"]:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the name: ppid
    return True


def _spent_by_pack(walls: dict[str, float], trainers: list[Trainer]) -> dict[str, float]:
    """Device-seconds each pack spent: a running trainer's elapsed time, else its finished
    runs' longest wall time (as `_projection` counts them)."""
    running = {t.pack_id: t.elapsed_s for t in trainers if t.state in HOLDING}
    return walls | running


def _projection(seconds: dict[str, float], walls: dict[str, float], finished: list[str],
                trainers: list[Trainer], now: float) -> tuple[dict[str, float], float | None]:
    """Device-hours spent and projected (pack id -> projected seconds, and wall seconds of
    its finished runs); what remains at the pace so far (the finished packs' walls and the
    running ones' elapsed time against the projection of what they trained); the ETA."""
    running = [t for t in trainers if t.state in HOLDING]
    spent = sum(_spent_by_pack(walls, trainers).values())
    trained = (sum(seconds[p] for p in finished)
               + sum(seconds.get(t.pack_id, 0.0) * t.done for t in running))
    measured = sum(walls[p] for p in finished) + sum(t.elapsed_s for t in running)
    pace = measured / trained if trained > 0 and measured > 0 else 1.0
    remaining = (sum(seconds.values()) - trained) * pace
    eta = now + remaining / len(running) if running else None
    hours = {"spent": spent / 3600, "projected": sum(seconds.values()) / 3600,
             "remaining": remaining / 3600, "pace": pace, "measured": measured > 0}
    return hours, eta


def slurm_jobs(jobs: dict[str, list[str]]) -> list[dict[str, str]]:
    """The SLURM jobs of the training rules (job name -> its pack ids, as the workflow
    groups them): squeue's live ones, then sacct's ended ones of the past week that squeue
    no longer lists; none where neither answers."""
    live = _query(["squeue", "--me", "--noheader", f"--format={SQUEUE_FORMAT}"], jobs)
    shown = {j["job_id"] for j in live}
    ended = _query(["sacct", "-X", "--parsable2", "--noheader", "--starttime", "now-7days",
                    f"--format={SACCT_FORMAT}"], jobs, sacct=True)
    return live + [j for j in ended if j["job_id"] not in shown]


def _query(command: list[str], jobs: dict[str, list[str]],
           sacct: bool = False) -> list[dict[str, str]]:
    """squeue's (id|state|time|reason|comment) or sacct's (id|state|time|exit|comment)
    lines of the training jobs."""
    out = cluster.ask(command)  # None: no controller, no accounting
    found = []
    for line in (out or "").splitlines():
        job_id, state, used, detail, comment = (line.split("|") + [""] * 5)[:5]
        job = comment.removeprefix(TRAINING_COMMENT).split("_wildcards_")[0]
        if comment.startswith(TRAINING_COMMENT) and job in jobs:
            reason = f"exit code {detail}" if sacct else detail
            found.append({"job_id": job_id, "state": state.split()[0], "time": used,
                          "reason": reason, "job": job, "packs": ", ".join(jobs[job])})
    return found


def _clock(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{s:02d}"


def _table(rows: list[list[str]]) -> list[str]:
    """Columns aligned: text left, numbers right; each cell as a terminal shows it (a
    heartbeat's host or pack, SLURM's job names, are anyone's text)."""
    rows = [[terminal(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if cell.replace(".", "").isdigit() else cell.ljust(w)
                      for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render(status: SweepStatus) -> str:
    """The status as text: counts, trainers, device-hours and ETA, SLURM jobs."""
    total = sum(status.total.values())
    lines = [f"{terminal(status.config)} at {_clock(status.when)}: {total:,} runs"
             + (" (a staged study's: those its looks asked for or may still ask for)"
                if status.looks else "")]
    if status.looks:
        lines += [*map(terminal, status.looks.splitlines()), ""]
    header = ["family", "recipe", "b", *STATES]
    lines += _table([header] + [[r["family"], r["recipe_id"], str(r["b"]),
                                 *(str(r[s]) for s in STATES)] for r in status.counts]
                    + [["total", "", "", *(str(status.total[s]) for s in STATES)]])
    if status.trainers:
        lines += ["", "trainers:"]
        lines += _table([["pack", "state", "pid", "host", "epoch", "part", "last beat",
                          "running for", "projected finish"]]
                        + [[t.pack_id, _trainer_state(t), str(t.pid), t.host,
                            f"{t.epoch} of {t.epochs}", t.part,
                            f"{_duration(t.last_beat_s)} ago", _duration(t.elapsed_s),
                            _clock(t.projected_finish)] for t in status.trainers])
    h = status.hours
    pace = (f"at {h['pace']:.3g}x the projection, the pace so far" if h["measured"]
            else "as projected: nothing trained yet")
    eta = f"ETA {_clock(status.eta)}" if status.eta else "no ETA: nothing is training"
    model = "`initmem cost`'s model of those runs" if status.looks else "`initmem cost`"
    lines += ["", f"device-hours: {cost.hours_text(h['spent'])} spent of "
                  f"{cost.hours_text(h['projected'])} projected ({model}); "
                  f"{cost.hours_text(h['remaining'])} remaining ({pace}); {eta}"]
    if status.slurm:
        lines += ["", "SLURM jobs:"]
        lines += _table([["job id", "state", "time", "reason or exit code", "job"]]
                        + [[j["job_id"], j["state"], j["time"], j["reason"], j["job"]]
                           for j in status.slurm])
    return "\n".join(lines)


def _trainer_state(t: Trainer) -> str:
    """Its state; why, where it is not beating or SLURM says it is gone; orphan, where it
    is one."""
    if t.ended:
        return f"ended ({t.ended})"
    if t.state != heartbeat.LIVE:
        return f"{t.state} ({t.why})"
    if t.cut_off:
        return (f"live, cut off ({t.why}); the pack stays with it: a job SLURM requeued "
                "waits for its records, and takes the pack over from its checkpoint once "
                "it stops beating")
    return f"{t.state}, orphan: no Snakemake above it" if t.orphan else t.state


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem status`."""
    parser.add_argument("--config", type=Path, default=checkout.CONFIG)
    parser.add_argument("--records", type=Path, default=checkout.RESULTS / "runs",
                        help="run folders root (default results/runs of initmem's checkout)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None,
                        help="the trainers' checkpoint root (default RECORDS/.checkpoints)")
    parser.add_argument("--published", type=Path, default=checkout.PUBLISHED,
                        metavar="DIR", help="as `initmem cost --published`")
    parser.add_argument("--claims", type=Path, default=checkout.CLAIMS,
                        help="a staged study's claims file (its looks' packs)")
    parser.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    parser.add_argument("--watch", type=float, default=None, metavar="SECONDS",
                        help="redraw every SECONDS until Ctrl-C")


def main(args: argparse.Namespace) -> int:
    """`initmem status`: print the sweep's state (text or JSON) once, or every --watch seconds."""
    while True:
        status = sweep_status(args.config, args.records, args.checkpoint_dir, args.published,
                              args.claims)
        text = json.dumps(asdict(status)) if args.json else render(status)
        if args.watch is None:
            print(text)
            return 0
        screen_control("\033[H\033[2J")  # home and clear: redraws in place
        print(text, flush=True)
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0
