"""Print the `uv pip install` flags that mirror this machine's pip configuration.

uv does not read pip's configuration files or PIP_* variables, so a machine whose wheels
come from local indexes, a find-links folder or under a constraints file (this project's
machines and CI) would otherwise resolve against PyPI alone. A plain machine's pip has
none of these: no flags, and uv installs from PyPI as pip would.
"""

import subprocess
import sys

FLAGS = {"find-links": "--find-links", "index-url": "--index-url",
         "extra-index-url": "--extra-index-url", "constraint": "--constraint"}


def pip_settings() -> dict[str, list[str]]:
    """Every value of the settings uv needs, from `pip config list` (files and PIP_*)."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                            capture_output=True, text=True, check=False).stdout
    found: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in FLAGS:
            for item in value.strip("'\"").split():
                if item not in found.setdefault(name, []):
                    found[name].append(item)
    return found


def uv_flags(settings: dict[str, list[str]]) -> list[str]:
    """uv's flags for pip's index settings (its own names, one flag per value)."""
    flags = [f"{FLAGS[name]}={value}" for name, values in settings.items() for value in values]
    if settings.get("find-links") or settings.get("extra-index-url"):
        flags.append("--index-strategy=unsafe-best-match")  # pip's: the best match of all
    return flags


if __name__ == "__main__":
    print(" ".join(uv_flags(pip_settings())))
