"""Figure 2: test accuracy at tau_best over optimizer x sigma_w, one panel per batch size."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import patheffects

from .. import style
from ..records import INTERP_THRESHOLD
from ..spec import OPTIMIZERS
from .common import Inputs, select
from .sweeps import ACC, Drawn

CMAP = "viridis"
NAN_COLOR = "0.85"  # cells without any finished run


def cell_means(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """Seed mean of `value` per (optimizer, sigma_w); NaN where no run has a value."""
    data = rows[["optimizer", "sigma_w", value]].dropna()
    table = data.assign(**{value: data[value].astype(float)}).pivot_table(
        index="optimizer", columns="sigma_w", values=value, aggfunc="mean")
    optimizers = [o for o in OPTIMIZERS if o in set(rows["optimizer"])]
    sigmas = sorted(set(rows["sigma_w"].astype(float)))
    return table.reindex(index=optimizers, columns=sigmas)


def fig2(inputs: Inputs) -> Drawn:
    """Cells whose seed-mean train acc at tau_best is below 99.5% carry an x."""
    main = select(inputs.need_runs(), family="main")
    batch_sizes = sorted(int(b) for b in set(main["b"]))
    fig, axes = style.figure(max(len(batch_sizes), 1), 1,
                             height_in=0.35 + 1.05 * max(len(batch_sizes), 1))
    used, image = [], None
    acc = main["test_acc_best"].dropna()
    vmin, vmax = (acc.min() * ACC, acc.max() * ACC) if len(acc) else (0, 100)
    for ax, b in zip(axes[:, 0], batch_sizes, strict=False):
        rows = select(main, b=b)
        used.append(rows)
        test = cell_means(rows, "test_acc_best") * ACC
        train = cell_means(rows, "train_acc_best")
        image = ax.imshow(np.ma.masked_invalid(test.to_numpy(dtype=float)), cmap=CMAP,
                          vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_facecolor(NAN_COLOR)
        ax.grid(False)
        rows_i, cols_i = np.nonzero(train.to_numpy(dtype=float) < INTERP_THRESHOLD)
        ax.scatter(cols_i, rows_i, marker="x", s=9, c="w", linewidths=0.7,
                   path_effects=[patheffects.withStroke(linewidth=1.6, foreground="k")])
        ax.set_yticks(range(len(test.index)),
                      [inputs.optimizer_label(o) for o in test.index])
        step = max(1, len(test.columns) // 8)
        ticks = list(range(0, len(test.columns), step))
        ax.set_xticks(ticks, [f"{test.columns[i]:.1f}" for i in ticks])
        ax.set_title(f"$b={b}$", loc="left")
    if not batch_sizes:
        axes[0, 0].text(0.5, 0.5, "no data", ha="center", color=style.MISSING_COLOR)
    axes[-1, 0].set_xlabel(r"$\sigma_w$")
    if image is not None:
        fig.colorbar(image, ax=axes[:, 0], label=r"test acc. at $\tau_{\mathrm{best}}$ (%)",
                     shrink=0.6, aspect=30)
    return fig, used
