"""Heartbeats: which process trains which pack, and whether it still does.

While `initmem train` trains a pack it keeps `<checkpoint root>/<pack key>.heartbeat.json`
(pid, host, start, pack, epoch of its total; inside SLURM its job id, node and restart
count) with two times: `beat`, rewritten every PULSE_S seconds by a thread of its own as
long as the process lives and reaches the folder, and `progress`, at every epoch end and
at most every BEAT_EVERY_S seconds of updates between (each atomically). It is removed
when the pack is trained; a process that stops otherwise (preempted, interrupted, failed)
marks it `ended` with why, and one that was SIGKILLed leaves it as it was; one orphaned
by a killed Snakemake goes on beating.

A heartbeat is, with a reason in words (`state` returns both)
    live      its process is alive (same host) or beating (another host: a beat younger
              than FENCE_S), and it progressed recently
    stalled   alive or beating, but no progress for longer than an epoch should take
              (another host: neither beat nor progress for that long, SLURM silent)
    dead      its process is gone without a word (same host: SIGKILL; another host: no
              beat for FENCE_S and SLURM says its job no longer runs there)
    ended     its process said it stopped (the pack resumes from its checkpoint)
"Progressed recently" is within max(STALL_MIN_S, 2 epochs as it measured them). Another
host's trainer is judged by its beat first: while it beats it is never dead, whatever
SLURM says, since a node SLURM marks down, or a job it requeued, may be cut off from
SLURM while its trainer runs on and writes to the shared folder (SLURM's word is not
proof of death: `cut_off`). Silent for FENCE_S, it is dead where SLURM says its trainer
is gone (records.cluster answers where it can): this process is a later start of the
beat's SLURM job (a requeue), squeue does not list the job, lists it in another state
than RUNNING, or running on nodes without the beat's, or sinfo shows the beat's node down.

Before training a pack, `initmem train` takes `<pack key>.lock` (an exclusive flock,
which the kernel drops when its process dies, even by SIGKILL; opened, like every
heartbeat, through initmem.untrusted: the folder may be shared), so of two trainers that
start on one pack at the same instant exactly one goes on; then it finds the pack held
when a live or stalled heartbeat of another process on this host, or a live one from
another host, holds it (Held: the trainer waits for the holder, training.command). A dead
one, or another host's stalled one, is taken over with a warning naming why. Where the
flock does not reach (a filesystem whose locks do not span nodes, a partition), the
heartbeat is the fence: a trainer beats, checkpoints and writes records only while the
heartbeat still names it (Fenced otherwise), so a trainer whose pack was taken over stops
without writing (docs/records.md, "One trainer a pack").
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from initmem.errors import InputError
from initmem.markup import terminal
from initmem.plan.inputs import parse_json
from initmem.plan.spec import Pack
from initmem.records import cluster
from initmem.records.files import atomic_write_bytes
from initmem.untrusted import open_lock, read_bytes

log = logging.getLogger("initmem.train")
SUFFIX = ".heartbeat.json"
BEAT_EVERY_S = 30.0  # the progress beat, at most this often during an epoch
PULSE_S = 15.0  # the liveness beat, from its own thread
# Not beating for this long: the trainer is dead or cannot reach the folder. Eight missed
# pulses: room for an NFS client's cached view of the folder (acdirmax, 60 s by default)
# and for hosts' clocks, which beats are stamped with (NTP keeps them within a second).
FENCE_S = 120.0
# No progress for this long, or for twice the epoch time the heartbeat measured (an epoch
# ends with an evaluation and a checkpoint, during which the loop does not beat): stalled.
STALL_MIN_S = 600.0
LIVE, STALLED, DEAD, ENDED = "live", "stalled", "dead", "ended"
MAX_BYTES = 64 * 1024  # a trainer's heartbeat or lock takes under 1 KB


class Held(InputError):
    """Another live process trains the pack."""


class Fenced(InputError):
    """Another trainer took the pack over: this one must stop without writing."""


def path_of(root: Path, pack: Pack) -> Path:
    """The heartbeat file of `pack` under the checkpoint root: named by the pack's key."""
    return root / f"{pack.key}{SUFFIX}"


# A heartbeat's fields as a trainer writes them (a shared results folder may hold anyone's
# file: status signals the pid, reads /proc/<pid>/ and formats the rest): required, then
# those that may be absent or null.
NUMBER = (int, float)
FIELDS = {"pid": int, "host": str, "pack": str, "start": NUMBER, "beat": NUMBER,
          "epoch": int, "epochs": int}
OPTIONAL_FIELDS = {"spec": str, "epoch_s": NUMBER, "ended": str, "part": int, "parts": int,
                   "progress": NUMBER,
                   "slurm_job_id": str, "slurm_node": str, "slurm_restarts": int}


# Each number's bounds, far outside a trainer's own (status formats them and divides by
# epochs): Linux's largest pid, Unix times before the year 5000, counts; and each text's.
BOUNDS = {"pid": (1, 2**22), "start": (0, 1e11), "beat": (0, 1e11), "progress": (0, 1e11),
          "epoch": (0, 10**6),
          "epochs": (1, 10**6), "epoch_s": (0, 1e9), "part": (1, 10**4), "parts": (1, 10**4),
          "slurm_restarts": (0, 10**6)}
MAX_TEXT = 1000


def read(path: Path, fields: dict[str, Any] = FIELDS) -> dict[str, Any] | None:
    """A heartbeat's fields, or None when it is gone, half written or not one a trainer
    writes (each field of its type and within BOUNDS, a text of at most MAX_TEXT
    characters); `fields`: the ones required."""
    try:
        beat = parse_json(read_bytes(path, MAX_BYTES, "a heartbeat"), path, MAX_BYTES)
    except (OSError, ValueError):  # InputError too: a link, a FIFO, a larger file
        return None
    if not isinstance(beat, dict):
        return None
    typed = all(_is(beat.get(k), t) for k, t in fields.items()) and all(
        beat.get(k) is None or _is(beat[k], t) for k, t in OPTIONAL_FIELDS.items())
    return beat if typed and _bounded(beat) else None


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _bounded(beat: dict[str, Any]) -> bool:
    """Every number within its BOUNDS (NaN and infinities are in none), every text short."""
    return (all(lo <= beat[k] <= hi for k, (lo, hi) in BOUNDS.items() if beat.get(k) is not None)
            and all(len(v) <= MAX_TEXT for v in beat.values() if isinstance(v, str)))


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def stall_after_s(beat: dict[str, Any]) -> float:
    """Seconds without progress that make a trainer stalled: 2 epochs' time, >= STALL_MIN_S."""
    epoch_s = beat.get("epoch_s")
    return max(STALL_MIN_S, 2 * epoch_s) if epoch_s else STALL_MIN_S


@dataclass(frozen=True)
class Verdict:
    """A heartbeat's state (LIVE, STALLED, DEAD, ENDED) and why, in words."""

    state: str
    why: str
    cut_off: bool = False  # live, though SLURM says its trainer is gone: a partition


def state(beat: dict[str, Any], now: float | None = None, host: str | None = None,
          slurm: cluster.Snapshot | None = None) -> Verdict:
    """Live, stalled, dead or ended, and why (module docstring). `slurm` judges another
    host's beat: pass one snapshot to judge many beats by (a fresh one when None)."""
    if beat.get("ended"):
        return Verdict(ENDED, f"its trainer stopped: {beat['ended']}")
    now = time.time() if now is None else now
    silent = now - beat.get("progress", beat["beat"])  # since it last progressed
    if beat["host"] == (host or socket.gethostname()):
        if not pid_alive(beat["pid"]):
            return Verdict(DEAD, f"pid {beat['pid']} is gone from this host")
        return _by_progress(beat, silent)
    dead, said = _slurm_says(beat, cluster.Snapshot() if slurm is None else slurm)
    if not dead:
        return _by_progress(beat, silent, said)
    quiet = now - beat["beat"]
    if quiet > FENCE_S:
        return Verdict(DEAD, f"{said}; no beat for more than {FENCE_S:.0f} s")
    return replace(_by_progress(beat, silent, f"beat {quiet:.0f} s ago, though {said}: "
                                              f"SLURM's word counts after {FENCE_S:.0f} s "
                                              "without a beat (cut off from SLURM?)"),
                   cut_off=True)


def _by_progress(beat: dict[str, Any], silent: float, said: str = "") -> Verdict:
    limit = stall_after_s(beat)
    recent = silent <= limit
    words = (f"last progress {silent:.0f} s ago, "
             + (f"within {limit:.0f} s" if recent else f"more than {limit:.0f} s"))
    return Verdict(LIVE if recent else STALLED, f"{said}; {words}" if said else words)


def _slurm_says(beat: dict[str, Any], slurm: cluster.Snapshot) -> tuple[bool, str]:
    """Whether SLURM says another host's trainer is gone, and what it says ("" without
    a job id in the beat)."""
    job = beat.get("slurm_job_id")
    if not job:
        return False, ""
    names = ({beat["slurm_node"]} if beat.get("slurm_node")
             else {beat["host"], beat["host"].split(".")[0]})
    node = min(names, key=len)
    mine = cluster.this_job()
    if mine is not None and mine.id == job and mine.restarts > beat.get("slurm_restarts", 0):
        return True, f"this is SLURM job {job} again (requeued)"
    if slurm.jobs is None:
        return False, f"SLURM does not answer about job {job}"
    if job not in slurm.jobs:
        return True, f"SLURM job {job} has ended (squeue does not list it)"
    job_state = slurm.jobs[job][0]
    if job_state != cluster.RUNNING:
        return True, f"SLURM job {job} is {job_state}, not running on {node}"
    nodes = slurm.nodes(job)
    if nodes is not None and not names & nodes:
        return True, f"SLURM job {job} runs on {','.join(sorted(nodes))}, not on {node}"
    if slurm.down is not None and names & slurm.down:
        return True, f"node {node} is down"
    return False, (f"SLURM job {job} is running, on nodes scontrol did not expand" if nodes is None
                   else f"SLURM job {job} runs on {node}")


def holder(beat: dict[str, Any]) -> str:
    """Who holds a pack, in words: its trainer's pid and host."""
    return f"pid {beat['pid']} on host {beat['host']}"


@dataclass
class Heartbeat:
    """The heartbeat of the pack this process trains: progress from the training loop,
    liveness from a thread of its own (start_pulse)."""

    path: Path
    fields: dict[str, Any]
    last: float = 0.0  # monotonic time of the last progress beat
    epoch_began: float = field(default_factory=time.monotonic)
    writing: threading.RLock = field(default_factory=threading.RLock)  # fields and file
    stopped: threading.Event = field(default_factory=threading.Event)

    def updated(self, epoch: int, _k: int) -> None:
        """After an update: beat when BEAT_EVERY_S have passed since the last beat."""
        if time.monotonic() - self.last >= BEAT_EVERY_S:
            self.beat(epoch)

    def epoch_ended(self, epoch: int, _rows: list[dict[str, Any]]) -> None:
        """Beat with the next epoch and how long this one took (status's projection)."""
        now = time.monotonic()
        self.beat(epoch + 1, epoch_s=now - self.epoch_began)
        self.epoch_began = now

    def beat(self, epoch: int, **fields: Any) -> None:
        """Progress: write the heartbeat with this epoch, unless the pack was taken over."""
        self.check_owned()
        self.claim(epoch, **fields)

    def claim(self, epoch: int, **fields: Any) -> None:
        """Write the heartbeat with this epoch, over whichever was there (the first beat
        takes the pack over from a dead or ended trainer; later ones beat())."""
        now = time.time()
        with self.writing:
            self.fields.update(fields, epoch=epoch, beat=now, progress=now)
            self._write()
        self.last = time.monotonic()

    def check_owned(self) -> None:
        """Fenced when the heartbeat names another trainer that has not ended: it took the
        pack over (this one was judged dead: cut off, or silent too long), so this one
        must not beat, checkpoint or write records. A missing heartbeat is ours to write."""
        beat = read(self.path)
        if beat is None or beat.get("ended") or all(
                beat[k] == self.fields[k] for k in ("pid", "host", "start")):
            return
        raise Fenced(f"pack {self.fields['pack']} was taken over by {holder(beat)}; this "
                     f"trainer stops without writing (its heartbeat {self.path} names that one)")

    def start_pulse(self) -> threading.Thread:
        """Beat every PULSE_S in a daemon thread until stop_pulse (or the pack is taken
        over): the beat says the process lives, whatever its loop is doing."""
        thread = threading.Thread(target=self._pulse, name="heartbeat", daemon=True)
        thread.start()
        return thread

    def stop_pulse(self) -> None:
        """End the pulse thread after its current wait."""
        self.stopped.set()

    def _pulse(self) -> None:
        while not self.stopped.wait(PULSE_S):
            try:
                self.check_owned()
                with self.writing:
                    self.fields["beat"] = time.time()
                    self._write()
            except Fenced:
                return  # the loop's next beat or write raises it there
            except OSError as err:  # the folder out of reach: a missed beat, not a stop
                log.warning("heartbeat %s not written: %s", self.path, err)

    def _write(self) -> None:
        with self.writing:
            text = json.dumps(self.fields).encode()
            atomic_write_bytes(self.path, lambda fh: fh.write(text))


def _check_free(path: Path) -> None:
    """Refuse when another process holds the pack; name and drop a dead heartbeat."""
    beat = read(path)
    if beat is None or (beat["pid"] == os.getpid() and beat["host"] == socket.gethostname()):
        return
    verdict = state(beat)
    if verdict.state == ENDED:
        return
    if verdict.state == DEAD or (verdict.state == STALLED
                                 and beat["host"] != socket.gethostname()):
        log.warning("taking over pack %s from %s: its heartbeat is %s (%s)",
                    *map(terminal, (beat["pack"], holder(beat), verdict.state, verdict.why)))
        return
    raise Held(f"pack {beat['pack']} ({beat.get('spec')}) is being trained by {holder(beat)} "
               f"({verdict.state}: {verdict.why}); end that process or wait for it "
               "(`initmem status` lists trainers)")


def _lock(path: Path, beat_path: Path) -> int:
    """An exclusive flock on `path`, which then names its holder (pid, host), or Held
    naming the holder; retried when the file was unlinked by its previous holder between
    our open and our lock."""
    while True:
        fd = open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Held(f"pack {path.name.removesuffix('.lock')} is being trained by "
                       f"{_lock_holder(path, beat_path)} (it holds {path}); end that process "
                       "or wait for it (`initmem status` lists trainers)") from None
        with suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                me = {"pid": os.getpid(), "host": socket.gethostname()}
                os.write(fd, json.dumps(me).encode())
                return fd
        os.close(fd)


def _lock_holder(path: Path, beat_path: Path) -> str:
    """Who holds the lock: as the lock file names it (written right after the lock is
    taken, so briefly waited for), else as the heartbeat does (which may still be a
    previous trainer's while the holder judges it)."""
    for _ in range(20):
        if (me := read(path, {"pid": int, "host": str})) is not None:
            return holder(me)
        time.sleep(0.05)
    beat = read(beat_path)
    return holder(beat) if beat else "a process that has not named itself yet"


@contextmanager
def _locked(path: Path, beat_path: Path):
    fd = _lock(path, beat_path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # before the unlock: a waiter then locks a new file
        os.close(fd)


@contextmanager
def held(root: Path, pack: Pack, spec: Path):
    """The pack's heartbeat while the block trains it (refused when another holds it)."""
    path = path_of(root, pack)
    with _locked(root / f"{pack.key}.lock", path):
        _check_free(path)
        with _beating(path, pack, spec) as heartbeat:
            yield heartbeat


@contextmanager
def _beating(path: Path, pack: Pack, spec: Path):
    now, job = time.time(), cluster.this_job()
    heartbeat = Heartbeat(path, {
        "pid": os.getpid(), "host": socket.gethostname(), "start": now, "pack": pack.key,
        "spec": str(spec), "recipe_id": pack.recipe.recipe_id, "b": pack.recipe.b,
        "runs": len(pack.runs), "epochs": pack.recipe.epochs, "part": 1, "parts": 1,
        "epoch_s": None, "slurm_job_id": job and job.id, "slurm_node": job and job.node,
        "slurm_restarts": job and job.restarts})
    heartbeat.claim(1)
    pulse = heartbeat.start_pulse()
    try:
        yield heartbeat
    except BaseException as err:
        heartbeat.stop_pulse()
        pulse.join()
        # a full disk, or the pack taken over (its new trainer's beat is not ours to end):
        # the error that matters is err
        with suppress(OSError, Fenced):
            heartbeat.beat(heartbeat.fields["epoch"], ended=f"{type(err).__name__}: {err}")
        raise
    heartbeat.stop_pulse()
    pulse.join()
    heartbeat.check_owned()
    path.unlink(missing_ok=True)
