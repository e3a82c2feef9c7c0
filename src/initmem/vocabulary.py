"""The words every stage shares, defined once: run statuses, record sources, how the data
was verified, the marks of generated or partial results, the interpolation threshold,
BatchNorm's momentum, the paper's sigma_w grids, the key of a table cell, and the display
names of Table 6's configurations (the networks' are initmem.plan.architectures').

Plain constants (no imports): the config schema's enums are checked against them
(tests/test_layers.py), and the training, records and analysis layers all read them here;
and the two questions every stage asks of a runs table, answered once (duck-typed pandas:
this module imports nothing).
"""

from __future__ import annotations

# A run's status in its summary record, and "missing" for an expected run without one.
COMPLETED, EARLY_STOPPED, DIVERGED, MISSING = "completed", "early_stopped", "diverged", "missing"
RECORD_STATUSES = (COMPLETED, EARLY_STOPPED, DIVERGED)

# Where a record came from: a training run, or the synthetic generator (never results).
TRAINED, GENERATED = "trained", "generated"


def missing(runs):  # noqa: ANN001, ANN201 (a pandas DataFrame -> a bool Series)
    """Which expected runs of a runs table have no record: status "missing", as the
    aggregate marks them, or none at all (a table built by hand)."""
    return runs["status"].astype("string").fillna(MISSING).eq(MISSING).astype(bool)


def generated(runs):  # noqa: ANN001, ANN201
    """Which rows are synthetic records (record_source "generated"): never results."""
    return runs["record_source"].astype("string").eq(GENERATED).fillna(False).astype(bool)

# How a run's data was verified (summary column data_verification): the official MD5 sums,
# the SHA-256 manifest its offline builder wrote, neither (accepted by allow_unverified),
# or generated data (nothing to verify).
MD5_VERIFIED, MANIFEST_VERIFIED, UNVERIFIED, GENERATED_DATA = (
    "md5", "manifest", "unverified", "synthetic")
SYNTHETIC_MARK = r"\textcolor{red}{\textbf{SYNTHETIC DATA --- NOT RESULTS}}"

INTERP_THRESHOLD = 0.995  # train accuracy that counts as interpolation (tau_interp)
# Keras BatchNormalization's momentum: the moving statistics keep 0.99^k of their start
# after k updates (the training's networks and the synthetic records' bn_var_ratio).
BN_MOMENTUM = 0.99

# sigma_w to this many significant digits is the one key of an initialisation scale: a
# run's, its record's and every lookup's, matched by equality (0.1 + 0.2 is the sigma_w
# 0.3, a range's steps land on the values a list gives), never by closeness. Digits, not
# decimals: a tiny positive sigma_w stays itself, never 0.
SIGMA_W_DIGITS = 12


def sigma_w_key(value: float) -> float:
    """The canonical sigma_w of `value` (SIGMA_W_DIGITS significant digits)."""
    return float(f"{float(value):.{SIGMA_W_DIGITS}g}")


# The paper's sigma_w grids of its ablation tables (Tables 4-6) and of Table 7.
FIVE_SIGMAS = (0.1, 0.5, 1.0, 1.8, 2.5)
EXTREME_SIGMAS = (0.1, 2.5)

# What identifies one number of Tables 2-7: our cells and the published ones share it.
CELL_KEY = ("table", "b", "optimizer", "config", "sigma_w", "lr0", "l2", "metric")

# Table 6's configurations: normalisation and augmentation.
CONFIG_LABELS = {"bn_aug": "BN + Aug", "ln_aug": "LN + Aug", "bn_noaug": "BN (no aug)"}
