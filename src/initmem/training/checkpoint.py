"""Checkpoints of a pack in training: atomic, checksummed, with one previous generation.

A checkpoint file is a 64-byte hex SHA-256 of the payload, a newline, then the payload
(torch.save of a plain dict). Saving writes a temporary file (locked while it is
written), fsyncs it and renames it over `latest.pt` after moving the old one to
`previous.pt`; so a crash at any moment leaves at least one complete checkpoint, and at
most the temporary file of the save it killed, which the next resume removes. Loading
verifies the checksum and falls back to the previous generation, naming the file it
rejected, for any failure: unreadable, checksum mismatch, a payload that does not
unpickle, or (trainer.PackTrainer) one that does not restore; when no generation does,
resuming stops with an error rather than start the pack over unasked.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from initmem.errors import InputError, naming

LATEST, PREVIOUS = "latest.pt", "previous.pt"
TMP_PREFIX = ".ckpt."  # a save's file until it is complete
# What a job's checkpoints can take on disk (README "The disk fills up").
ROOM = ("a training job needs room for two copies of the checkpoint of each of its packs "
        "trained so far, the previous and the latest, and one more being written")


class CheckpointError(InputError):
    """A checkpoint file is truncated or corrupted."""


def save(folder: Path, payload: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    blob = buffer.getvalue()
    with naming(folder / LATEST, ROOM):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TMP_PREFIX, suffix=".tmp")
    try:
        with naming(folder / LATEST, ROOM), os.fdopen(fd, "wb") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # held until renamed: discard_partial skips it
            fh.write(hashlib.sha256(blob).hexdigest().encode() + b"\n" + blob)
            fh.flush()
            os.fsync(fh.fileno())
            if (folder / LATEST).exists():
                os.replace(folder / LATEST, folder / PREVIOUS)
            os.replace(tmp, folder / LATEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path) -> dict[str, Any]:
    """The payload of one checkpoint file; CheckpointError names a bad file."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read ({err.strerror or err})") from None
    digest, _, blob = raw.partition(b"\n")
    if len(digest) != 64 or hashlib.sha256(blob).hexdigest().encode() != digest:
        raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupted)")
    try:
        payload = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
    except Exception as err:  # a payload that does not unpickle: any error of pickle or torch
        raise CheckpointError(f"{path}: does not load ({type(err).__name__}: {err})") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path}: holds a {type(payload).__name__}, not a checkpoint")
    return payload


def generations(folder: Path) -> Iterator[tuple[Path, dict[str, Any] | CheckpointError]]:
    """Each checkpoint file in `folder`, newest first, with its payload or the error that
    keeps it from reading."""
    for name in (LATEST, PREVIOUS):
        path = folder / name
        if not path.exists():
            continue
        try:
            yield path, read(path)
        except CheckpointError as err:
            yield path, err


def load_latest(folder: Path) -> dict[str, Any] | None:
    """The newest checkpoint in `folder` that reads, or None."""
    return next((saved for _, saved in generations(folder) if isinstance(saved, dict)), None)


def discard_partial(folder: Path) -> None:
    """Delete the temporary files of saves that were killed midway (each a checkpoint's
    size); a save in flight, of another trainer of the pack, holds its file's lock."""
    for path in folder.glob(f"{TMP_PREFIX}*.tmp"):
        try:
            with open(path, "rb") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                path.unlink()
        except (BlockingIOError, FileNotFoundError):  # in flight, or just renamed
            continue


def remove(folder: Path) -> None:
    """Delete the checkpoints, and the temporary file of a save that was killed midway."""
    discard_partial(folder)
    for path in (folder / LATEST, folder / PREVIOUS):
        path.unlink(missing_ok=True)
    remove_if_empty(folder)


def remove_if_empty(folder: Path) -> None:
    """Delete the folder when nothing is in it (another pack's checkpoints keep it)."""
    try:
        folder.rmdir()
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ENOTEMPTY):
            raise
