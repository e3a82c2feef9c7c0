"""Figure 6: |beta(t)| = |d ValAcc / d sigma_w| per epoch, and against the clocks."""

from __future__ import annotations

import matplotlib
import pandas as pd

from initmem.analysis import metrics
from initmem.analysis.figures import style
from initmem.analysis.figures.common import FigureInputs, no_data
from initmem.analysis.figures.sweeps import PAPER_B, Drawn
from initmem.plan.cells import select
from initmem.plan.optimizers import OptimizerDisplay
from initmem.plan.roles import LR_L2, MAIN

KEYS = ["family", "optimizer", "b", "lr0", "l2"]
SGD_L2 = {"optimizer": "sgd", "lr0": 1e-2, "l2": 1e-2}  # Fig. 6 green, of the lr_l2 ablation


def beta_curves(inputs: FigureInputs) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """|beta| and the clocks per configuration and epoch, and the run selections used."""
    epochs = inputs.need_epochs()
    runs = inputs.need_runs()
    main, sgd_l2 = inputs.families(MAIN), {**SGD_L2, "family": inputs.families(LR_L2)}
    wanted = [select(runs, family=main), select(runs, **sgd_l2, b=list(PAPER_B))]
    parts = [select(epochs, family=main), select(epochs, **sgd_l2, b=list(PAPER_B))]
    data = pd.concat(parts)
    if data.empty:
        return pd.DataFrame(columns=[*KEYS, "epoch", "abs_beta", "T_SGD", "T_L2",
                                     "T_adapt"]), wanted
    curves = metrics.beta(data, keys=KEYS).merge(metrics.clocks(data, keys=KEYS),
                                                 on=[*KEYS, "epoch"])
    return curves[curves["abs_beta"] > 0], wanted  # log axes: exact zeros cannot show


def _plot(ax, rows: pd.DataFrame, x: str, **kwargs) -> bool:
    rows = rows[rows[x] > 0].sort_values(x)
    if rows.empty:
        return False
    ax.plot(rows[x], rows["abs_beta"], lw=0.8, **kwargs)
    return True


def fig6(inputs: FigureInputs) -> Drawn:
    """|beta(t)| per epoch for the SGD family (a,c) and the adaptive optimizers (b,d) at b=16
    and b=128; against T_SGD and T_L2 (e) and against T_adapt (f)."""
    curves, used = beta_curves(inputs)
    fig, axes = style.figure(3, 2, height_in=5.4)
    sgd_l2 = select(curves, **SGD_L2, family=inputs.families(LR_L2))
    main = select(curves, family=inputs.families(MAIN))
    shown = inputs.optimizers(set(main["optimizer"]))
    columns = (("SGD family", [o for o in shown if not o.adaptive]),
               ("adaptive", [o for o in shown if o.adaptive]))
    for row, b in enumerate(PAPER_B):
        for col, (family, optimizers) in enumerate(columns):
            ax = axes[row, col]
            drawn = [_plot(ax, select(main, optimizer=o.name, b=b), "epoch",
                           color=o.colour, label=o.label) for o in optimizers]
            if col == 0:
                drawn.append(_plot(ax, select(sgd_l2, b=b), "epoch", color=style.L2_COLOR,
                                   label=r"SGD $\eta=10^{-2}$, $L_2=10^{-2}$"))
            _finish(ax, f"({'abcd'[2 * row + col]}) {family}, $b={b}$", "epoch", any(drawn),
                    logx=False)
            if row == 0:  # the colours are the same in both rows
                _legend(ax)
    # (e) and (f): the first optimizer of each column (the paper's SGD and Adam) on its clock
    sgd_like, adaptive = (next(iter(optimizers), None) for _, optimizers in columns)
    _clock_panel(axes[2, 0], main, sgd_like, "T_SGD", "Reds")
    drawn_l2 = [_plot(axes[2, 0], select(sgd_l2, b=b), "T_L2", color=style.L2_COLOR,
                      ls=ls, label=rf"SGD+$L_2$, $b={b}$ vs $\mathcal{{T}}_{{L_2}}$")
                for b, ls in zip(PAPER_B, ("-", "--"), strict=True)]
    _finish(axes[2, 0], f"(e) {sgd_like.label if sgd_like else 'SGD'}",
            r"$\mathcal{T}_{\mathrm{SGD}}$ or $\mathcal{T}_{L_2}$",
            axes[2, 0].has_data() or any(drawn_l2))
    _clock_panel(axes[2, 1], main, adaptive, "T_adapt", "Blues")
    _finish(axes[2, 1], f"(f) {adaptive.label if adaptive else 'adaptive'}",
            r"$\mathcal{T}_{\mathrm{adapt}}$", axes[2, 1].has_data())
    for ax in axes[2]:
        _legend(ax)
    return fig, used


def _legend(ax) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=5.5)


def _clock_panel(ax, main: pd.DataFrame, optimizer: OptimizerDisplay | None, clock: str,
                 palette: str) -> None:
    """One line per batch size, darker for larger b."""
    if optimizer is None:
        return
    rows = select(main, optimizer=optimizer.name)
    sizes = sorted(int(b) for b in set(rows["b"]))
    cmap = matplotlib.colormaps[palette]
    for i, b in enumerate(sizes):
        _plot(ax, select(rows, b=b), clock, color=cmap(0.35 + 0.6 * i / max(len(sizes) - 1, 1)),
              label=f"$b={b}$")


def _finish(ax, title: str, xlabel: str, drawn: bool, logx: bool = True) -> None:
    ax.set_title(title, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(r"$|\beta(t)|$")
    if not drawn:
        no_data(ax)
        return
    ax.set_yscale("log")
    style.readable_log_axis(ax.yaxis)
    if logx:
        ax.set_xscale("log")
        style.readable_log_axis(ax.xaxis)
