"""Figure 9: optimizer trajectories on the scalar loss (ab - 1)^2 from (a0, b0) = (1, 6)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from initmem.analysis import toy
from initmem.analysis.figures import style

ETA_COLORS = {0.01: "#d62728", 0.04: "#ff7f0e"}  # the caption's red and orange
A_LIM, B_LIM = (-2.2, 3.4), (-1.5, 6.5)
DENSE_STEPS = 2_000  # every early step is drawn; later ones on a geometric grid


def plotted_steps(n: int, cycle: int = 1, extra: int = 3_000) -> np.ndarray:
    """Indices of the points drawn, multiples of `cycle`: every one early, then a
    geometric grid (keeps the PDF small for 200,000-step trajectories), and the last."""
    dense = np.arange(0, min(n, DENSE_STEPS * cycle), cycle)
    sparse = np.geomspace(1, max(n - 1, 1), extra).astype(int) // cycle * cycle
    return np.unique(np.concatenate([dense, sparse, [n - 1]]))


def simulate() -> dict[tuple[str, float], np.ndarray]:
    """The toy model's (a, b) trajectory per toy optimizer and step size eta."""
    return {(o.name, eta): toy.run_toy(o, eta) for o in toy.TOY_OPTIMIZERS for eta in toy.ETAS}


def fig9() -> tuple[Figure, pd.DataFrame]:
    """The four panels and the per-run table (optimizer, eta, steps, D_final, ...)."""
    paths = simulate()
    table = toy.toy_table(paths)
    fig, axes = style.figure(2, 2, height_in=4.8)
    for ax, letter, opt in zip(axes.flat, "abcd", toy.TOY_OPTIMIZERS, strict=True):
        _landmarks(ax)
        finals = []
        for eta in sorted(toy.ETAS, reverse=True):  # the small step drawn on top
            path = paths[(opt.name, eta)]
            # whole target cycles only: the path, not the within-cycle zigzag
            shown = path[plotted_steps(len(path), opt.cycle)]
            ax.plot(shown[:, 0], shown[:, 1], color=ETA_COLORS[eta], lw=0.8,
                    label=rf"$\eta={eta:g}$")
            ax.plot(*path[-1], marker="o", ms=3.5, color=ETA_COLORS[eta], mec="k", mew=0.4)
            finals.append(rf"$\eta={eta:g}$: $D_K={_fmt(toy.imbalance(*path[-1]))}$")
        ax.text(0.97, 0.03, "\n".join(reversed(finals)), transform=ax.transAxes, ha="right",
                va="bottom", fontsize=6, bbox={"fc": "w", "ec": "0.7", "lw": 0.4})
        ax.set(xlim=A_LIM, ylim=B_LIM, xlabel="$a$", ylabel="$b$")
        ax.set_title(f"({letter}) {opt.label}, {opt.steps:,} steps", loc="left")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    order = [*range(3), *reversed(range(3, len(labels)))]  # landmarks, then eta ascending
    fig.legend([handles[i] for i in order], [labels[i] for i in order],
               loc="outside lower center", ncol=len(labels))
    return fig, table


def _landmarks(ax) -> None:
    """The minimum manifold ab = 1, its minimum-norm points and the start (a0, b0)."""
    a = np.linspace(*A_LIM, 400)
    for branch, label in ((a[a > 0.05], "$ab=1$"), (a[a < -0.05], None)):
        ax.plot(branch, 1 / branch, color="k", lw=0.9, label=label)
    ax.plot([1, -1], [1, -1], ls="", marker="*", ms=8, color="m",
            label=r"min-norm $(\pm1, \pm1)$")
    ax.plot(toy.A0, toy.B0, ls="", marker="s", ms=3.5, color="k",
            label=f"start $({toy.A0:g}, {toy.B0:g})$")


def _fmt(d: float) -> str:
    """D_K to one decimal, or one significant digit below 0.05; an exact 0 as "0"."""
    if d == 0:
        return "0"
    return f"{d:.1f}" if abs(d) >= 0.05 else f"{d:.0e}"
