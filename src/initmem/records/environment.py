"""The software environment a runs archive was made in, and how a rebuild's differs.

A runs archive holds it as its member environment.json (records.archive): every
installed distribution with its version (importlib.metadata), the Python version and
implementation, and the platform. A rebuild years later, or on another machine, reads it
back and names the packages whose versions differ (`initmem verify --archive`, the HTML
report's run-status page): a warning, not a refusal, since most differences move no
number, and the one that does is then named. An archive made before the record reads
as "environment not recorded". An archive is data from anywhere (docs/records.md, What
is trusted): the member is read within a size bound and every value's type is checked.
"""

from __future__ import annotations

import platform
import re
from importlib.metadata import distributions
from typing import Any

from initmem.records.files import RecordError

MEMBER = "environment.json"
MAX_BYTES = 1024 * 1024  # 145 packages take 5 KB
MAX_PACKAGES = 10_000
MAX_TEXT = 200  # characters of a name, version or platform
FIELDS = ("python", "implementation", "platform")
NOT_RECORDED = ("environment not recorded (the archive was packed before initmem recorded "
                "its environment): a rebuild cannot say which packages differ")
SHOWN = 20  # differences named; the rest counted


def normalised(name: str) -> str:
    """A distribution's name as the package index compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def current() -> dict[str, Any]:
    """This process's environment, as an archive records it."""
    packages = {normalised(d.metadata["Name"]): d.version for d in distributions()
                if d.metadata["Name"]}
    return {"python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "packages": dict(sorted(packages.items()))}


def checked(data: Any, where: str) -> dict[str, Any]:
    """An archive's environment record, once its fields are strings of bounded length;
    RecordError names the first that is not."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: an environment record is a JSON object, not "
                          f"{type(data).__name__}")
    for name in FIELDS:
        _text(data.get(name), f"{where}: {name}")
    packages = data.get("packages")
    if not isinstance(packages, dict) or len(packages) > MAX_PACKAGES:
        raise RecordError(f"{where}: packages must be an object of at most {MAX_PACKAGES} "
                          "name: version pairs")
    for name, version in packages.items():
        _text(name, f"{where}: a package name")
        _text(version, f"{where}: package {name[:MAX_TEXT]!r}'s version")
    return data


def _text(value: Any, what: str) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT:
        raise RecordError(f"{what} is {str(value)[:60]!r}; allowed: a string of 1 to "
                          f"{MAX_TEXT} characters")


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between the recorded environment and `now`: 'torch 2.14.1 ->
    2.14.1+cpu', 'keras 3.15.1 -> (not installed)', 'python 3.11.7 -> 3.12.1'."""
    found = [f"{name} {recorded[name]} -> {now[name]}" for name in FIELDS
             if name != "platform" and recorded[name] != now[name]]
    before, after = recorded["packages"], now["packages"]
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            found.append(f"{name} {before.get(name, '(not installed)')} -> "
                         f"{after.get(name, '(not installed)')}")
    return found


def describe(recorded: dict[str, Any] | None, now: dict[str, Any] | None = None) -> str:
    """One line on how this environment compares with an archive's recorded one."""
    if recorded is None:
        return NOT_RECORDED
    now = current() if now is None else now
    found = differences(recorded, now)
    if not found:
        return (f"environment as recorded ({len(now['packages'])} packages, Python "
                f"{now['python']})")
    more = f", and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return (f"warning: this rebuild runs under another environment than the archive was "
            f"made in (recorded on {recorded['platform']}): {len(found)} differ: "
            f"{', '.join(found[:SHOWN])}{more}; its numbers may differ with them")
