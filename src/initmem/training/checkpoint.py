"""Checkpoints of a pack in training: atomic, checksummed, with one previous generation.

A checkpoint file is a 64-byte hex SHA-256 of the payload, a newline, then the payload
(torch.save of a plain dict). Saving writes a temporary file, fsyncs it and renames it
over `latest.pt` after moving the old one to `previous.pt`; so a crash at any moment
leaves at least one complete checkpoint. Loading verifies the checksum and falls back
to the previous generation, naming the file it rejected, for any failure: unreadable,
checksum mismatch, a payload that does not unpickle, or (trainer.PackTrainer) one that
does not restore.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from initmem.errors import InputError, naming

log = logging.getLogger("initmem.checkpoint")
LATEST, PREVIOUS = "latest.pt", "previous.pt"
TMP_PREFIX = ".ckpt."  # a save's file until it is complete


class CheckpointError(InputError):
    """A checkpoint file is truncated or corrupted."""


def save(folder: Path, payload: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    blob = buffer.getvalue()
    with naming(folder / LATEST):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TMP_PREFIX, suffix=".tmp")
    try:
        with naming(folder / LATEST), os.fdopen(fd, "wb") as fh:
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


def generations(folder: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The checkpoints in `folder` that read, newest first; a file that does not read is
    named in a warning and skipped."""
    for name in (LATEST, PREVIOUS):
        path = folder / name
        if not path.exists():
            continue
        try:
            yield path, read(path)
        except CheckpointError as err:
            log.warning("%s; falling back to an older checkpoint", err)


def load_latest(folder: Path) -> dict[str, Any] | None:
    """The newest good checkpoint in `folder`, or None when there is none to resume."""
    return next((payload for _, payload in generations(folder)), None)


def remove(folder: Path) -> None:
    """Delete the checkpoints, and the temporary file of a save that was killed midway."""
    for path in [folder / LATEST, folder / PREVIOUS, *folder.glob(f"{TMP_PREFIX}*")]:
        path.unlink(missing_ok=True)
    if folder.exists() and not any(folder.iterdir()):
        folder.rmdir()
