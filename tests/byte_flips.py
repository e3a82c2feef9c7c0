"""Single-byte corruptions of a record file or a runs archive, each read back in a child
process as the pipeline reads it (read_records; read_archive). pyarrow's C++ can abort
the whole process on a damaged Parquet footer; in a child, that abort is one flip's
outcome instead of the end of the test worker (or of bench/byteflip.py).

Each flip is
    caught     RecordError naming the file
    harmless   read back equal to the original (padding, statistics nothing reads)
    silent     read back different without an error
    unnamed    an error that does not name the file
    died       the reader's process died (an abort in C++ code)
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from initmem.records import archive
from initmem.records.files import RecordError, read_records

OUTCOMES = ("caught", "harmless", "silent", "unnamed", "died")
READERS: dict[str, Callable[[Path], list[pd.DataFrame]]] = {
    "run": lambda path: list(read_records(path.parent)),  # a record file of a run folder
    "archive": lambda path: [table.to_pandas() for table in archive.read_archive(path)],
}


def flip(data: bytes, position: int, mask: int = 0x5A) -> bytes:
    """`data` with the byte at `position` xor-ed with `mask`."""
    return data[:position] + bytes([data[position] ^ mask]) + data[position + 1:]


def outcome(read: Callable[[Path], list[pd.DataFrame]], path: Path,
            original: list[pd.DataFrame]) -> tuple[str, str]:
    """(one of OUTCOMES but 'died', what was seen) of reading `path` once."""
    try:
        got = read(path)
    except RecordError as err:
        return ("caught" if str(path) in str(err) else "unnamed"), str(err)
    except Exception as err:  # any other exception is a finding, not a test error
        return "unnamed", f"{type(err).__name__}: {err}"
    try:
        for frame, want in zip(got, original, strict=True):
            pd.testing.assert_frame_equal(frame, want)
    except AssertionError as err:
        return "silent", str(err)
    return "harmless", ""


def child(kind: str, path: Path, flips: list[list[int]]) -> None:
    """Print [index, outcome, detail] per (position, mask) flip; restore the file after."""
    read, data = READERS[kind], path.read_bytes()
    original = read(path)
    print(json.dumps("ready"), flush=True)
    try:
        for index, (position, mask) in enumerate(flips):
            path.write_bytes(flip(data, position, mask))
            print(json.dumps([index, *outcome(read, path, original)]), flush=True)
    finally:
        path.write_bytes(data)


def flip_outcomes(kind: str, path: Path,
                  flips: Sequence[tuple[int, int]]) -> list[tuple[str, str]]:
    """(outcome, detail) of each (position, mask) flip of `path`, read by READERS[kind].
    A child that dies on a flip records it as 'died' and a new child goes on after it."""
    data, results = path.read_bytes(), {}
    while len(results) < len(flips):
        start = len(results)
        proc = subprocess.run([sys.executable, __file__, kind, str(path),
                               json.dumps([list(f) for f in flips[start:]])],
                              capture_output=True, text=True, timeout=1800)
        lines = proc.stdout.splitlines()
        if not lines:  # not one flip read: the undamaged file or the child itself is bad
            raise RuntimeError(f"reading {path} undamaged failed: {proc.stderr[-2000:]}")
        for line in lines[1:]:
            index, result, detail = json.loads(line)
            results[start + index] = (result, detail)
        if len(results) < len(flips):  # the child died on the next flip
            results[len(results)] = ("died", f"exit {proc.returncode}: {proc.stderr[-500:]}")
            path.write_bytes(data)  # the dead child could not restore it
    return [results[i] for i in range(len(flips))]


if __name__ == "__main__":
    child(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]))
