"""Figures 1-9 of the paper from the aggregated tables (`initmem figure N ...`), each
declared in initmem.plan.artifacts (its drawing function, the family roles it reads,
whether it needs the runs and the epochs, its report section and caption).

Every figure says on itself what it lacks: "n runs missing" when expected runs have no
record (nothing is drawn for them), and a SYNTHETIC watermark when any input row is a
generated record. Figure 9 is the toy model of Appendix G and needs no runs; it also
writes its per-run table (final imbalance D and friends) as CSV next to the PDF.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from initmem.analysis.figures import style
from initmem.analysis.figures.common import (
    FigureInputError,
    FigureInputs,
    drawn_counts,
    load_inputs,
)
from initmem.plan import artifacts

EPOCH_COLUMNS = ["family", "optimizer", "b", "lr0", "l2", "sigma_w",
                 "epoch", "val_acc", "T_SGD", "T_L2", "T_adapt", "record_source"]


def write_figure(number: int, runs_path: str | Path | None, epochs_path: str | Path | None,
                 config_path: str | Path | None, pdf_path: str | Path,
                 png_path: str | Path) -> None:
    """Draw figure `number` into pdf_path and png_path (one that reads no runs, Fig. 9's
    toy model, also its table as a .csv beside the PDF)."""
    declared = artifacts.figure(number)
    if not declared.reads_runs:
        fig, table = declared.build()()
        style.save(fig, pdf_path, png_path)
        table.to_csv(Path(pdf_path).with_suffix(".csv"), index=False, float_format="%.6g")
        return
    if runs_path is None:
        raise FigureInputError(f"figure {number} needs --runs (runs.parquet)")
    if declared.reads_epochs and epochs_path is None:
        raise FigureInputError(f"figure {number} needs --epochs (epochs.parquet)")
    # the epochs table can be large: only the families of the roles the figure reads
    inputs = load_inputs(runs_path, epochs_path if declared.reads_epochs else None,
                         config_path, EPOCH_COLUMNS, declared.roles)
    style.save(draw(number, inputs), pdf_path, png_path)


def draw(number: int, inputs: FigureInputs):
    """Figure `number` (one that reads runs) with its provenance marks: missing and
    diverged runs, and the SYNTHETIC watermark when any input record is generated. It
    reads only the families of the roles it declares."""
    declared = artifacts.figure(number)
    fig, used = declared.build()(dataclasses.replace(inputs, roles=declared.roles))
    style.mark_missing(fig, *drawn_counts(used))
    if inputs.synthetic:
        style.mark_synthetic(fig)
    return fig


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem figure`."""
    parser.add_argument("number", type=int, choices=list(artifacts.FIGURES), metavar="N",
                        help=f"figure number, one of {', '.join(map(str, artifacts.FIGURES))}")
    parser.add_argument("--runs", type=Path, help="runs.parquet (all but Fig. 9)")
    parser.add_argument("--epochs", type=Path, help="epochs.parquet (Fig. 6)")
    parser.add_argument("--config", type=Path, help="config.yaml (optimizer labels)")
    parser.add_argument("--pdf", type=Path, required=True, help="vector output")
    parser.add_argument("--png", type=Path, required=True, help="raster output")


def main(args: argparse.Namespace) -> int:
    """`initmem figure`: draw one of the paper's figures."""
    write_figure(args.number, args.runs, args.epochs, args.config, args.pdf, args.png)
    return 0


__all__ = ["FigureInputError", "FigureInputs", "configure_parser", "run", "write_figure"]
