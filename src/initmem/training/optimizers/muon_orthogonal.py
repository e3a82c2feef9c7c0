"""Muon's orthogonalised update for conv kernels too (flattened per run to (out,
in*kh*kw)); the output dense stays excluded. An extension experiment, never the paper's
"Muon", which Keras routes entirely through AdamW on these networks (see muon.py)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from initmem.plan.spec import Recipe
from initmem.training.optimizers.muon import Muon

DECLARATION = {"label": "Muon (orthogonal kernels)", "base": "muon", "keras": None,
               "kernel_decay": "weight_decay"}  # conv kernels take the Muon path


def build(recipe: Recipe, named_params: Iterable[tuple[str, nn.Parameter]]) -> Muon:
    """The recipe's Muon with the conv kernels on the orthogonalised path too."""
    return Muon(named_params, flatten_conv=True,
                hyperparameters=recipe.optimizer_hyperparameters)
