"""Figures that plot an outcome against sigma_w: 1, 3, 4, 5, 7 and 8.

Each returns the figure and the run selections it drew from, so that the caller can count
the missing runs among exactly those.
"""

from __future__ import annotations

from collections.abc import Iterator

import matplotlib
import pandas as pd
from matplotlib.figure import Figure

from initmem.analysis.figures import style
from initmem.analysis.figures.common import (
    Curve,
    FigureInputs,
    draw_curves,
    on_sigmas,
    sigma_axis,
    sigma_grid,
    spread,
)
from initmem.plan.architectures import ARCHITECTURES, depth_study
from initmem.plan.cells import select
from initmem.plan.roles import DEPTH, LONG_SGD, LR_L2, MAIN, NORM_AUG
from initmem.vocabulary import INTERP_THRESHOLD, missing

PAPER_B = (16, 128)  # the two batch sizes the ablation figures show
ACC = 100.0  # accuracies are stored as fractions, plotted in %

Drawn = tuple[Figure, list[pd.DataFrame]]


def optimizer_curves(inputs: FigureInputs, rows: pd.DataFrame) -> list[Curve]:
    """One curve per optimizer among `rows`, named and coloured as the config shows it."""
    return [Curve(o.label, select(rows, optimizer=o.name), o.colour)
            for o in inputs.optimizers(set(rows["optimizer"]))]


def figure_legend(fig: Figure, axes, ncol: int = 6) -> None:
    """One legend for the figure, below the panels (the top is for INCOMPLETE), each label
    once."""
    seen: dict[str, object] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(seen.values(), seen.keys(), loc="outside lower center",
                   ncol=min(len(seen), ncol))


def curve_panel(ax, curves, value: str, scale: float, ylabel: str, title: str,
                empty: str = "no data") -> None:
    """One panel of metric `value` vs sigma_w, a curve per optimizer (Figs. 1 and 3)."""
    draw_curves(ax, curves, value, scale, empty)
    ax.set_title(title, loc="left")
    ax.set_ylabel(ylabel)
    sigma_axis(ax)


def curves_by_b(inputs: FigureInputs,
                main: pd.DataFrame) -> Iterator[tuple[int, pd.DataFrame, list[Curve]]]:
    """For each of the paper's two b: b, its runs and their per-optimizer curves."""
    for b in PAPER_B:
        at_b = select(main, b=b)
        yield b, at_b, optimizer_curves(inputs, at_b)


# Fig. 1's train accuracy is the last epoch's: the caption's "SGD interpolates" and §3.1's
# ">= 99.5% training accuracy" are about the end of training (Tables 4-6's Train column),
# and at large sigma_w SGD's tau_best comes before it interpolates.
FIG1_PANELS = (("test_acc_best", ACC, r"test acc. at $\tau_{\mathrm{best}}$ (%)"),
               ("train_acc_last", ACC, "train acc., last epoch (%)"),
               ("kernel_fro_norm_best", 1.0, r"$\|W_{\tau_{\mathrm{best}}}\|_F$"))


def fig1(inputs: FigureInputs) -> Drawn:
    """Test acc and ||W||_F at tau_best, train acc at the last epoch, vs sigma_w; b=16 top,
    b=128 bottom."""
    main = select(inputs.need_runs(), family=inputs.families(MAIN))
    fig, axes = style.figure(2, 3, height_in=3.9)
    used = []
    for row, (b, at_b, curves) in enumerate(curves_by_b(inputs, main)):
        used.append(at_b)
        for col, panel in enumerate(FIG1_PANELS):
            curve_panel(axes[row, col], curves, *panel, f"({'abcdef'[3 * row + col]}) $b={b}$")
        init = at_b[["sigma_w", "kernel_fro_norm_init"]].dropna()
        if not init.empty:  # the initial norm depends on sigma_w and seed, not optimizer
            mean = init.groupby("sigma_w")["kernel_fro_norm_init"].mean()
            axes[row, 2].plot(mean.index, mean, color="k", ls="--", lw=0.9,
                              label=r"$\|W_{\mathrm{init}}\|_F$")
    figure_legend(fig, axes)
    return fig, used


NONE_INTERPOLATED = (f"no run reached {INTERP_THRESHOLD:.1%} train acc.:\n"
                     "neither quantity exists")


def fig3(inputs: FigureInputs) -> Drawn:
    """tau_interp (a,b) and repair gap (c,d) vs sigma_w at b=16 and b=128."""
    main = select(inputs.need_runs(), family=inputs.families(MAIN))
    fig, axes = style.figure(2, 2, height_in=3.6)
    used = []
    for col, (b, at_b, curves) in enumerate(curves_by_b(inputs, main)):
        used.append(at_b)
        never = int((~missing(at_b) & at_b["tau_interp"].isna()).sum())
        # a short run (the demo) may interpolate nowhere: the quantity does not exist
        empty = NONE_INTERPOLATED if never and never == (~missing(at_b)).sum() \
            else "no data"
        for row, panel in enumerate((
                ("tau_interp", 1.0, r"$\tau_{\mathrm{interp}}$ (epoch)"),
                ("repair_gap", ACC, r"$\Delta_{\mathrm{repair}}$ (pp)"))):
            curve_panel(axes[row, col], curves, *panel, f"({'abcd'[2 * row + col]}) $b={b}$",
                        empty)
        axes[1, col].axhline(0, color="k", lw=0.6)
        if never:  # these runs have no tau_interp and no repair gap: say so, do not impute
            for ax in axes[:, col]:
                ax.text(0.02, 0.97, f"{never} runs never reached 99.5% train acc.",
                        transform=ax.transAxes, va="top", fontsize=5.5, color="0.3")
    figure_legend(fig, axes)
    return fig, used


def _lr_l2_curves(inputs: FigureInputs, runs: pd.DataFrame, b: int) -> list[Curve]:
    """Table 4's configurations at one b: the eta x L2 grid, 5,000 epochs, Adam."""
    sweep = select(runs, family=inputs.families(LR_L2), b=b)
    long_sgd = select(runs, family=inputs.families(LONG_SGD))
    sigmas = sigma_grid(sweep) if len(sweep) else sigma_grid(long_sgd)
    main = on_sigmas(select(runs, family=inputs.families(MAIN), b=b), sigmas)
    configs = [(1e-3, 0.0, select(main, optimizer="sgd"))]
    for (lr0, l2), rows in sweep.groupby(["lr0", "l2"]):
        configs.append((float(lr0), float(l2), rows))
    configs.sort(key=lambda c: (c[0], c[1]))
    l2_shades = {0.0: 0.95, 1e-3: 0.75, 5e-3: 0.55, 1e-2: 0.35}
    palettes = {1e-3: "Reds", 1e-2: "Blues", 1e-1: "Greens"}
    curves = []
    for lr0, l2, rows in configs:
        cmap = matplotlib.colormaps[palettes.get(lr0, "Greys")]
        color = matplotlib.colors.to_hex(cmap(l2_shades.get(l2, 0.6)))
        curves.append(Curve(rf"$\eta$={lr0:g}, $\lambda$={l2:g}", rows, color, band=False,
                            short=f"{lr0:g} / {l2:g}"))
    long_rows = select(long_sgd, b=b)
    curves.append(Curve(r"$\eta$=0.001, 5k ep.", long_rows, "k", ":", band=False,
                        short="long"))
    adam = inputs.optimizer_label("adam")
    curves.append(Curve(f"{adam} $\\eta$=0.001", select(main, optimizer="adam"),
                        style.BASELINE_COLOR, "--", band=False, short=adam))
    return curves


def fig4(inputs: FigureInputs) -> Drawn:
    """The eta x L2 configurations: test acc vs sigma_w, inset spreads sorted ascending."""
    runs = inputs.need_runs()
    fig, axes = style.figure(1, 2, height_in=3.0)
    used = []
    for col, b in enumerate(PAPER_B):
        ax = axes[0, col]
        curves = _lr_l2_curves(inputs, runs, b)
        used.extend(c.rows for c in curves)
        if draw_curves(ax, curves, "test_acc_best", ACC):
            low, high = ax.get_ylim()
            ax.set_ylim(low - 1.1 * (high - low), high)  # room for the inset below
            _spread_inset(ax, curves)
        ax.set_title(f"({'ab'[col]}) $b={b}$", loc="left")
        ax.set_ylabel("test acc. (%)")
        sigma_axis(ax)
    figure_legend(fig, axes, ncol=4)
    return fig, used


def _spread_inset(ax, curves: list[Curve]) -> None:
    """Each configuration's spread as a bar, ascending, named below it (eta / lambda)."""
    bars = sorted(((spread(c.rows, "test_acc_best") * ACC, c) for c in curves
                   if not c.rows["test_acc_best"].dropna().empty), key=lambda t: t[0])
    inset = ax.inset_axes([0.16, 0.25, 0.8, 0.22])  # below it: room for the bars' names
    inset.bar(range(len(bars)), [s for s, _ in bars], color=[c.color for _, c in bars],
              edgecolor="0.3", linewidth=0.3)
    inset.set_xticks(range(len(bars)), [c.short or c.label for _, c in bars], rotation=90,
                     fontsize=4.5)
    inset.tick_params(axis="x", length=0, pad=1.5)
    inset.set_ylabel("spread (pp)", fontsize=5.5)
    inset.tick_params(axis="y", labelsize=5)
    inset.grid(False)


def _arch_figure(inputs: FigureInputs, value: str, ylabel: str, compared: str,
                 styles: dict[str, tuple[str, str, str]]) -> Drawn:
    """Panels optimizer (SGD, Adam) x b (16, 128); one curve per "role:arch" of styles.

    styles maps "role:arch" (a family role) to (label, color, linestyle). The main sweep's
    ResNet-9 is restricted to the sigma_w grid of the compared role's family, so all
    curves share points.
    """
    runs = inputs.need_runs()
    sigmas = sigma_grid(select(runs, family=inputs.families(compared)))
    fig, axes = style.figure(2, 2, height_in=3.7)
    used = []
    for row, optimizer in enumerate(("sgd", "adam")):
        for col, b in enumerate(PAPER_B):
            at = select(runs, optimizer=optimizer, b=b)
            curves = []
            for key, (label, color, ls) in styles.items():
                role, arch = key.split(":")
                rows = select(at, family=inputs.families(role), arch=arch)
                curves.append(Curve(label, on_sigmas(rows, sigmas) if role == MAIN
                                    else rows, color, ls))
            used.extend(c.rows for c in curves)
            ax = axes[row, col]
            draw_curves(ax, curves, value, ACC)
            ax.set_title(f"({'abcd'[2 * row + col]}) {inputs.optimizer_label(optimizer)}, "
                         f"$b={b}$", loc="left")
            ax.set_ylabel(ylabel)
            sigma_axis(ax)
    figure_legend(fig, axes)
    return fig, used


def depth_styles(inputs: FigureInputs) -> dict[str, tuple[str, str, str]]:
    """Figs. 5 and 7's curves as _arch_figure's styles, each network in its declared label,
    colour and line style: the paper's depth study and any other network of the depth
    comparison (architectures.depth_study), the main sweep's own network from it."""
    runs = inputs.need_runs()
    main = set(select(runs, family=inputs.families(MAIN))["arch"])
    styles = {}
    for name in depth_study(select(runs, family=inputs.families(DEPTH))["arch"]):
        arch = ARCHITECTURES[name]
        styles[f"{MAIN if name in main else DEPTH}:{name}"] = (arch.label, arch.colour,
                                                               arch.linestyle)
    return styles


NORM_AUG_STYLES = {
    f"{NORM_AUG}:resnet9": ("BatchNorm + aug.", "#1f77b4", "-"),
    f"{NORM_AUG}:resnet9_ln": ("LayerNorm + aug.", "#ff7f0e", "-"),
    f"{MAIN}:resnet9": ("BatchNorm, no aug.", style.BASELINE_COLOR, "--"),
}


def fig5(inputs: FigureInputs) -> Drawn:
    """Depth: test acc at tau_best vs sigma_w."""
    return _arch_figure(inputs, "test_acc_best", "test acc. (%)", DEPTH, depth_styles(inputs))


def fig7(inputs: FigureInputs) -> Drawn:
    """Depth: train acc at the last epoch (Table 5's train column) vs sigma_w."""
    return _arch_figure(inputs, "train_acc_last", "train acc. (%)", DEPTH,
                        depth_styles(inputs))


def fig8(inputs: FigureInputs) -> Drawn:
    """Normalisation and augmentation, with the main grid's BatchNorm baseline dashed."""
    return _arch_figure(inputs, "test_acc_best", "test acc. (%)", NORM_AUG, NORM_AUG_STYLES)
