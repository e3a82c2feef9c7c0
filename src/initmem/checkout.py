"""Where the files this package owns lie, whatever folder a command is typed from.

Two kinds of path reach a command. A path the user types (`--config`, `--records`,
`--out`) is relative to the folder they typed it in, as every shell command's. A path the
package owns (the transcribed tables paper/published, the claims file paper/claims.yaml,
the SLURM profile's template) is a file of this checkout: it resolves from the package's
own location (src/initmem/ lies two folders below the checkout), never from the current
folder, so `initmem status` works from a home folder or a job's folder. So do the
defaults of the paths a user may type: the paper's config.yaml, the workflow's results/,
data/cifar10 and ../shared are this checkout's. A relative path
written inside a config file (execution.throughput_csv) is relative to the checkout the
config lies in (the workflow runs there), or, for a config outside any checkout, to the
current folder.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
PAPER = CHECKOUT / "paper"
PUBLISHED = PAPER / "published"
CLAIMS = PAPER / "claims.yaml"
CONFIG = CHECKOUT / "config.yaml"  # the paper's config: the default of every --config
RESULTS = CHECKOUT / "results"  # where the workflow writes (results/runs: the records)
CIFAR10 = CHECKOUT / "data" / "cifar10"  # the demo's data set (make data)
SHARED = CHECKOUT.parent / "shared"  # the team's offline copies, beside the checkout
SLURM_TEMPLATE = CHECKOUT / "profiles" / "slurm" / "config.yaml"
MARK = "Snakefile"  # a checkout's root holds the workflow


def config_checkout(config_path: str | Path) -> Path | None:
    """The checkout a config file lies in (the nearest folder above it holding the
    Snakefile), or None for a config outside any."""
    for folder in Path(config_path).resolve().parents:
        if (folder / MARK).is_file():
            return folder
    return None


def in_config_checkout(path: str | Path, config_path: str | Path) -> Path:
    """A relative path written in a config file, from the config's checkout (absolute
    paths, and configs outside a checkout, as typed)."""
    path = Path(path)
    root = config_checkout(config_path)
    return path if path.is_absolute() or root is None else root / path
