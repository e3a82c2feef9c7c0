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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from initmem.errors import InputError
from initmem.plan.grid import load_config, make_packs
from initmem.plan.spec import ARCHS, Pack, Recipe

SECONDS_PER_IMAGE = {"resnet9": 6e-5, "r9_avgpool": 6e-5, "resnet9_ln": 9e-5,
                     "resnet56": 5e-5, "resnet110": 1e-4}
LAYERS = {"resnet9": 9, "r9_avgpool": 9, "resnet9_ln": 9, "resnet56": 58, "resnet110": 112}
STEP_OVERHEAD_S = 3e-3  # launches and bookkeeping of one ResNet-9 update: dominates at b = 16
EVAL_IMAGES = 20_000  # validation + test, per run and epoch, without eval_subset
EVAL_BATCH = 1000  # train.EVAL_BATCH["cuda"] (not imported: it would pull in torch)
SAFETY = 1.5
CONFIRM_ABOVE_GPU_HOURS = 1.0  # a local launch without GPU beyond this needs confirming
BENCH_COLUMNS = ("arch", "b", "N", "width", "packed_s_per_step", "sequential_s_per_step")
EAGER = "eager"  # the step path of a CSV without a path column, and of SLURM time limits


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
    """The model of a config's `execution` section: its throughput_csv (relative to the
    working directory; throughput_device picks a device) or, when that is null, BUILTIN.
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


def pack_seconds(pack: Pack, throughput: Throughput = BUILTIN) -> float:
    """Estimated device seconds to train every run of the pack, all epochs."""
    r, n = pack.recipe, len(pack.runs)
    step = throughput.step_seconds(r.arch, r.b, n, r.width)
    evaluation = n * _eval_images(r) * throughput.eval_image_seconds(r.arch, n, r.width)
    return r.epochs * (r.steps_per_epoch * step + evaluation)


def one_run_per_device_seconds(pack: Pack, throughput: Throughput = BUILTIN) -> float:
    """Device seconds of the pack's runs trained one run per device (packs of one)."""
    return sum(pack_seconds(Pack(pack.recipe, (run,)), throughput) for run in pack.runs)


def _eval_images(recipe: Recipe) -> int:
    return 2 * recipe.eval_subset if recipe.eval_subset else EVAL_IMAGES


def runtime_minutes(pack: Pack, floor: int, throughput: Throughput = BUILTIN) -> int:
    """SLURM time limit of the pack's job: the estimate with a safety margin, at least floor."""
    return max(floor, math.ceil(SAFETY * pack_seconds(pack, throughput) / 60))


def gpu_hours(packs: Iterable[Pack], throughput: Throughput = BUILTIN) -> float:
    return sum(pack_seconds(p, throughput) for p in packs) / 3600


def gpu_available() -> bool:
    """Whether this machine has an NVIDIA GPU (its driver's tool or device files), asked
    without torch: planning never imports it."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def cpu_launch_warning(packs: list[Pack], confirmed: bool) -> str | None:
    """Why launching these packs here needs confirming (no GPU, more than an hour of GPU
    work), or None. The message says what it would cost and how to go ahead."""
    hours = gpu_hours(packs)
    if confirmed or hours <= CONFIRM_ABOVE_GPU_HOURS or gpu_available():
        return None
    runs = sum(len(p.runs) for p in packs)
    return (f"this machine has no GPU, and the workflow would train {runs:,} runs in "
            f"{len(packs):,} packs here: about {hours:,.0f} GPU-hours on one H100-class "
            "GPU, and many times that on this CPU. To train here anyway add "
            "`--config confirm_cpu_full=True`; to use a cluster add `--profile "
            "slurm` (installed once by `initmem slurm-profile`); to rebuild tables and "
            "figures without training "
            "add `--config archive=PATH` (a runs archive, `snakemake archive`).")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=Path("config.yaml"))
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


def projection(packs: list[Pack], families: Iterable[str],
               throughput: Throughput) -> list[dict[str, object]]:
    """Per family and in total: runs, packs, packed and one-run-per-device hours, and the
    longest packed job's time limit in hours."""
    rows = []
    for fam in [*families, None]:
        own = [p for p in packs if fam is None or p.recipe.family == fam]
        packed = sum(pack_seconds(p, throughput) for p in own) / 3600
        single = sum(one_run_per_device_seconds(p, throughput) for p in own) / 3600
        rows.append({"family": fam or "total", "runs": sum(len(p.runs) for p in own),
                     "packs": len(own), "packed_h": packed, "one_run_per_device_h": single,
                     "longest_job_h": max(runtime_minutes(p, 1, throughput) for p in own) / 60})
    return rows


def _hours(h: float) -> str:
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


def main(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    model, origin = _cli_throughput(args, config["execution"])
    packs = list(make_packs(config).values())
    print(f"{args.config}: device-hours on {model.device}, from {origin}{model.source}; "
          "rules in initmem.plan.cost")
    print(f"{'family':<12} {'runs':>6} {'packs':>6} {'packed h':>12} {'1 run/device h':>15} "
          f"{'speed-up':>9} {'longest job':>13}")
    for r in projection(packs, config["families"], model):
        speedup = r["one_run_per_device_h"] / r["packed_h"]
        print(f"{r['family']:<12} {r['runs']:>6,} {r['packs']:>6,} {_hours(r['packed_h']):>12} "
              f"{_hours(r['one_run_per_device_h']):>15} {speedup:>8.2f}x "
              f"{_hours(r['longest_job_h']):>11} h")
    return 0
