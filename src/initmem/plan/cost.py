"""Device time of packs: SLURM time limits, the `cost` projection, the bill before a CPU launch.

One update of a pack of n runs at batch b and width w takes

    step_s = overhead_s(arch) + n * b * per_image_s(arch, n, b) * (w / w_m)^2

and every epoch evaluates the validation and test images at a third of the training cost
per image (a forward pass of three). A `Throughput` holds overhead_s and per_image_s, from
one of two sources:

- built in (`BUILTIN`, used when nothing is measured): a rough model of one H100-class GPU
  at width w_m = 1: SECONDS_PER_IMAGE[arch] for any n and b, and STEP_OVERHEAD_S per
  ResNet-9 update, scaled by the number of weight layers (LAYERS: kernel launches grow
  with them). Time limits add SAFETY on top.
- measured (`Throughput.from_csv`: a bench/bench_training.py CSV of one device and one
  step path), by rules:
  0. A CSV with a `path` column holds a row per (arch, b, N, width, path), path one of
     eager (plain PyTorch step), eager_cl (channels_last), graph (CUDA-graph-captured
     step), graph_cl; only the rows of the chosen path count (default eager; a CSV
     without the column is all eager). Its sequential_s_per_step is always N eager
     singles, repeated on each path row: only the eager path reads it (rule 1).
  1. Step times at (arch, width, N, b) are the median of the CSV's packed_s_per_step at N
     and, for N = 1 on the eager path, also of sequential_s_per_step / N (N eager singles
     stepped in turn; another path's N = 1 time is its own packed_s_per_step).
  2. overhead_s(arch, width) is the intercept of the N = 1 step time against b through the
     two smallest b measured (clipped to [0, the smaller step time]); an arch with one b
     measured at N = 1 takes the intercept of an arch fitted at that width, scaled by
     LAYERS; with none fitted it is 0 (all time is then per-image time).
  3. per_image_s at a measured point is (step_s - overhead_s) / (N b). A query takes the
     arch's points at the measured width nearest its width, then the nearest N, then the
     nearest b (nearest in log ratio, ties to the larger), and scales by (w / w_m)^2.
  4. An arch without measurements borrows from the measured arch with the closest LAYERS
     (first in spec.ARCHS on ties): per-image times scaled by the ratio of
     SECONDS_PER_IMAGE, overheads by the ratio of LAYERS.

Epochs. A run trains recipe.epochs unless it early-stops. `Stopping` estimates when:
- a measured records table (`initmem cost --records`, the aggregate's runs.parquet)
  gives a recorded run's epochs_run;
- otherwise a run with patience, of the paper's Table 5 recipe (300 epochs, eta = 1e-3,
  full width and data), stops at Table 5's published best-validation epoch (the mean over
  seeds, paper/published/table5.csv) plus its patience, at most recipe.epochs: an
  estimate. Table 5 has SGD and Adam; sgd_momentum takes SGD's epochs, and the other
  adaptive optimizers (their declaration's `adaptive`) Adam's;
- otherwise all its epochs (a bound).
With compaction (execution.compaction, on by default) the runs that stop leave their
pack at the end of their epoch, so the pack runs at N, then fewer, runs; without it
every run is computed until the last one stops. A pack that runs longer than its
estimate is stopped by SIGUSR1 ten minutes before its time limit, checkpoints and is
resubmitted (retries), so an estimate too low costs a resubmission, never a result.

`throughput(execution)` picks the model of the workflow's SLURM time limits and of
`initmem cost --config`: the eager path of execution.throughput_csv when the config names
one, else BUILTIN. Limits always use eager steps: a CUDA-graph run falls back to eager
when its self-check fails, so its limit must cover eager.
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from initmem import checkout
from initmem.errors import InputError
from initmem.plan.architectures import ARCHITECTURES, ARCHS
from initmem.plan.grid import load_config, make_packs
from initmem.plan.optimizers import declarations
from initmem.plan.spec import Pack, Recipe, Run
from initmem.vocabulary import missing

SECONDS_PER_IMAGE = {a.name: a.gpu_seconds_per_image for a in ARCHITECTURES.values()}
LAYERS = {a.name: a.layers for a in ARCHITECTURES.values()}
STEP_OVERHEAD_S = 3e-3  # launches and bookkeeping of one ResNet-9 update: dominates at b = 16
EVAL_IMAGES = 20_000  # validation + test, per run and epoch, without eval_subset
EVAL_BATCH = 1000  # training.trainer.EVAL_BATCH["cuda"] (not imported: it pulls in torch)
SAFETY = 1.5
CONFIRM_ABOVE_GPU_HOURS = 1.0  # a local launch without GPU beyond this needs confirming
BENCH_COLUMNS = ("arch", "b", "N", "width", "packed_s_per_step", "sequential_s_per_step")
EAGER = "eager"  # the step path of a CSV without a path column, and of SLURM time limits
TABLE5 = "table5.csv"  # in the published folder: its tau_best rows are the stop estimates
# Table 5's recipe: the published best-validation epochs are of these settings only.
TABLE5_RECIPE = {"epochs": 300, "lr0": 1e-3, "width": 1.0, "train_subset": None}
# Table 5 publishes SGD's and Adam's epochs: every adaptive optimizer takes Adam's, every
# other SGD's.
TABLE5_OPTIMIZERS = {True: "adam", False: "sgd"}


@dataclass(frozen=True)
class Throughput:
    """Per-update overheads and per-image seconds of one device (rules: module docstring)."""

    device: str
    source: str
    overhead_s: dict[tuple[str, float], float]  # (arch, width) -> seconds per update
    per_image_s: dict[str, dict[tuple[float, int, int], float]]  # arch -> (w, N, b) -> s

    def step_seconds(self, arch: str, b: int, n: int, width: float) -> float:
        """Seconds of one update of a pack of n runs."""
        w_m, per_image = self._per_image(arch, n, b, width)
        return self.overhead_s.get((arch, w_m), 0.0) + n * b * per_image

    def eval_image_seconds(self, arch: str, n: int, width: float) -> float:
        """Seconds to evaluate one image of each of n runs (a third of a training image)."""
        return self._per_image(arch, n, EVAL_BATCH, width)[1] / 3

    def _per_image(self, arch: str, n: int, b: int, width: float) -> tuple[float, float]:
        points = self.per_image_s[arch]
        w_m = _nearest(width, {w for w, _, _ in points})
        n_m = _nearest(n, {k for w, k, _ in points if w == w_m})
        b_m = _nearest(b, {c for w, k, c in points if (w, k) == (w_m, n_m)})
        return w_m, points[w_m, n_m, b_m] * (width / w_m) ** 2

    @classmethod
    def from_csv(cls, path: str | Path, device: str | None = None,
                 step_path: str = EAGER) -> Throughput:
        """The measured model from a benchmark CSV (one device's rows; `device` picks one
        of several by its device_name column, or device where that is absent; `step_path`
        picks the rows of one path column value, rule 0)."""
        steps = _read_bench(Path(path), device, step_path)
        label = next(iter(steps))[0]
        times = {key[1:]: statistics.median(v) for key, v in steps.items()}
        return cls(label, f"{path}, {step_path} steps", *_fit(times))


BUILTIN = Throughput(
    device="H100-class GPU (built-in estimate)", source="built-in constants",
    overhead_s={(a, 1.0): STEP_OVERHEAD_S * LAYERS[a] / LAYERS["resnet9"] for a in ARCHS},
    per_image_s={a: {(1.0, 1, 1): SECONDS_PER_IMAGE[a]} for a in ARCHS})


def throughput(execution: Mapping[str, Any], step_path: str = EAGER) -> Throughput:
    """The model of a config's `execution` section: its throughput_csv (a relative one from the
    working directory: grid.load_config has put a config file's in its checkout;
    throughput_device picks a device) or, when that is null, BUILTIN.
    The workflow's time limits take the default eager path (module docstring)."""
    csv_path = execution.get("throughput_csv")
    if csv_path is None:
        return BUILTIN
    try:
        return Throughput.from_csv(csv_path, execution.get("throughput_device"), step_path)
    except InputError as err:  # say which config key to fix, or to set null
        raise InputError(f"execution.throughput_csv: {err} (or set throughput_csv: null "
                         "for the built-in estimate)") from None


def _nearest(x: float, measured: Iterable[float]) -> float:
    """The measured value closest to x in log ratio (ties: the larger)."""
    return min(measured, key=lambda m: (abs(math.log(x / m)), -m))


def _read_bench(path: Path, device: str | None, step_path: str) -> dict[tuple, list[float]]:
    """(device, arch, width, N, b) -> measured seconds per update of the pack."""
    if not path.is_file():
        raise InputError(f"benchmark CSV {path} does not exist; write one with "
                         "`python bench/bench_training.py --out PATH`")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    missing = [c for c in BENCH_COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise InputError(f"benchmark CSV {path} lacks column(s) {', '.join(missing)} (or has "
                         f"no rows); it needs {', '.join(BENCH_COLUMNS)}")
    label = "device_name" if "device_name" in rows[0] else "device"
    devices = sorted({r.get(label, "") for r in rows})
    if device is not None:
        rows = [r for r in rows if r.get(label) == device]
    if device not in (None, *devices) or (device is None and len(devices) > 1):
        raise InputError(f"benchmark device {device!r} is not allowed for {path}: choose "
                         f"one of its devices {', '.join(map(repr, devices))}")
    steps: dict[tuple, list[float]] = defaultdict(list)
    for r in _path_rows(path, rows, step_path):
        if r["arch"] not in ARCHS:
            raise InputError(f"benchmark CSV {path}: arch={r['arch']!r} is not allowed; "
                             f"arch must be one of {', '.join(ARCHS)}")
        key = (r[label], r["arch"], float(r["width"]))
        n, b = int(r["N"]), int(r["b"])
        steps[(*key, n, b)].append(float(r["packed_s_per_step"]))
        if step_path == EAGER:
            steps[(*key, 1, b)].append(float(r["sequential_s_per_step"]) / n)
    return steps


def _path_rows(path: Path, rows: list[dict[str, str]], step_path: str) -> list[dict]:
    """The rows of one step path (rule 0). Selecting before reading sequential_s_per_step
    takes it once per point, not once per path row, which would skew the N = 1 medians."""
    paths = sorted({_step_path(r) for r in rows})
    if step_path not in paths:
        raise InputError(f"benchmark path {step_path!r} is not in {path}: choose one of "
                         f"its paths {', '.join(map(repr, paths))}")
    return [r for r in rows if _step_path(r) == step_path]


def _step_path(row: dict[str, str]) -> str:
    return row.get("path") or EAGER  # no path column (or an empty cell): eager


def _fit(times: dict[tuple[str, float, int, int], float]):
    """Rules 2-4 of the module docstring: (overhead_s, per_image_s) of every arch."""
    measured = sorted({a for a, *_ in times}, key=ARCHS.index)
    widths = sorted({w for _, w, _, _ in times})
    fitted: dict[tuple[str, float], float] = {}
    for arch in measured:
        for w in widths:
            singles = sorted((b, t) for (a, w2, n, b), t in times.items()
                             if (a, w2, n) == (arch, w, 1))
            if len(singles) >= 2:
                (b1, t1), (b2, t2) = singles[:2]
                fitted[arch, w] = min(max(t1 - b1 * (t2 - t1) / (b2 - b1), 0.0), t1)
    overhead = {}
    for arch in measured:
        for w in widths:
            donors = [a for a in measured if (a, w) in fitted]
            if (arch, w) in fitted or donors:
                donor = arch if (arch, w) in fitted else _closest(arch, donors)
                overhead[arch, w] = fitted[donor, w] * LAYERS[arch] / LAYERS[donor]
    per_image: dict[str, dict[tuple[float, int, int], float]] = defaultdict(dict)
    for (arch, w, n, b), t in times.items():
        per_image[arch][w, n, b] = max(t - overhead.get((arch, w), 0.0), 0.0) / (n * b)
    for arch in ARCHS:
        if arch not in measured:
            donor = _closest(arch, measured)
            scale = SECONDS_PER_IMAGE[arch] / SECONDS_PER_IMAGE[donor]
            per_image[arch] = {k: s * scale for k, s in per_image[donor].items()}
            overhead.update({(arch, w): s * LAYERS[arch] / LAYERS[donor]
                             for (a, w), s in list(overhead.items()) if a == donor})
    return overhead, dict(per_image)


def _closest(arch: str, candidates: list[str]) -> str:
    return min(candidates, key=lambda a: (abs(LAYERS[a] - LAYERS[arch]), ARCHS.index(a)))


@dataclass(frozen=True)
class Stopping:
    """Expected epochs of runs (rules: module docstring, "Epochs")."""

    published: dict[tuple[str, int, str, float], float]  # (arch, b, opt, sigma_w) -> tau_best
    adaptive: frozenset[str] = frozenset()  # optimizers that take Adam's published epochs
    measured: dict[str, int] = field(default_factory=dict)  # run_id -> recorded epochs_run

    def epochs(self, run: Run) -> float:
        """The epochs the run is expected to train."""
        r = run.recipe
        if run.run_id in self.measured:
            return self.measured[run.run_id]
        tau = self.published.get((r.arch, r.b, self._stand_in(r.optimizer), run.sigma_w))
        if r.patience is None or tau is None or not _is_table5_recipe(r):
            return r.epochs
        return min(r.epochs, tau + r.patience)

    def _stand_in(self, optimizer: str) -> str:
        return TABLE5_OPTIMIZERS[optimizer in self.adaptive]

    @classmethod
    def from_files(cls, published: str | Path, adaptive: Iterable[str] = (),
                   records: str | Path | None = None) -> Stopping:
        """Table 5's tau_best rows of the `published` folder; epochs_run of the runs of a
        records table (runs.parquet) that have one."""
        return cls(_published_tau_best(Path(published) / TABLE5), frozenset(adaptive),
                   {} if records is None else _measured_epochs(Path(records)))


ALL_EPOCHS = Stopping({})  # every run trains all its epochs (unless a records table says)


def _is_table5_recipe(recipe: Recipe) -> bool:
    return all(getattr(recipe, k) == v for k, v in TABLE5_RECIPE.items())


def _published_tau_best(path: Path) -> dict[tuple[str, int, str, float], float]:
    if not path.is_file():
        raise InputError(f"published table {path} does not exist; it must be the transcribed "
                         "Table 5 (paper/published/table5.csv)")
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["metric"] == "tau_best" and r["value"]]
    return {(r["config"], int(r["b"]), r["optimizer"], float(r["sigma_w"])): float(r["value"])
            for r in rows}


def _measured_epochs(path: Path) -> dict[str, int]:
    """run_id -> epochs_run of the runs with a record (status other than missing)."""
    import pandas as pd  # only `initmem cost --records` needs it, not the workflow's parse

    try:
        runs = pd.read_parquet(path, columns=["run_id", "status", "epochs_run"])
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"--records {path}: not a runs table with run_id, status and "
                         f"epochs_run ({err}); give the aggregate's runs.parquet") from None
    done = runs[~missing(runs) & runs["epochs_run"].notna()]
    return dict(zip(done["run_id"], done["epochs_run"].astype(int), strict=True))


def pack_seconds(pack: Pack, throughput: Throughput = BUILTIN, stopping: Stopping = ALL_EPOCHS,
                 compaction: bool = True) -> float:
    """Estimated device seconds to train the pack: with compaction each stretch of epochs
    at the number of runs still training, without it all runs until the last one stops."""
    ends = sorted(stopping.epochs(run) for run in pack.runs)
    if not compaction:
        ends = [ends[-1]] * len(ends)
    seconds, done = 0.0, 0.0
    for i, end in enumerate(ends):  # from the previous stop to this one, len - i runs train
        seconds += (end - done) * _epoch_seconds(pack.recipe, len(ends) - i, throughput)
        done = end
    return seconds


def _epoch_seconds(r: Recipe, n: int, throughput: Throughput) -> float:
    """One epoch of a pack of n runs: its updates and the evaluation of every run."""
    step = throughput.step_seconds(r.arch, r.b, n, r.width)
    evaluation = n * _eval_images(r) * throughput.eval_image_seconds(r.arch, n, r.width)
    return r.steps_per_epoch * step + evaluation


def one_run_per_device_seconds(pack: Pack, throughput: Throughput = BUILTIN,
                               stopping: Stopping = ALL_EPOCHS) -> float:
    """Device seconds of the pack's runs trained one run per device (packs of one)."""
    return sum(pack_seconds(Pack(pack.recipe, (run,)), throughput, stopping)
               for run in pack.runs)


def _eval_images(recipe: Recipe) -> float:
    """Inference images of one run per epoch: validation and test, and its share of the
    test at tau_best once after training."""
    per_epoch = 2 * recipe.eval_subset if recipe.eval_subset else EVAL_IMAGES
    return per_epoch + (recipe.best_test_subset or 0) / recipe.epochs


def runtime_minutes(pack: Pack, floor: int, throughput: Throughput = BUILTIN,
                    stopping: Stopping = ALL_EPOCHS, compaction: bool = True) -> int:
    """SLURM time limit of the pack's job: the estimate with a safety margin, at least floor
    (a pack that outruns it checkpoints and is resubmitted: module docstring)."""
    return limit_minutes(pack_seconds(pack, throughput, stopping, compaction), floor)


def limit_minutes(seconds: float, floor: int) -> int:
    """The time limit of a job estimated at `seconds`: with the safety margin, >= floor."""
    return max(floor, math.ceil(SAFETY * seconds / 60))


def training_jobs(seconds: Mapping[str, float], packs_per_job: int) -> dict[str, list[str]]:
    """Job name -> its pack ids: the packs (pack id -> estimated seconds) in as few jobs of
    at most `packs_per_job` as hold them, balanced by time (longest pack first, each to
    the least loaded job with room), so jobs running side by side end together. A job of
    one pack is named by it; a larger one by its first pack and how many more."""
    if packs_per_job < 1:
        raise InputError(f"packs_per_job={packs_per_job} is not allowed; it must be >= 1")
    jobs: list[list[str]] = [[] for _ in range(math.ceil(len(seconds) / packs_per_job))]
    load = [0.0] * len(jobs)
    for pack_id in sorted(seconds, key=seconds.__getitem__, reverse=True):
        j = min((j for j, ids in enumerate(jobs) if len(ids) < packs_per_job),
                key=load.__getitem__)
        jobs[j].append(pack_id)
        load[j] += seconds[pack_id]
    return {ids[0] if len(ids) == 1 else f"{ids[0]}-and-{len(ids) - 1}-more": ids
            for ids in jobs}


def gpu_hours(packs: Iterable[Pack], throughput: Throughput = BUILTIN,
              stopping: Stopping = ALL_EPOCHS, compaction: bool = True) -> float:
    """Device-hours to train these packs: their pack_seconds, summed."""
    return sum(pack_seconds(p, throughput, stopping, compaction) for p in packs) / 3600


def gpu_available() -> bool:
    """Whether this machine has an NVIDIA GPU (its driver's tool or device files), asked
    without torch: planning never imports it."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def cpu_launch_warning(packs: list[Pack], confirmed: bool, stopping: Stopping = ALL_EPOCHS,
                       compaction: bool = True) -> str | None:
    """Why launching these packs here needs confirming (no GPU, more than an hour of GPU
    work), or None. The message says what it would cost and how to go ahead."""
    hours = gpu_hours(packs, BUILTIN, stopping, compaction)
    if confirmed or hours <= CONFIRM_ABOVE_GPU_HOURS or gpu_available():
        return None
    runs = sum(len(p.runs) for p in packs)
    return (f"Stopped before training: this machine has no GPU, and the workflow would "
            f"train {runs:,} runs in {len(packs):,} packs here, about {hours:,.0f} GPU-hours "
            "on one H100-class GPU and many times that on this CPU. Ways forward:\n"
            "  make demo          the whole pipeline on a small demo config, on this CPU "
            "(minutes)\n"
            "  make laptop        tables, figures and verdicts from the committed laptop "
            "study's runs\n"
            "  --profile slurm    train on a cluster (the profile: `initmem slurm-profile`)\n"
            "  --config archive=PATH            rebuild from a runs archive (`snakemake "
            "archive`)\n"
            "  --config confirm_cpu_full=True   train here anyway")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem cost`."""
    parser.add_argument("--config", type=Path, default=checkout.CONFIG)
    parser.add_argument("--bench", type=Path, default=None, metavar="CSV",
                        help="measured throughput (bench/bench_training.py's CSV); default: "
                             "the config's execution.throughput_csv, or when that is null "
                             "the built-in H100-class estimate")
    parser.add_argument("--bench-device", default=None, metavar="NAME",
                        help="the CSV's device to use when it holds several (default: "
                             "execution.throughput_device)")
    parser.add_argument("--bench-path", default=EAGER, metavar="NAME",
                        help="the CSV's step path: eager, eager_cl, graph or graph_cl "
                             "(default: eager, as the SLURM time limits use)")
    parser.add_argument("--published", type=Path, default=checkout.PUBLISHED,
                        metavar="DIR", help="the transcribed tables; Table 5's best-validation "
                        "epochs estimate when early-stopping runs stop (default "
                        "paper/published of initmem's checkout)")
    parser.add_argument("--records", type=Path, default=None, metavar="RUNS",
                        help="a runs table (results/aggregate/runs.parquet): its recorded "
                             "runs count the epochs they trained")


def projection(packs: list[Pack], families: Iterable[str], throughput: Throughput,
               stopping: Stopping = ALL_EPOCHS, compaction: bool = True) -> list[dict]:
    """Per family and in total: runs, packs, hours packed with and without compaction, one
    run per device and with every run training all its epochs (packed, no early stopping),
    and the longest packed job's time limit in hours (compacted or not, as `compaction`)."""
    columns = {"packed_h": lambda p: pack_seconds(p, throughput, stopping),
               "uncompacted_h": lambda p: pack_seconds(p, throughput, stopping, False),
               "one_run_per_device_h": lambda p: one_run_per_device_seconds(p, throughput,
                                                                            stopping),
               "all_epochs_h": lambda p: pack_seconds(p, throughput)}
    rows = []
    for fam in [*families, None]:
        own = [p for p in packs if fam is None or p.recipe.family == fam]
        limit = max(runtime_minutes(p, 1, throughput, stopping, compaction) for p in own)
        rows.append({"family": fam or "total", "runs": sum(len(p.runs) for p in own),
                     "packs": len(own),
                     **{k: sum(map(seconds, own)) / 3600 for k, seconds in columns.items()},
                     "longest_job_h": limit / 60})
    return rows


def hours_text(h: float) -> str:
    """Hours with three significant digits at least (demo configs take minutes)."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


def _cli_throughput(args: argparse.Namespace,
                    execution: Mapping[str, Any]) -> tuple[Throughput, str]:
    """The model `cost` uses and where it came from: --bench, else the config's
    execution.throughput_csv (via `throughput`), else BUILTIN (of eager steps only)."""
    if args.bench is not None:
        return Throughput.from_csv(args.bench, args.bench_device, args.bench_path), "--bench "
    if execution["throughput_csv"] is None and args.bench_path != EAGER:
        raise InputError(f"--bench-path {args.bench_path!r} needs a benchmark CSV (--bench or "
                         "execution.throughput_csv); the built-in estimate has only "
                         f"{EAGER!r} steps")
    device = args.bench_device or execution["throughput_device"]
    model = throughput({**execution, "throughput_device": device}, args.bench_path)
    return model, "" if model is BUILTIN else "execution.throughput_csv "


def config_stopping(config: Mapping[str, Any], published: str | Path,
                    records: str | Path | None = None) -> Stopping:
    """The Stopping of a config: its adaptive optimizers take Adam's published epochs."""
    adaptive = [name for name in config["optimizers"] if declarations()[name].adaptive]
    return Stopping.from_files(published, adaptive, records)


def _epochs_note(packs: list[Pack], stopping: Stopping, args: argparse.Namespace) -> str:
    """Where the projection's epochs come from, with how many runs each source covers."""
    runs = [run for p in packs for run in p.runs]
    measured = sum(run.run_id in stopping.measured for run in runs)
    estimated = sum(run.run_id not in stopping.measured
                    and stopping.epochs(run) < run.recipe.epochs for run in runs)
    source = "no --records table" if args.records is None else f"--records {args.records}"
    return (f"epochs: {measured:,} runs as recorded ({source}); "
            f"{estimated:,} early-stopping runs estimated to stop at Table 5's published "
            f"best-validation epoch + patience (an estimate, {args.published / TABLE5}); "
            f"the other {len(runs) - measured - estimated:,} all their epochs")


def main(args: argparse.Namespace) -> int:
    """`initmem cost`: print the config's projected device-hours per family."""
    config = load_config(args.config)
    model, origin = _cli_throughput(args, config["execution"])
    stopping = config_stopping(config, args.published, args.records)
    compaction = config["execution"]["compaction"]
    packs = list(make_packs(config).values())
    print(f"{args.config}: device-hours on {model.device}, from {origin}{model.source}; "
          "rules in initmem.plan.cost")
    print(f"{'family':<12} {'runs':>6} {'packs':>6} {'packed h':>9} {'no compaction h':>16} "
          f"{'1 run/device h':>15} {'speed-up':>9} {'all epochs h':>13} {'longest job':>13}")
    for r in projection(packs, config["families"], model, stopping, compaction):
        speedup = r["one_run_per_device_h"] / r["packed_h"]
        print(f"{r['family']:<12} {r['runs']:>6,} {r['packs']:>6,} {hours_text(r['packed_h']):>9} "
              f"{hours_text(r['uncompacted_h']):>16} {hours_text(r['one_run_per_device_h']):>15} "
              f"{speedup:>8.2f}x {hours_text(r['all_epochs_h']):>13} "
              f"{hours_text(r['longest_job_h']):>11} h")
    print(_epochs_note(packs, stopping, args))
    print(f"packed h: runs that stop leave their pack (compaction); longest job: the time "
          f"limit with execution.compaction = {compaction}")
    return 0
