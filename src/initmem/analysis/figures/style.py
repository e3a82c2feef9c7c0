"""The figures' look, set in one place: paper width, fonts, colours, marks, saving.

Sizes are in inches at the paper's text width (paper/main.tex sets the same width), so a
figure is included at 100% and its 7-8 pt text reads like the caption's.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a window, also on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

TEXT_WIDTH_IN = 5.5  # \textwidth of paper/main.tex (the paper's single column)
ROW_HEIGHT_IN = 1.75  # one row of sigma_w panels

RC = {
    "font.family": "serif",
    "font.serif": ["STIXGeneral", "DejaVu Serif"],  # STIX ~ Times, as in the paper
    "mathtext.fontset": "stix",
    "font.size": 7.5,
    "axes.titlesize": 7.5,
    "axes.labelsize": 7.5,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6.5,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.1,
    "lines.markersize": 3,
    "grid.linewidth": 0.4,
    "axes.grid": True,
    "grid.alpha": 0.35,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
    "savefig.dpi": 200,
    "figure.dpi": 100,
}

# Optimizers take their colours from the config (initmem.plan.optimizers.optimizer_display).
L2_COLOR = "#2ca02c"  # SGD with explicit L2 (Fig. 6)
BASELINE_COLOR = "0.45"  # grey reference curves (Fig. 8)
MISSING_COLOR = "#b00020"


def apply() -> None:
    """Set the rcParams every figure uses (idempotent)."""
    plt.rcParams.update(RC)


def figure(n_rows: int, n_cols: int, *, height_in: float | None = None,
           **kwargs) -> tuple[Figure, object]:
    """A text-width figure of n_rows x n_cols panels (constrained layout)."""
    apply()
    height = height_in if height_in is not None else ROW_HEIGHT_IN * n_rows
    return plt.subplots(n_rows, n_cols, figsize=(TEXT_WIDTH_IN, height),
                        layout="constrained", squeeze=False, **kwargs)


# Round coefficients for the labels of a log axis shorter than a decade, sparsest first.
LOG_SUBS = ((1, 2, 5), (1, 2, 3, 5, 7), tuple(range(1, 10)))


def readable_log_axis(axis) -> None:
    """Label a log axis that spans less than a decade at a few round values: the sparsest
    of 1-2-5, 1-2-3-5-7 or 1..9 x 10^k that puts two labels in view (else round values
    as on a linear axis). Matplotlib would label every minor tick there, and at this
    width its labels overlap; longer axes keep its decade labels."""
    low, high = sorted(axis.get_view_interval())
    if not (low > 0 and math.log10(high / low) < 1):
        return
    for subs in LOG_SUBS:
        ticks = [c * 10.0**k for k in range(math.floor(math.log10(low)),
                                            math.ceil(math.log10(high)) + 1)
                 for c in subs if low <= c * 10.0**k <= high]
        if len(ticks) >= 2:
            break
    else:  # a sliver of a decade: round values as a linear axis would have them
        ticks = [t for t in ticker.MaxNLocator(nbins=3).tick_values(low, high)
                 if low <= t <= high]
    axis.set_major_locator(ticker.FixedLocator(ticks))
    axis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: sci_label(x)))
    axis.set_minor_formatter(ticker.NullFormatter())


def sci_label(x: float) -> str:
    """$10^{-3}$, $2\\times10^{-3}$ or $2.05\\times10^{-3}$: three significant digits at
    most."""
    exponent = math.floor(math.log10(x))
    mantissa = float(f"{x / 10.0**exponent:.3g}")
    if mantissa == 10:
        exponent, mantissa = exponent + 1, 1.0
    power = rf"10^{{{exponent}}}"
    return f"${power}$" if mantissa == 1 else rf"${mantissa:g}\times{power}$"


def mark_missing(fig: Figure, n_missing: int, n_expected: int, n_diverged: int = 0) -> None:
    """Say on the figure itself that part of its input is absent (nothing is drawn for it)
    or diverged (drawn with its metrics at tau_best before the divergence).

    A suptitle, so that the layout keeps room for it above the panels.
    """
    notes = []
    if n_missing:
        notes.append(f"INCOMPLETE: {n_missing} runs missing (of {n_expected} expected)")
    if n_diverged:
        notes.append(f"{n_diverged} runs diverged (shown at their best epoch before it)")
    if notes:
        fig.suptitle("; ".join(notes), color=MISSING_COLOR, fontsize=7.5, fontweight="bold")


def mark_synthetic(fig: Figure) -> None:
    """A watermark that no reader can miss: these numbers are generated, not trained."""
    fig.text(0.5, 0.5, "SYNTHETIC", ha="center", va="center", rotation=25,
             fontsize=44, color=MISSING_COLOR, alpha=0.22, fontweight="bold", zorder=100)


def save(fig: Figure, pdf_path: str | Path, png_path: str | Path) -> None:
    """Vector PDF for the paper, PNG for quick looks; no timestamps, so reruns are equal."""
    for path in (pdf_path, png_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(pdf_path, metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(png_path, metadata={"Software": None})
    plt.close(fig)
