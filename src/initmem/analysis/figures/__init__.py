"""Figures 1-9 of the paper from the aggregated tables (`initmem figure N ...`).

Every figure says on itself what it lacks: "n runs missing" when expected runs have no
record (nothing is drawn for them), and a SYNTHETIC watermark when any input row is a
generated record. Figure 9 is the toy model of Appendix G and needs no runs; it also
writes its per-run table (final imbalance D and friends) as CSV next to the PDF.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from initmem.analysis.figures import style
from initmem.analysis.figures.beta import fig6
from initmem.analysis.figures.common import (
    FigureInputError,
    FigureInputs,
    drawn_counts,
    load_inputs,
)
from initmem.analysis.figures.heatmap import fig2
from initmem.analysis.figures.sweeps import fig1, fig3, fig4, fig5, fig7, fig8
from initmem.analysis.figures.toyfig import fig9

DRAW: dict[int, Callable] = {1: fig1, 2: fig2, 3: fig3, 4: fig4, 5: fig5, 6: fig6, 7: fig7,
                             8: fig8}
NEEDS_EPOCHS = {6}
EPOCH_COLUMNS = ["family", "optimizer", "b", "lr0", "l2", "sigma_w",
                 "epoch", "val_acc", "T_SGD", "T_L2", "T_adapt", "record_source"]
EPOCH_FAMILIES = ["main", "lr_l2"]  # Fig. 6 reads only these: the table can be large


def write_figure(number: int, runs_path: str | Path | None, epochs_path: str | Path | None,
                 config_path: str | Path | None, pdf_path: str | Path,
                 png_path: str | Path) -> None:
    """Draw figure `number` (1-9) into pdf_path and png_path (Fig. 9 also a .csv)."""
    if number == 9:
        fig, table = fig9()
        style.save(fig, pdf_path, png_path)
        table.to_csv(Path(pdf_path).with_suffix(".csv"), index=False, float_format="%.6g")
        return
    if number not in DRAW:
        raise FigureInputError(f"figure {number!r} does not exist; figures are 1-9")
    if runs_path is None:
        raise FigureInputError(f"figure {number} needs --runs (runs.parquet)")
    if number in NEEDS_EPOCHS and epochs_path is None:
        raise FigureInputError(f"figure {number} needs --epochs (epochs.parquet)")
    inputs = load_inputs(runs_path, epochs_path if number in NEEDS_EPOCHS else None,
                         config_path, EPOCH_COLUMNS, EPOCH_FAMILIES)
    style.save(draw(number, inputs), pdf_path, png_path)


def draw(number: int, inputs: FigureInputs):
    """Figure `number` (1-8) with its provenance marks: missing and diverged runs, and
    the SYNTHETIC watermark when any input record is generated."""
    fig, used = DRAW[number](inputs)
    style.mark_missing(fig, *drawn_counts(used))
    if inputs.synthetic:
        style.mark_synthetic(fig)
    return fig


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem figure`."""
    parser.add_argument("number", type=int, choices=range(1, 10), metavar="N",
                        help="figure number, 1-9")
    parser.add_argument("--runs", type=Path, help="runs.parquet (all but Fig. 9)")
    parser.add_argument("--epochs", type=Path, help="epochs.parquet (Fig. 6)")
    parser.add_argument("--config", type=Path, help="config.yaml (optimizer labels)")
    parser.add_argument("--pdf", type=Path, required=True, help="vector output")
    parser.add_argument("--png", type=Path, required=True, help="raster output")


def main(args: argparse.Namespace) -> int:
    write_figure(args.number, args.runs, args.epochs, args.config, args.pdf, args.png)
    return 0


__all__ = ["FigureInputError", "FigureInputs", "configure_parser", "run", "write_figure"]
