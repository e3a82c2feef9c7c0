"""The `train` command: pack specs in, one record folder per run out.

Several specs train one after another in one process (one start-up, one read of the
data set: most of a small CPU pack's time). Each pack resumes from its checkpoint when
one exists; trained packs keep their final checkpoints until every pack of the job is
done, and their records stay (a failed job's are never deleted, docs/records.md), so a
job that fails or is preempted later costs its finished packs nothing when it is rerun.
A pack whose runs all have records is skipped in one line (the job succeeds: another
trainer finished it while this job waited or was requeued). A pack that another live
trainer holds (records.heartbeat) is waited for: the job ends when that trainer's records
are written, or takes the pack over from its checkpoint when it stops; a trainer whose
pack was taken over stops without writing (Fenced) and exits with PREEMPTED_EXIT, for the
scheduler to retry later.
On SIGTERM or SIGUSR1 (what SLURM sends at preemption and, with --signal, before the
time limit) it finishes the update in flight, writes a checkpoint and exits with
PREEMPTED_EXIT so the job can be requeued; on SIGINT (Ctrl-C, which a terminal sends to
Snakemake and its local jobs alike) it does the same and exits with INTERRUPTED_EXIT.
A pack that runs out of GPU memory trains as two halves, recursively (halves_after_oom).
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from initmem import checkout
from initmem.errors import InputError
from initmem.plan.architectures import CPU_CHANNELS_LAST
from initmem.plan.spec import Pack, Recipe, Run
from initmem.records import heartbeat
from initmem.records.tensorboard import LiveWriter
from initmem.training import checkpoint, data, memory
from initmem.training.trainer import PackTrainer, Preempted, determinism_settings

log = logging.getLogger("initmem.train")
PREEMPTED_EXIT = 75  # EX_TEMPFAIL: try again later; the checkpoint makes it cheap
# 128 + SIGINT, what a shell reports for Ctrl-C: the user stopped it, nothing to retry
# (75 would tell a scheduler to requeue a job its user meant to stop).
INTERRUPTED_EXIT = 130
STOP_EXIT = {signal.SIGTERM: PREEMPTED_EXIT, signal.SIGUSR1: PREEMPTED_EXIT,
             signal.SIGINT: INTERRUPTED_EXIT}
CPU_PACK_IMAGES = 256  # images per step above which CPU packing loses (see cpu_parts)
POLL_S = 2.0  # how often a trainer waiting for a held pack looks again (a few stat calls)
WAIT_NOTE_S = 600.0  # how often it says that it still waits


def resolve_device(name: str, deterministic: bool = True) -> torch.device:
    """The torch device `name` (auto: CUDA where there is one), with TF32 and, when
    `deterministic`, cuDNN's repeatable kernels; SystemExit when CUDA is asked for but absent."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device=cuda asked for, but torch sees no CUDA device; "
                         "use --device cpu or auto")
    device = torch.device(name)
    if device.type == "cuda":
        # TensorFlow's and PyTorch's defaults on Ampere+: TF32 convolutions and matmuls.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        # Run-to-run equality where the kernels allow it; the records note the settings.
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = not deterministic
        torch.use_deterministic_algorithms(deterministic, warn_only=True)
    return device


def describe_device(device: torch.device) -> str:
    """The device, precision, threads, torch version and determinism, in one line for the log."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        precision = "float32 (TF32 convolutions and matmuls allowed)"
    else:
        name, precision = "cpu", "float32"
    return (f"device={device} ({name}), precision={precision}, "
            f"threads={torch.get_num_threads()}, torch={torch.__version__}; "
            f"{determinism_settings(device)}")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem train`."""
    parser.add_argument("specs", type=Path, nargs="+", metavar="spec",
                        help="pack spec (YAML/JSON: recipe + runs); several train one after "
                             "another in this process")
    parser.add_argument("out_dir", type=Path, help="records go to OUT_DIR/<run_dir>/")
    parser.add_argument("--data-root", type=Path, default=checkout.CIFAR10,
                        help="CIFAR-10 root in torchvision layout (default: data/cifar10 of "
                             "initmem's checkout)")
    parser.add_argument("--download", action="store_true",
                        help="download CIFAR-10 if the root lacks it")
    parser.add_argument("--allow-unverified", action="store_true",
                        help="accept a CIFAR-10 copy that fails the official MD5 sums")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--checkpoint-dir", type=Path, default=None,
                        help="checkpoint folder root (default OUT_DIR/.checkpoints); the "
                             "pack's checkpoints go to a subfolder named by its content hash")
    parser.add_argument("--checkpoint-every", type=float, default=600.0, metavar="SECONDS",
                        help="checkpoint interval within an epoch (default 600 s); every "
                             "epoch end is checkpointed too")
    parser.add_argument("--keep-checkpoint", action="store_true",
                        help="keep the final checkpoint (the trained weights) after success")
    parser.add_argument(checkpoint.TRUST, action="store_true",
                        help="load a checkpoint in the pickle format of earlier initmem "
                             "versions, which can run code: only one you made yourself")
    parser.add_argument("--packed-on-cpu", action="store_true",
                        help="on CPU, train the whole pack at once even when it is large")
    parser.add_argument("--cuda-graphs", choices=("auto", "on", "off"), default="auto",
                        help="replay each full-batch update as a CUDA graph, checked against "
                             "an eager update when captured (auto: on CUDA)")
    parser.add_argument("--channels-last", choices=("auto", "on", "off"), default="auto",
                        help="NHWC activations (auto: on CUDA, as NVIDIA advises for cuDNN's "
                             "tensor cores, and on CPU for the archs it measured "
                             f"faster there: {', '.join(CPU_CHANNELS_LAST)})")
    parser.add_argument("--no-compaction", dest="compaction", action="store_false",
                        help="keep runs that stopped (early stopping, divergence) in the pack "
                             "until it ends, computing them as before; by default they leave "
                             "it at the end of the epoch they stop in (same records, fewer "
                             "run-updates)")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="on CUDA, let cuDNN pick the fastest (not repeatable) kernels")
    parser.add_argument("--tensorboard", type=Path, default=None, metavar="DIR",
                        help="also write each run's epochs as TensorBoard scalars, live, to "
                             "DIR/<run folder> (needs the [tensorboard] extra)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def cpu_parts(pack: Pack) -> list[Pack]:
    """On CPU, packs of more than CPU_PACK_IMAGES images per step train slower than the
    same runs one after another (their activations outgrow the caches; docs/performance.md
    "Performance"), so they train as consecutive sub-packs."""
    return sub_packs(pack.recipe, pack.runs, max(1, CPU_PACK_IMAGES // pack.recipe.b))


def sub_packs(recipe: Recipe, runs: Sequence[Run], size: int) -> list[Pack]:
    """Consecutive packs of at most `size` of the runs, in order."""
    return [Pack(recipe, tuple(runs[i:i + size])) for i in range(0, len(runs), size)]


def speed_paths(device: torch.device, arch: str, cuda_graphs: str,
                channels_last: str) -> dict[str, bool]:
    """The step's speed paths from the auto/on/off options (results never depend on them:
    tests/test_step.py). auto: CUDA graphs on CUDA; channels_last on CUDA, and on CPU for
    the archs where it measured faster (their declarations' cpu_channels_last:
    docs/performance.md, bench/bench_training.py; for the others contiguous activations
    are as fast or faster)."""
    cuda = device.type == "cuda"
    if cuda_graphs == "on" and not cuda:
        raise InputError(f"--cuda-graphs on is not allowed on device {device}: CUDA graphs "
                         "need a CUDA device; use auto or off")
    nhwc_auto = cuda or arch in CPU_CHANNELS_LAST
    return {"cuda_graph": cuda_graphs == "on" or (cuda_graphs == "auto" and cuda),
            "channels_last": channels_last == "on" or (channels_last == "auto" and nhwc_auto)}


def train_part(part: Pack, splits: data.Splits, args: argparse.Namespace,
               device: torch.device, root: Path, speed: dict[str, bool],
               stop: dict, beat: heartbeat.Heartbeat) -> list[dict]:
    """Train one (sub-)pack, resuming its checkpoint; the summaries of its runs."""
    curves = None if args.tensorboard is None else LiveWriter(args.tensorboard, part)
    trainer = PackTrainer(part, splits, args.out_dir, device, checkpoint_dir=root / part.key,
                          checkpoint_every_s=args.checkpoint_every,
                          progress=not args.no_progress, compaction=args.compaction,
                          observers=[beat] + ([curves] if curves else []),
                          trust_checkpoint=args.trust_checkpoint, guard=beat.check_owned,
                          **speed)
    beat.beat(trainer.loop.epoch)  # a resumed part starts past epoch 1
    trainer.stop_requested = stop["requested"]
    stop["trainer"] = trainer
    try:
        return trainer.run().summaries
    finally:
        if curves is not None:
            curves.close()


def unfinished_runs(runs: Sequence[Run], out_dir: Path) -> list[Run]:
    """The runs without a summary: a run is finished exactly when its summary exists."""
    return [r for r in runs if not (out_dir / r.run_dir / "summary.parquet").exists()]


def unfinished_parts(parts: list[Pack], out_dir: Path, root: Path) -> list[Pack]:
    """The parts still to train: a part with a checkpoint resumes whole (its checkpoint
    holds all its runs); any other trains only its runs without a summary, so a lost or
    deleted record retrains its run alone, and a finished pack trains nothing."""
    todo = []
    for part in parts:
        runs = unfinished_runs(part.runs, out_dir)
        if any((root / part.key).glob("*.pt")) or len(runs) == len(part.runs):
            todo.append(part)
        elif runs:
            todo.append(Pack(part.recipe, tuple(runs)))
    return todo


def halves_after_oom(part: Pack, out_dir: Path, device: torch.device) -> list[Pack]:
    """A pack that ran out of GPU memory trains as two sub-packs of its unfinished runs
    (memory use is set by the first updates, so nothing has usually been trained yet; a
    checkpoint of the whole pack cannot be resumed by its halves)."""
    runs = unfinished_runs(part.runs, out_dir)
    r = part.recipe
    if len(runs) <= 1:
        raise InputError(f"one run of {r.recipe_id} (arch={r.arch}, width={r.width:g}, "
                         f"b={r.b}) does not fit in the memory of {device}; b and width are "
                         "the experiment's, so it needs a device with more memory")
    half = (len(runs) + 1) // 2
    log.warning("pack of %d runs ran out of GPU memory: training its %d unfinished runs as "
                "sub-packs of %d and %d (a smaller execution.pack_size avoids the failed "
                "attempt)", len(part.runs), len(runs), half, len(runs) - half)
    return sub_packs(r, runs, half)


def stop_on_signals() -> dict[str, Any]:
    """The stop request the STOP_EXIT signals set: the signal, and the trainer told to
    stop at its next update (a pack's trainer registers itself as `trainer`)."""
    stop = {"requested": False, "trainer": None, "signal": None}

    def request_stop(signum: int, _frame: object) -> None:
        stop["requested"], stop["signal"] = True, signal.Signals(signum)
        if stop["trainer"] is not None:
            stop["trainer"].stop_requested = True

    for signum in STOP_EXIT:
        signal.signal(signum, request_stop)
    return stop


def tidy_checkpoints(args: argparse.Namespace, root: Path, trained: list[Pack]) -> None:
    """Remove the finished packs' checkpoints (unless --keep-checkpoint), and the default
    checkpoint folder once empty: a folder named by --checkpoint-dir stays."""
    if not args.keep_checkpoint:
        for part in trained:
            checkpoint.remove(root / part.key)
    if args.checkpoint_dir is None:
        checkpoint.remove_if_empty(root)


def main(args: argparse.Namespace) -> int:
    """`initmem train`: train each pack spec in turn; PREEMPTED_EXIT or INTERRUPTED_EXIT after
    a stop signal, PREEMPTED_EXIT when another trainer took a pack over."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    packs = [Pack.load(spec) for spec in args.specs]
    device = resolve_device(args.device, deterministic=not args.nondeterministic)
    for pack in packs:  # every pack of the job, before any trains
        memory.check_fits(pack.recipe, device)
    log.info("%s", describe_device(device))
    root = args.checkpoint_dir or args.out_dir / ".checkpoints"
    root.mkdir(parents=True, exist_ok=True)  # an unwritable place fails before training
    stop = stop_on_signals()
    summaries, trained = [], []
    for spec, pack in zip(args.specs, packs, strict=True):
        try:
            with ExitStack() as holding:
                beat = wait_for_pack(holding, root, pack, spec, args.out_dir, stop)
                if beat is not None:
                    summaries += train_pack(pack, args, device, root, stop, trained, beat)
        except Preempted as err:  # one line, no traceback
            status = STOP_EXIT[stop["signal"]]
            log.warning("received %s: %s; exiting with status %d", stop["signal"].name, err,
                        status)
            return status
        except heartbeat.Fenced as err:
            log.warning("%s; exiting with status %d", err, PREEMPTED_EXIT)
            return PREEMPTED_EXIT
    tidy_checkpoints(args, root, trained)
    for s in summaries:
        log.info("%s: %s, tau_best=%s, test_acc_best=%.4f", s["run_id"], s["status"],
                 s["tau_best"], s["test_acc_best"])
    return 0


def wait_for_pack(holding: ExitStack, root: Path, pack: Pack, spec: Path, out_dir: Path,
                  stop: dict) -> heartbeat.Heartbeat | None:
    """The pack's heartbeat, held in `holding`, once no other live trainer holds the pack;
    None when its runs all have records (finished here before, or by the trainer waited
    for). Preempted when a stop is asked for while waiting (nothing to checkpoint)."""
    said = -WAIT_NOTE_S
    while unfinished_runs(pack.runs, out_dir):
        try:
            return holding.enter_context(heartbeat.held(root, pack, spec))
        except heartbeat.Held as held:
            if stop["requested"]:
                raise Preempted(f"stopped while waiting for pack {pack.key}") from None
            if time.monotonic() - said >= WAIT_NOTE_S:
                log.info("%s: waiting, looking again every %.0f s (its records end this "
                         "job; if it stops, this job resumes its checkpoint)", held, POLL_S)
                said = time.monotonic()
            time.sleep(POLL_S)
    log.info("pack %s: all %d runs have records; nothing to train", pack.key, len(pack.runs))
    return None


def train_pack(pack: Pack, args: argparse.Namespace, device: torch.device, root: Path,
               stop: dict, trained: list[Pack], beat: heartbeat.Heartbeat) -> list[dict]:
    """Train the pack's unfinished runs, part by part (appending each part to `trained`,
    whose checkpoints main removes once the job is done), beating its heartbeat; the
    summaries it wrote."""
    speed = speed_paths(device, pack.recipe.arch, args.cuda_graphs, args.channels_last)
    splits = data.load_splits(pack.recipe, args.data_root, download=args.download,
                              allow_unverified=args.allow_unverified, device=device)
    log.info("pack %s of %d runs: %s, b=%d, %d epochs x %d steps; cuda_graph=%s, "
             "channels_last=%s; checkpoints in %s", pack.key, len(pack.runs),
             pack.recipe.recipe_id, pack.recipe.b, pack.recipe.epochs,
             pack.recipe.steps_per_epoch, speed["cuda_graph"], speed["channels_last"], root)
    parts = cpu_parts(pack) if device.type == "cpu" and not args.packed_on_cpu else [pack]
    if len(parts) > 1:
        log.info("cpu: training it as %d consecutive sub-packs of at most %d runs (more "
                 "than %d images per step train slower packed than sequentially on CPU; "
                 "--packed-on-cpu overrides)", len(parts), len(parts[0].runs),
                 CPU_PACK_IMAGES)
    queue = unfinished_parts(parts, args.out_dir, root)
    finished = len(pack.runs) - sum(len(part.runs) for part in queue)
    if finished:
        log.info("%d of the pack's %d runs already have records: training the other %d",
                 finished, len(pack.runs), len(pack.runs) - finished)
    summaries, done = [], 0
    while queue:
        part = queue.pop(0)
        trained.append(part)
        done += 1
        beat.fields.update(part=done, parts=done + len(queue), runs=len(part.runs))
        try:
            summaries += train_part(part, splits, args, device, root, speed, stop, beat)
        except torch.cuda.OutOfMemoryError:
            queue[:0] = halves_after_oom(part, args.out_dir, device)
        stop["trainer"] = None
        if device.type == "cuda":
            torch.cuda.empty_cache()  # a failed part's memory, before the next part
    return summaries
