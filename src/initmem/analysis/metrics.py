"""The paper's metrics, computed from the aggregated runs and epochs tables.

Pure pandas/numpy; every function takes the grouping keys as an argument (default: every
recipe field, i.e. one group per configuration) so tables and figures choose their cells.

Conventions:
- Seed statistics are mean and *sample* standard deviation (ddof=1, pandas' default). The
  paper's Table 2 gives tau_best = 10.0 +- 0.5 for SGD with momentum at b=128 over 10
  seeds; integer epochs with mean 10.0 can only give 0.5 with ddof=1 (ddof=0 gives 0.4).
  A single seed has no std (NaN).
- Runs with status "missing" carry null outcomes and so drop out of every statistic; the
  caller counts them (tables mark them).
- tau_interp / tau_best statistics are over the runs that reached the event; `n_reached`
  and `n_runs` (runs with a record) say how many did, so "never reached" (0 of n) and
  "partly reached" (k of n) stay visible.
- Mem (the spread) = max over sigma_w of the seed mean minus the min over sigma_w.
- |beta(t)| = |d ValAcc / d sigma_w|: ordinary least squares slope over every (sigma_w,
  seed) point of a configuration at epoch t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from initmem.plan.cells import recipe_keys, select
from initmem.vocabulary import INTERP_THRESHOLD, missing

SEED_STD_DDOF = 1


def _groups(frame: pd.DataFrame, keys: Sequence[str]):
    return frame.groupby(list(keys), dropna=False, sort=True)


def seed_stats(frame: pd.DataFrame, value: str, keys: Sequence[str]) -> pd.DataFrame:
    """mean, std (ddof=1) and n (non-null values) of `value` per group of `keys`."""
    grouped = _groups(frame, keys)[value]
    return pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=SEED_STD_DDOF),
                         "n": grouped.count()}).reset_index()


def mem(seed_means: Sequence[float]) -> float:
    """The paper's Mem, the spread: the largest seed mean over sigma_w minus the smallest
    (the one definition: the tables' `spread` and the verdicts' `inference.spread`)."""
    return float(np.max(seed_means) - np.min(seed_means))


def spread(frame: pd.DataFrame, keys: Sequence[str] | None = None,
           value: str = "test_acc_best",
           sigma_values: Sequence[float] | None = None) -> pd.DataFrame:
    """Mem per group of `keys`: max over sigma_w of the seed mean minus the min.

    `sigma_values` restricts the sweep (the paper's tables use 5 of the 25 points).
    Columns: keys, spread, n_sigma (sigma_w values with data), sigma_max, sigma_min.
    """
    keys = recipe_keys() if keys is None else list(keys)
    if sigma_values is not None:
        frame = select(frame, sigma_w=list(sigma_values))
    means = seed_stats(frame, value, [*keys, "sigma_w"]).dropna(subset=["mean"])
    rows = []
    for key, group in _groups(means, keys):
        hi, lo = group.loc[group["mean"].idxmax()], group.loc[group["mean"].idxmin()]
        rows.append((*_tuple(key), mem(group["mean"]), len(group), hi["sigma_w"],
                     lo["sigma_w"]))
    return pd.DataFrame(rows, columns=[*keys, "spread", "n_sigma", "sigma_max", "sigma_min"])


def spread_pp(frame: pd.DataFrame, sigmas: Sequence[float] | None = None) -> float:
    """Mem of test accuracy at tau_best in pp over `sigmas` (default: every sigma_w of
    the frame), for one configuration; NaN unless every one of them has a value."""
    sigmas = sorted(frame["sigma_w"].unique()) if sigmas is None else sigmas
    frame = select(frame, sigma_w=list(sigmas))
    result = spread(frame.assign(_row=0), keys=["_row"], sigma_values=sigmas)
    if not len(result) or result["n_sigma"].iloc[0] < len(sigmas):
        return math.nan
    return 100 * float(result["spread"].iloc[0])


def _tuple(key: object) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def percentile_band(frame: pd.DataFrame, value: str, keys: Sequence[str],
                    lo: float = 10, hi: float = 90) -> pd.DataFrame:
    """Seed mean and the lo-th / hi-th percentiles (linear interpolation) per group."""
    grouped = _groups(frame, keys)[value]
    stats = grouped.agg(mean="mean", n="count")
    stats["lo"] = grouped.quantile(lo / 100)
    stats["hi"] = grouped.quantile(hi / 100)
    return stats.reset_index()


def event_stats(frame: pd.DataFrame, tau: str, keys: Sequence[str]) -> pd.DataFrame:
    """tau_interp or tau_best (or a metric defined only with one, like repair_gap) over
    the runs that reached it: mean, std, n_reached, n_runs (runs with a record)."""
    done = frame.assign(_done=~missing(frame))
    grouped = _groups(done, keys)
    values = grouped[tau]
    return pd.DataFrame({"mean": values.mean(), "std": values.std(ddof=SEED_STD_DDOF),
                         "n_reached": values.count(),
                         "n_runs": grouped["_done"].sum()}).reset_index()


def repair_gap_stats(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Delta_repair = ValAcc(tau_best) - ValAcc(tau_interp): defined only for runs that
    interpolated, so it follows the tau_interp counting."""
    return event_stats(frame, "repair_gap", keys)


def interpolated_at_best(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Figure 2's criterion: seed-mean train accuracy at tau_best >= 99.5%."""
    stats = seed_stats(frame, "train_acc_best", keys)
    stats["interpolated"] = stats["mean"] >= INTERP_THRESHOLD
    return stats


def beta(epochs: pd.DataFrame, keys: Sequence[str] | None = None,
         value: str = "val_acc") -> pd.DataFrame:
    """OLS slope d value / d sigma_w per configuration and epoch over all seeds' points.

    Columns: keys, epoch, beta, abs_beta, n_points (NaN beta when fewer than two
    distinct sigma_w values).
    """
    keys = recipe_keys() if keys is None else list(keys)
    data = epochs[[*keys, "epoch", "sigma_w", value]].dropna(subset=[value])
    x = data["sigma_w"].to_numpy(float)
    y = data[value].to_numpy(float)
    config = _groups(data, keys).ngroup().to_numpy()
    ids = pd.DataFrame({"config": config, "epoch": data["epoch"].to_numpy()})
    sums = (ids.assign(n=1.0, x=x, y=y, xx=x * x, xy=x * y)
            .groupby(["config", "epoch"], sort=True).sum())
    sxx = sums["xx"] - sums["x"] ** 2 / sums["n"]
    sxy = sums["xy"] - sums["x"] * sums["y"] / sums["n"]
    # Rounding noise leaves sxx tiny but nonzero when every point has one sigma_w.
    scale = np.maximum(sums["xx"], 1e-300)
    slope = (sxy / sxx).where(sxx > 1e-12 * scale)
    out = pd.DataFrame({"beta": slope, "abs_beta": slope.abs(),
                        "n_points": sums["n"].astype(int)}).reset_index()
    labels = data.assign(config=config).drop_duplicates("config")[[*keys, "config"]]
    return labels.merge(out, on="config").drop(columns="config")


def clocks(epochs: pd.DataFrame, keys: Sequence[str] | None = None) -> pd.DataFrame:
    """T_SGD, T_L2, T_adapt per configuration and epoch (the mean over its runs; the
    clocks depend on the recipe only, so the runs agree)."""
    keys = recipe_keys() if keys is None else list(keys)
    cols = ["T_SGD", "T_L2", "T_adapt"]
    return _groups(epochs, [*keys, "epoch"])[cols].mean().reset_index()
