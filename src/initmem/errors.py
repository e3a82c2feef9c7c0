"""The one error type for bad input (config, spec, data, records), and the one-line
account of a failed read or write.

The CLI prints both as one line, without a traceback: an InputError names the bad value
and what is allowed; an OSError names the path and what to do. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NO_ROOM = "free space on that disk or point the output elsewhere"
FULL = (errno.ENOSPC, errno.EDQUOT)
NO_WRITE = "make it writable, or choose another output folder"
# errno -> what to do about it
ADVICE = {
    errno.ENOSPC: NO_ROOM, errno.EDQUOT: NO_ROOM,
    errno.EROFS: "the file system is read-only; choose an output folder on a writable one",
    errno.EACCES: NO_WRITE, errno.EPERM: NO_WRITE,
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
    errno.EISDIR: "it is a folder; give the path of a file",
}


class InputError(ValueError):
    """Bad input; the message names the bad value and what is allowed."""


def describe_os_error(err: OSError) -> str:
    """One line: the path (when known), what failed, what to do, and what `naming` noted
    about that file."""
    where = f"{err.filename}: " if err.filename else ""
    what = err.strerror or str(err)
    advice = ADVICE.get(err.errno)
    notes = "".join(f" ({note})" for note in getattr(err, "__notes__", []))
    return f"{where}{what}" + (f"; {advice}" if advice else "") + notes


@contextmanager
def naming(path: str | Path, room: str = "") -> Iterator[None]:
    """Name `path` in an OSError raised inside: a write that finds the disk full names no
    file, and a temporary file's random name says less than the file it becomes. `room`:
    the space files of this kind need, noted when the disk is full."""
    try:
        yield
    except OSError as err:
        if err.errno is None:
            raise
        named = OSError(err.errno, err.strerror, str(path))
        if room and err.errno in FULL:
            named.add_note(room)
        raise named from err
