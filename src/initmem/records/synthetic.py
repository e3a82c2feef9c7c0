"""Synthetic run records: plausible fake results for every run of a config, for testing.

The generator follows the shapes the paper reports, not its numbers: each run keeps a
"memory" m(t) in [0, 1] of sigma_w that shrinks with its forgetting clock, epoch by epoch
(T_SGD with the momentum-amplified rate for the SGD family, T_adapt for adaptive methods
down to a floor growing with b, times factors for T_L2, augmentation and LayerNorm).
Accuracy falls with sigma_w by about 27 pp times m(t), so |beta(t)| decays with m(t).
SGD's interpolation and best epochs grow with sigma_w and b, adaptive methods' are flat;
||W||_F keeps sigma_w in proportion to m(t); runs with a patience stop early.
BatchNorm's moving variance forgets its initial 1 as 0.99^k toward a batch variance
that grows as sigma_w^2, so small-sigma_w runs start far from converged (bn_var_ratio).
Every row has record_source == "generated": tables, figures and the paper mark it.

Output: results/aggregate/runs.parquet and epochs.parquet in the aggregate's format
(optionally a random fraction of runs left "missing"), and optionally per-run record
folders (records.write_records) for the workflow's tests.
"""

from __future__ import annotations

import argparse
import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from initmem.plan import grid
from initmem.plan.architectures import ARCHITECTURES
from initmem.plan.schedule import schedule_clocks
from initmem.plan.spec import Recipe, Run
from initmem.records import aggregate
from initmem.records import files as records
from initmem.vocabulary import (
    BN_MOMENTUM,
    COMPLETED,
    EARLY_STOPPED,
    GENERATED,
    missing,
)

SOURCE = GENERATED
SPREAD_SCALE = 0.27  # test-accuracy drop from sigma_w = 0.1 to 2.5 at full memory
# First BatchNorm layer's batch variance / sigma_w^2: the measured ~1,000x ratio of
# sigma_w = 0.1 after 60 updates (issue 22)
BN_VARIANCE_PER_SIGMA2 = 0.05


def memory(r: Recipe, clocks: pd.DataFrame, adaptive: bool) -> np.ndarray:
    """Fraction of the sigma_w dependence left at the end of each epoch (1: all of it):
    adaptive methods decay on T_adapt to a floor that grows with b, the SGD family on
    T_SGD with the momentum-amplified rate, and T_L2 removes what is left."""
    if adaptive:
        floor = 0.05 * (r.b / 16) ** 0.45
        m = floor + (1 - floor) * np.exp(-clocks["T_adapt"].to_numpy() / 3)
    else:
        t_eff = clocks["T_SGD"].to_numpy() / (1 - _momentum(r)) ** 2
        m = 1 / (1 + (t_eff / 1.4) ** 0.7)
    m = m * np.exp(-((clocks["T_L2"].to_numpy() / 0.75) ** 2))
    if r.augment:
        m = m * min(1.0, 0.35 + 0.1 * math.log2(r.b / 16))
    return m * (0.7 if ARCHITECTURES[r.arch].normalisation == "layer" else 1.0)


def _momentum(r: Recipe) -> float:
    """The SGD family's momentum (0 for SGD without)."""
    return r.optimizer_hyperparameters.get("momentum", 0.0)


def outcome_targets(r: Recipe, sigma: np.ndarray, m: float, rng: np.random.Generator,
                    adaptive: bool) -> dict:
    """Per-run targets from the final memory m: accuracy level and seed noise, tau_best,
    tau_interp, train-accuracy plateau."""
    n, logb = len(sigma), math.log2(r.b / 16)
    frac = (1 - np.exp(-(sigma - 0.1))) / (1 - math.exp(-2.4))  # 0 at 0.1, 1 at 2.5
    base = (ARCHITECTURES[r.arch].synthetic_accuracy + 0.045 * r.augment
            + 0.02 * (r.l2 > 0 and r.lr0 >= 1e-2))
    if adaptive:
        base += -0.05 + 0.012 * logb
        noise, tau_i = 0.015, np.full(n, 30 * (16 / r.b) ** 0.5 + 5)
        tau_b = np.full(n, 6.0 * r.b / 16)
        gap = 0.05 * (16 / r.b) ** 0.7 + 0.01
    else:
        base -= 0.015 * logb * m
        unstable = r.lr0 / (1 - _momentum(r)) / r.b > 0.05  # the paper's b=16 best-recipe SGD
        noise, gap = (0.05 if unstable else 0.004), 0.004
        boost = math.sqrt(r.lr0 / (1 - _momentum(r)) / 1e-3)
        rise = 4 * (r.b / 16) ** 0.45
        tau_i = np.maximum(8, 9 * (r.b / 16) ** 0.1 * rise ** (frac * m) / boost)
        tau_b = 10 * (r.b / 16) ** 0.2 * (1 + 0.5 * r.b / 16 * frac * m)
    if r.l2 > 0 or r.augment:  # regularized runs keep improving: late best epoch
        tau_b = np.maximum(tau_b, 0.9 * r.epochs * (1 - m))
    drop = 0.3 * r.augment + ARCHITECTURES[r.arch].synthetic_plateau_drop
    plateau = 1 - drop * m**2 * frac**0.5 * (r.b / 16) ** 0.2
    jitter = rng.lognormal(0, 0.4 if adaptive else 0.1, n)
    return {"base": base + rng.normal(0, noise, n), "frac": frac, "gap": gap,
            "plateau": plateau, "tau_b": np.clip(tau_b * jitter, 1, r.epochs),
            "tau_i": tau_i * rng.lognormal(0, 0.05, n) * (3 if r.augment else 1)}


def bn_var_ratio(r: Recipe, sigma: np.ndarray, epochs: np.ndarray) -> np.ndarray:
    """Moving / batch variance at the end of each epoch, (runs, epochs): after k updates
    the moving variance is 0.99^k * 1 + (1 - 0.99^k) * v for a batch variance v; NaN for
    a network without BatchNorm."""
    if ARCHITECTURES[r.arch].normalisation != "batch":
        return np.full((len(sigma), epochs.shape[-1]), np.nan)
    kept = BN_MOMENTUM ** (epochs * r.steps_per_epoch)
    return kept / (BN_VARIANCE_PER_SIGMA2 * sigma[:, None] ** 2) + 1 - kept


def histories(r: Recipe, sigma: np.ndarray, rng: np.random.Generator,
              adaptive: bool) -> dict:
    """Per-epoch curves, arrays of shape (runs, epochs); `adaptive`: the optimizer's
    declaration says it is an adaptive method."""
    n, t = len(sigma), np.arange(1, r.epochs + 1, dtype=float)[None, :]
    clocks = schedule_clocks(r.lr0, r.b, r.steps_per_epoch, r.epochs,
                             r.shrinkage, r.schedule, r.cosine_alpha)
    m = memory(r, clocks, adaptive)
    g = outcome_targets(r, sigma, float(m[-1]), rng, adaptive)
    col = {k: np.asarray(v, float)[:, None] for k, v in g.items() if np.ndim(v)}
    fit = col["tau_i"] / math.log(0.9 / 0.005)  # train error hits 0.5% at tau_i
    train_acc = col["plateau"] - (col["plateau"] - 0.1) * np.exp(-t / fit)
    level = np.clip(col["base"] - SPREAD_SCALE * m[None, :] * col["frac"], 0.12, 0.99)
    rise = 1.5 if adaptive else 3.0  # epochs to reach the level
    val_acc = (level + g["gap"] * (1 - np.exp(-t / col["tau_b"]))  # slow late gain
               - (level - 0.1) * np.exp(-t / rise) + rng.normal(0, 0.002, (n, r.epochs)))
    val_loss = (0.35 + 1.2 * (1 - level) + 0.08 * np.log(t / col["tau_b"]) ** 2
                + rng.normal(0, 0.001, (n, r.epochs)))
    norm0 = ARCHITECTURES[r.arch].synthetic_norm_per_sigma * sigma[:, None]
    norm = norm0 * m[None, :] + 40.0 * (1 - m[None, :]) + 3 * (1 - np.exp(-t / 20))
    train_acc = np.clip(train_acc + rng.normal(0, 0.001, (n, r.epochs)), 0, 1)
    return {"train_acc": train_acc, "train_loss": 2.3 * (1 - train_acc) ** 1.3 + 0.002,
            "val_acc": np.clip(val_acc, 0, 1), "val_loss": val_loss,
            "test_acc": np.clip(val_acc - 0.003 + rng.normal(0, 0.002, (n, r.epochs)), 0, 1),
            "test_loss": val_loss + 0.01, "kernel_fro_norm": norm,
            "bn_var_ratio": bn_var_ratio(r, sigma, t),
            **{c: np.broadcast_to(clocks[c].to_numpy(), (n, r.epochs))
               for c in ("lr", "T_SGD", "T_L2", "T_adapt")},
            "norm_init": norm0[:, 0]}


def stop_epochs(val_loss: np.ndarray, patience: int | None) -> np.ndarray:
    """Epochs run: Keras EarlyStopping stops once val_loss has not improved for
    `patience` epochs; without patience every epoch runs."""
    n, epochs = val_loss.shape
    if not patience:
        return np.full(n, epochs)
    t = np.arange(1, epochs + 1)
    improved = val_loss < np.minimum.accumulate(val_loss, axis=1) + 1e-15
    last_best = np.maximum.accumulate(np.where(improved, t, 0), axis=1)
    stale = (t - last_best) >= patience
    return np.where(stale.any(axis=1), stale.argmax(axis=1) + 1, epochs)


def outcomes(h: dict, stop: np.ndarray) -> dict:
    """The summary outcomes of each run (records.files.epoch_outcomes, as the trainer's)."""
    n, epochs = h["val_loss"].shape
    numbered = {**h, "epoch": np.broadcast_to(np.arange(1, epochs + 1), (n, epochs))}
    return {"status": np.where(stop < epochs, EARLY_STOPPED, COMPLETED), "epochs_run": stop,
            **records.epoch_outcomes(numbered, stop), "kernel_fro_norm_init": h["norm_init"]}


def _rng(seed: int, recipe: Recipe) -> np.random.Generator:
    """One stream per recipe, fixed by the seed and the recipe (not by run order)."""
    return np.random.default_rng([seed, zlib.crc32(f"{recipe.family}/{recipe.recipe_id}/"
                                                   f"b{recipe.b}".encode())])


def generate(config: dict, seed: int = 0, families: list[str] | None = None,
             missing: float = 0.0) -> tuple[pd.DataFrame, pa.Table]:
    """(runs table, epochs table) of the chosen families, built by initmem.aggregate from
    generated records; a `missing` fraction of runs (at random) gets no records."""
    if families is not None:
        unknown = sorted(set(families) - set(config["families"]))
        if unknown:
            raise grid.ConfigError(f"families {unknown} are not allowed; the config has "
                                   f"{', '.join(config['families'])}")
    runs = [r for r in grid.expand_runs(config)
            if families is None or r.recipe.family in families]
    by_recipe: dict[Recipe, list[Run]] = {}
    for run in runs:
        by_recipe.setdefault(run.recipe, []).append(run)
    drop = np.random.default_rng([seed, 1]).random(len(runs)) < missing
    dropped = {run.run_id for run, d in zip(runs, drop, strict=True) if d}
    rows, pieces = [], []
    for recipe, members in by_recipe.items():
        sigma = np.array([r.sigma_w for r in members])
        h = histories(recipe, sigma, _rng(seed, recipe), recipe.declaration.adaptive)
        stop = stop_epochs(h["val_loss"], recipe.patience)
        out = outcomes(h, stop)
        for i, run in enumerate(members):
            if run.run_id not in dropped:
                rows.append({**run.as_row(), **{k: v[i] for k, v in out.items()},
                             **PROVENANCE})
                pieces.append((run, i, h, int(stop[i])))
    summaries = records.summary_frame(rows) if rows else records.summary_frame([])
    return aggregate.aggregate(runs, pa.Table.from_pandas(summaries, preserve_index=False),
                               history_table(pieces))


PROVENANCE = {"diverged": False, "diverged_epoch": None, "wall_time_s": 0.0,
              "device": "synthetic", "determinism": None, "host": None,
              "slurm_job_id": None, "resumed_from_epoch": None, "torch_version": None,
              **records.versions(), "data_verification": None, "record_source": SOURCE,
              "schema_version": records.SCHEMA_VERSION}


def history_table(pieces: list[tuple[Run, int, dict, int]]) -> pa.Table:
    """Every history row of the generated runs (records.HISTORY_COLUMNS)."""
    lengths = np.array([stop for *_, stop in pieces], dtype=np.int64)
    ids = pa.array([run.run_id for run, *_ in pieces], type=pa.string())
    columns = {"run_id": pa.DictionaryArray.from_arrays(  # 2M strings via a dictionary
        pa.array(np.repeat(np.arange(len(pieces), dtype=np.int32), lengths)), ids
    ).cast(pa.string())}
    for c, dtype in records.HISTORY_COLUMNS.items():
        if c == "epoch":
            values = [np.arange(1, n + 1) for n in lengths]
        elif c != "run_id":
            values = [h[c][i, :n] for _, i, h, n in pieces]
        if c != "run_id":
            columns[c] = pa.array(np.concatenate(values) if values else [],
                                  type=pa.int64() if dtype == "int64" else pa.float64())
    return pa.table(columns)


def write_aggregate(runs: pd.DataFrame, epochs: pa.Table, out_dir: str | Path) -> None:
    """Write the generated tables as the aggregate does: out_dir/runs.parquet, epochs.parquet."""
    out = Path(out_dir)
    aggregate.write_tables(runs, epochs, out / "runs.parquet", out / "epochs.parquet")


def write_run_records(runs: pd.DataFrame, epochs: pa.Table, root: str | Path) -> int:
    """Per-run record folders (root/<run_dir>/) of the runs with records; returns how
    many. The workflow's aggregation can be tested on them."""
    history = epochs.select(list(records.HISTORY_COLUMNS)).to_pandas()
    by_run = dict(tuple(history.groupby("run_id", sort=False)))
    done = runs[~missing(runs)]
    for row in done.to_dict("records"):
        summary = {k: (None if v is pd.NA else v) for k, v in row.items()}
        folder = records.record_folder(root, summary, "generated records")
        records.write_records(folder, by_run[row["run_id"]], summary)
    return len(done)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem synthetic-records`."""
    parser.add_argument("--config", required=True, help="config.yaml")
    parser.add_argument("--out-dir", required=True,
                        help="folder for runs.parquet and epochs.parquet (results/aggregate)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the generator")
    parser.add_argument("--families", nargs="+", metavar="FAMILY",
                        help="only these families (default: all)")
    parser.add_argument("--missing", type=float, default=0.0, metavar="FRACTION",
                        help="fraction of runs left without records (default 0)")
    parser.add_argument("--records-dir", metavar="DIR",
                        help="also write per-run record folders under DIR")


def main(args: argparse.Namespace) -> int:
    """`initmem synthetic-records`: generate the config's fake records and write them."""
    if not 0 <= args.missing <= 1:
        raise grid.ConfigError(f"--missing={args.missing} is not allowed; it must be a "
                               "fraction in [0, 1]")
    config = grid.load_config(args.config)
    runs, epochs = generate(config, args.seed, args.families, args.missing)
    write_aggregate(runs, epochs, args.out_dir)
    print(f"{len(runs)} runs ({int(missing(runs).sum())} missing), "
          f"{epochs.num_rows} epochs -> {args.out_dir} (record_source={SOURCE})")
    if args.records_dir:
        n = write_run_records(runs, epochs, args.records_dir)
        print(f"{n} run record folders -> {args.records_dir}")
    return 0
