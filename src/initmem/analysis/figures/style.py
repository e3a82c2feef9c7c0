"""The figures' look, set in one place: paper width, fonts, colours, marks, saving.

Sizes are in inches at the paper's text width (paper/main.tex sets the same width), so a
figure is included at 100% and its 7-8 pt text reads like the caption's.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a window, also on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
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

# Optimizers take their colours from the config (initmem.plan.config.optimizer_display).
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
