"""`initmem verify`: which of a config's runs have good records, in run folders or an archive.

Every record file is read through its checksum (records.files), and each summary's spec
is compared with the config's run. A run's records are
    good      readable, checksums intact, made with the config's spec
    missing   absent: no summary.parquet (never trained, or stopped before the end)
    damaged   a record file (or the archive) does not read, does not match its checksum,
              or holds a value out of its column's type or range (records.files.Range)
    stale     made with another spec than the config's, or of a run the config does not
              have (left from an older config)
One line per run that is not good, then the counts; for an archive, then how this
environment compares with the one it was packed in (records.environment: the packages
that differ, a warning that leaves the exit status alone). Exit status 0 when every
expected run is good, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from initmem.markup import terminal
from initmem.plan.grid import expand_runs, load_config
from initmem.plan.spec import Run, spec_table
from initmem.records import environment
from initmem.records.aggregate import spec_mismatches, typed_summaries
from initmem.records.archive import archive_runs, read_archive, read_environment
from initmem.records.files import RecordError, read_records
from initmem.untrusted import inside
from initmem.vocabulary import MISSING

GOOD, DAMAGED, STALE = "good", "damaged", "stale"  # and MISSING: no record, as everywhere
LEADS_OUT = ("a link out of the records folder (or a loop of links); initmem writes records "
             "inside it only")


@dataclass(frozen=True)
class Finding:
    """The state of one run's records (or of the archive as a whole)."""

    state: str
    where: str  # run id, folder or archive
    detail: str = ""


def verify_folders(root: str | Path, runs: list[Run]) -> list[Finding]:
    """A finding per expected run, then one per run folder the config does not have."""
    root = Path(root)
    findings = [verify_run(root, run)[0] for run in runs]
    expected = {run.run_dir for run in runs}
    for summary in sorted(root.rglob("summary.parquet")):  # "**" never enters a link
        folder = summary.parent.relative_to(root).as_posix()
        if folder not in expected:
            findings.append(Finding(STALE, folder, "not a run of the config"))
    return findings


def verify_run(root: Path, run: Run) -> tuple[Finding, pd.DataFrame | None]:
    """The run's finding, with its summary when it reads (`initmem status`'s outcomes)."""
    folder = root / run.run_dir
    if not inside(folder, root):  # read there, another folder's records would pass as its
        return Finding(DAMAGED, run.run_id, f"{folder}: {LEADS_OUT}"), None
    if not (folder / "summary.parquet").exists():
        return Finding(MISSING, run.run_id, f"no {folder / 'summary.parquet'}"), None
    try:
        _, summary = read_records(folder)
    except RecordError as err:
        return Finding(DAMAGED, run.run_id, str(err)), None
    return _spec_finding(run, summary), summary


def _spec_finding(run: Run, summary: pd.DataFrame) -> Finding:
    stale = spec_mismatches(spec_table([run]), summary.reset_index(drop=True))
    return Finding(STALE, run.run_id, stale[0]) if stale else Finding(GOOD, run.run_id)


def verify_archive(path: str | Path, runs: list[Run]) -> list[Finding]:
    """A finding per expected run and per archived run the config does not have; one
    `damaged` finding for the whole archive when it does not read."""
    try:
        summaries = typed_summaries(read_archive(path)[0])
    except RecordError as err:
        return [Finding(DAMAGED, str(path), str(err))]
    position = {run_id: i for i, run_id in enumerate(summaries["run_id"])}
    findings = []
    for run in runs:
        if run.run_id not in position:
            findings.append(Finding(MISSING, run.run_id, f"not in {path}"))
        else:
            findings.append(_spec_finding(run, summaries.iloc[[position[run.run_id]]]))
    expected = {run.run_id for run in runs}
    findings += [Finding(STALE, run_id, "not a run of the config") for run_id in position
                 if run_id not in expected]
    return findings


def report(findings: list[Finding]) -> str:
    """The findings in lines: each run not good, then the count of each state."""
    # one line per run whatever the detail quotes (arrow's messages can hold newlines),
    # as a terminal shows it (an archive's run ids are anyone's text)
    lines = [terminal(f"{f.state:<8} {f.where}: {' '.join(f.detail.split())}")
             for f in findings if f.state != GOOD]
    counts = Counter(f.state for f in findings)
    lines.append(", ".join(f"{counts[s]} {s}" for s in (GOOD, MISSING, DAMAGED, STALE)))
    return "\n".join(lines)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """The arguments of `initmem verify`."""
    parser.add_argument("--config", type=Path, required=True, help="the experiment config")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", type=Path, help="run folders root (results/runs)")
    source.add_argument("--archive", type=Path, help="a runs archive (initmem archive pack)")


def main(args: argparse.Namespace) -> int:
    """`initmem verify`: each expected run's records good, missing, damaged or stale."""
    config = load_config(args.config)
    runs = expand_runs(config)
    if args.archive:
        with contextlib.suppress(RecordError):  # a damaged archive: verify_archive says so
            runs = archive_runs(config, args.archive)
    findings = (verify_archive(args.archive, runs) if args.archive
                else verify_folders(args.records, runs))
    print(report(findings))
    unread = any(f.where == str(args.archive) for f in findings)  # the whole archive's
    if args.archive and not unread:
        print(terminal(environment.describe(read_environment(args.archive))))
    return 0 if all(f.state == GOOD for f in findings) else 1
