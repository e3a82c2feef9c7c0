"""Open the HTML report as a reader would: headless Chromium renders it, takes a screenshot,
and dumps the DOM after its scripts ran. The report passes when no script raised, its app
drew its menu (every category shows outside the scripts), and every expected file is among
its results, each with a caption.

    initmem report check results/report/report.html --screenshot results/report/report.png \
        --expect fig1.png table1.html status.html
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from initmem.errors import InputError

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Headless in a container: no sandbox (root), no GPU; the virtual-time budget lets the
# report's React app finish drawing before the DOM is dumped.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000")
WINDOW = "--window-size=1400,1000"
CONSOLE = re.compile(r":(INFO|WARNING|ERROR):CONSOLE[^\]]*\] (.*)")
TIMEOUT_S = 120


def browser() -> str:
    """The path of the first Chromium on PATH; InputError when there is none."""
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    raise InputError(f"no Chromium on PATH (looked for {', '.join(BROWSERS)}); install the "
                     "Debian package: apt-get install chromium")


def run_browser(page: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on `page` with `args`; RuntimeError when it fails."""
    done = subprocess.run([browser(), *FLAGS, *args, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def script_errors(log: str) -> list[str]:
    """The console messages of uncaught exceptions and console.error calls."""
    errors = []
    for level, message in CONSOLE.findall(log):
        if level == "ERROR" or message.startswith('"Uncaught'):
            errors.append(message)
    return errors


class Scripts(HTMLParser):
    """The text of each <script id=...>, and all text outside scripts."""

    def __init__(self) -> None:
        """A parser that has read nothing yet."""
        super().__init__()
        self.scripts: dict[str, str] = {}
        self.text: list[str] = []
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Note a <script>'s id ("" for one without) while inside it."""
        if tag == "script":
            self._script = dict(attrs).get("id") or ""

    def handle_endtag(self, tag: str) -> None:
        """Leave a <script>."""
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        """Text outside scripts goes to `text`, a script's to its id (one without: dropped)."""
        if self._script is None:
            self.text.append(data)
        elif self._script:
            self.scripts[self._script] = self.scripts.get(self._script, "") + data


def embedded_json(script: str) -> dict:
    """The report's data scripts assign one JSON value to a variable."""
    return json.loads(script[script.index("=") + 1:].strip().rstrip(";"))


def dom_problems(dom: str, expected: list[str]) -> list[str]:
    """What a reader would miss: categories not drawn in the menu, expected files absent
    from the results or without a caption."""
    parsed = Scripts()
    parsed.feed(dom)
    shown = " ".join(parsed.text)
    problems = []
    if "results" not in parsed.scripts or "categories" not in parsed.scripts:
        return problems + ["no results or categories in the report"]
    results = embedded_json(parsed.scripts["results"])
    problems += [f"category {name!r} is not in the menu"
                 for name in embedded_json(parsed.scripts["categories"]) if name not in shown]
    by_name = {entry["name"]: entry for entry in results.values()}
    for name in expected:
        if name not in by_name:
            problems.append(f"{name}: not in the report")
        elif not by_name[name]["caption"].strip():
            problems.append(f"{name}: no caption")
    return problems


def check(report: Path, screenshot: Path, expected: list[str]) -> list[str]:
    """Screenshot the report and check its DOM and console; the problems found."""
    if not report.exists():
        raise InputError(f"{report}: missing (build it with `make report`)")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    run_browser(report, WINDOW, f"--screenshot={screenshot.resolve()}")
    done = run_browser(report, WINDOW, "--dump-dom")
    return [f"script error: {e}" for e in script_errors(done.stderr)] + dom_problems(
        done.stdout, expected)


def main(args: argparse.Namespace) -> int:
    """`initmem report check`: print the report's problems; 1 when there are any."""
    problems = check(args.report, args.screenshot, args.expect)
    for problem in problems:
        print(problem)
    print(f"{args.report}: {len(problems)} problems; screenshot {args.screenshot}")
    return 1 if problems else 0
