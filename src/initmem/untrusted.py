"""Opening files that anyone may have put where initmem looks: a shared results folder
(other users of the group, other nodes) or a stranger's archive (docs/records.md, What
is trusted).

A name in such a folder may be a symbolic link (to any file the reader may write, or to
/dev/zero), a FIFO (whose open or read blocks forever), a device, or a file larger than
any initmem writes. So every such file is opened without following a link (O_NOFOLLOW),
without blocking (O_NONBLOCK), and used only once fstat shows a regular file, read no
further than a bound; a lock file is opened the same way before it is written.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from initmem.errors import InputError

NOT_REGULAR = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device",
               stat.S_ISSOCK: "a socket", stat.S_ISDIR: "a folder"}
OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open(path: Path, flags: int, what: str, error: type[InputError], mode: int = 0o644) -> int:
    """A descriptor of the regular file at `path` (`what` it should be, for the error)."""
    try:
        fd = os.open(path, flags | OPEN_FLAGS, mode)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise error(f"{path}: a symbolic link; {what} is a file initmem wrote, never a "
                    "link (followed, it could lead anywhere)") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = next((name for test, name in NOT_REGULAR.items() if test(info.st_mode)),
                    "a special file")
        raise error(f"{path}: {kind}, not a regular file; {what} is a file initmem wrote")
    return fd


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path`, its links followed, stays inside `root` (a folder under root may be
    a link out of it, or a loop of links, which is not inside either)."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):  # a loop: RuntimeError before Python 3.13
        return False


def read_bytes(path: str | Path, limit: int, what: str,
               error: type[InputError] = InputError) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; `error` (naming
    the file and `what` it should be) for a link, a FIFO, a device or a larger file.
    OSError as os.open raises it otherwise (FileNotFoundError: it is gone)."""
    fd = _open(Path(path), os.O_RDONLY, what, error)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        raw = b"" if size > limit else fh.read(limit + 1)  # a file may grow as it is read
        if size > limit or len(raw) > limit:
            raise error(f"{path}: {max(size, len(raw))} bytes, more than {what} can "
                        f"hold ({limit})")
    return raw


def open_lock(path: str | Path) -> int:
    """A read-write descriptor of the lock file at `path`, created when absent (mode
    0644); InputError when it is a link (a planted link would have the lock holder write
    into its target), not a regular file, or has another name (a hard link)."""
    fd = _open(Path(path), os.O_RDWR | os.O_CREAT, "a lock", InputError)
    if os.fstat(fd).st_nlink > 1:
        os.close(fd)
        raise InputError(f"{path}: a hard link to another file; a lock is a file initmem "
                         "made, under one name; delete it")
    return fd
