"""Keras AdamW: Adam with decoupled weight decay before each update (Keras' AdamW is
exactly that subclass of Adam), so it is built as Adam is, from the recipe's weight decay
and the Adam hyperparameters its declaration takes from Adam's."""

from initmem.training.optimizers import adam

DECLARATION = {"label": "AdamW", "keras": "AdamW", "base": "adam"}

build = adam.build
