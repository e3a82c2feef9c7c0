"""Every table and figure of the paper, declared once: its number, the sigma_w it shows,
the family roles it reads, its builder, its template, its place in the report and its
caption. The commands (`initmem table N`, `initmem figure N`, `initmem report table N`),
the scorecard and the workflow's file lists and report sections (common.smk) all read
TABLES and FIGURES; no other list of table or figure numbers exists.

One module for both, in planning: it is what the workflow makes and the report shows,
and the workflow reads it while Snakemake parses, when it may import planning only
(tests/test_layers.py). So it imports neither pandas, Jinja, matplotlib nor analysis,
and names each builder as "module:function" (initmem.analysis's), imported only when
the artifact is made (tests/test_artifacts.py imports every one). Adding a table or a
figure: docs/development.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from initmem.errors import InputError
from initmem.plan import roles
from initmem.plan.roles import BEST_RECIPE, DEPTH, LONG_SGD, LR_L2, MAIN, NORM_AUG
from initmem.vocabulary import EXTREME_SIGMAS, FIVE_SIGMAS

# The report's categories, numbered because the report lists them alphabetically.
REPRODUCTION, MAIN_TEXT, APPENDIX = "1 Reproduction", "2 Main text", "3 Appendices"


@dataclass(frozen=True)
class Artifact:
    """One table or figure of the paper and everything that says how it is made and shown."""

    kind: str  # "table" | "figure"
    number: int
    builder: str  # "module:function"; tables: (runs, config, artifact), figures: (inputs)
    roles: tuple[str, ...]  # the family roles it reads (initmem.plan.roles)
    section: tuple[str, str]  # (category, subcategory) of the HTML report
    caption: str  # the report's caption: workflow/report/<caption>.rst
    sigma_w: tuple[float, ...] | None = None  # its sigma_w columns; None: every one run
    template: str | None = None  # tables: its Jinja template in analysis/templates/
    reads_runs: bool = True  # False: drawn from the config (Table 1) or nothing (Fig. 9)
    reads_epochs: bool = False  # needs epochs.parquet (Fig. 6)

    @property
    def name(self) -> str:
        """Its file stem: table2, fig6."""
        return f"{'table' if self.kind == 'table' else 'fig'}{self.number}"

    def build(self) -> Callable:
        """Its builder function, imported now."""
        module, function = self.builder.split(":")
        return getattr(importlib.import_module(module), function)

    def families(self, config: dict, *wanted: str) -> list[str]:
        """The config's families playing `wanted` roles, each of which it must declare."""
        return roles.families(config, *wanted, declared=self.roles, reader=self.name)

    def family(self, config: dict, role: str) -> str | None:
        """The one family playing `role` (declared), or None when no family does."""
        found = self.families(config, role)
        return found[0] if found else None


def _table(number: int, builder: str, roles_read: tuple[str, ...], section: str,
           sigma_w: tuple[float, ...] | None = None, **more: object) -> Artifact:
    """A table of the appendices, its template and caption named for its number."""
    return Artifact("table", number, f"initmem.analysis.tables.rows:{builder}", roles_read,
                    (APPENDIX, section), f"tables/table{number}", sigma_w,
                    f"table{number}.tex.j2", **more)


def _figure(number: int, builder: str, roles_read: tuple[str, ...],
            section: tuple[str, str], **more: object) -> Artifact:
    """A figure, its caption named for its number."""
    return Artifact("figure", number, f"initmem.analysis.figures.{builder}", roles_read,
                    section, f"figures/fig{number}", **more)


SGD_VS_ADAM = (MAIN_TEXT, "§3.1 SGD vs. Adam and Muon")
HYPERPARAMETERS = (MAIN_TEXT, "§3.2 Dependence on hyperparameters")
DEPTH_SECTION, NORM_SECTION = "D Depth comparison", "E Normalization and augmentation"

TABLES = {t.number: t for t in (
    _table(1, "optimizer_settings", (MAIN,), "A Experimental details", reads_runs=False),
    _table(2, "checkpoints", (MAIN,), "B Supplementary tables", EXTREME_SIGMAS[:1]),
    _table(3, "checkpoints", (MAIN,), "B Supplementary tables", EXTREME_SIGMAS[1:]),
    _table(4, "lr_l2", (MAIN, LR_L2, LONG_SGD), "C Learning-rate ablation", FIVE_SIGMAS),
    _table(5, "depth", (MAIN, DEPTH), DEPTH_SECTION, FIVE_SIGMAS),
    _table(6, "norm_aug", (NORM_AUG, MAIN), NORM_SECTION, FIVE_SIGMAS),
    _table(7, "best_recipe", (BEST_RECIPE,), "F Best-training pipeline", EXTREME_SIGMAS),
)}

FIGURES = {f.number: f for f in (
    _figure(1, "sweeps:fig1", (MAIN,), SGD_VS_ADAM),
    _figure(2, "heatmap:fig2", (MAIN,), SGD_VS_ADAM),
    _figure(3, "sweeps:fig3", (MAIN,), SGD_VS_ADAM),
    _figure(4, "sweeps:fig4", (MAIN, LR_L2, LONG_SGD), HYPERPARAMETERS),
    _figure(5, "sweeps:fig5", (MAIN, DEPTH), HYPERPARAMETERS),
    _figure(6, "beta:fig6", (MAIN, LR_L2), (MAIN_TEXT, "§4 The time scale of forgetting"),
            reads_epochs=True),
    _figure(7, "sweeps:fig7", (MAIN, DEPTH), (APPENDIX, DEPTH_SECTION)),
    _figure(8, "sweeps:fig8", (MAIN, NORM_AUG), (APPENDIX, NORM_SECTION)),
    _figure(9, "toyfig:fig9", (), (APPENDIX, "G Minimal linear model"), reads_runs=False),
)}


def table(number: int) -> Artifact:
    """Table `number`'s declaration; InputError naming the tables when there is none."""
    return _lookup(TABLES, number)


def figure(number: int) -> Artifact:
    """Figure `number`'s declaration; InputError naming the figures when there is none."""
    return _lookup(FIGURES, number)


def _lookup(declared: dict[int, Artifact], number: int) -> Artifact:
    """The declaration of `number` among `declared`, else InputError naming them."""
    if number not in declared:
        kind = next(iter(declared.values())).kind
        raise InputError(f"{kind} {number!r} is not allowed; {kind}s are "
                         f"{', '.join(map(str, declared))}")
    return declared[number]
