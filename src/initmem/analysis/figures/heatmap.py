"""Figure 2: test accuracy at tau_best over optimizer x sigma_w, one panel per batch size."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import patheffects

from initmem.analysis import metrics
from initmem.analysis.figures import style
from initmem.analysis.figures.common import FigureInputs
from initmem.analysis.figures.sweeps import ACC, Drawn
from initmem.plan.cells import select
from initmem.plan.roles import MAIN

CMAP = "viridis"
NAN_COLOR = "0.85"  # cells without any finished run


def cell_means(rows: pd.DataFrame, value: str, optimizers: list[str]) -> pd.DataFrame:
    """Seed mean of `value` per (optimizer, sigma_w), rows in the order of `optimizers`;
    NaN where no run has a value."""
    stats = metrics.seed_stats(rows.astype({value: float}), value, ["optimizer", "sigma_w"])
    table = stats.pivot(index="optimizer", columns="sigma_w", values="mean")
    return table.reindex(index=optimizers, columns=sorted(set(rows["sigma_w"].astype(float))))


def not_interpolated(rows: pd.DataFrame) -> pd.DataFrame:
    """True where the seed-mean train acc at tau_best is below 99.5% (Fig. 2's x); cells
    without any value are absent (NaN after the pivot)."""
    cells = metrics.interpolated_at_best(rows.astype({"train_acc_best": float}),
                                         ["optimizer", "sigma_w"]).dropna(subset=["mean"])
    cells["crossed"] = ~cells["interpolated"].astype(bool)
    return cells.pivot(index="optimizer", columns="sigma_w", values="crossed")


def fig2(inputs: FigureInputs) -> Drawn:
    """Cells whose seed-mean train acc at tau_best is below 99.5% carry an x."""
    main = select(inputs.need_runs(), family=inputs.families(MAIN))
    batch_sizes = sorted(int(b) for b in set(main["b"]))
    fig, axes = style.figure(max(len(batch_sizes), 1), 1,
                             height_in=0.35 + 1.05 * max(len(batch_sizes), 1))
    used, image = [], None
    acc = main["test_acc_best"].dropna()
    vmin, vmax = (acc.min() * ACC, acc.max() * ACC) if len(acc) else (0, 100)
    for ax, b in zip(axes[:, 0], batch_sizes, strict=False):
        rows = select(main, b=b)
        used.append(rows)
        order = [o.name for o in inputs.optimizers(set(rows["optimizer"]))]
        test = cell_means(rows, "test_acc_best", order) * ACC
        image = ax.imshow(np.ma.masked_invalid(test.to_numpy(dtype=float)), cmap=CMAP,
                          vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_facecolor(NAN_COLOR)
        ax.grid(False)
        crossed = not_interpolated(rows).reindex_like(test).fillna(False).astype(bool)
        rows_i, cols_i = np.nonzero(crossed.to_numpy())
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
