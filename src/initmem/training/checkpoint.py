"""Checkpoints of a pack in training: atomic, checksummed, with one previous generation,
and unable to carry code.

A checkpoint file is the line MAGIC, a 64-byte hex SHA-256 of the rest and a newline,
then the state as one line of JSON in which each tensor is {"$tensor": i}, a newline, and
the tensors as torch.save of a flat {"i": tensor} dict, loaded with weights_only=True
(torch's unpickler of tensors and plain containers, which calls nothing else). Reading
takes regular files only (a FIFO would hang it, a link to /dev/zero fill the memory) no
larger than the caller's bound (trainer.PackTrainer: what its pack can hold). The pickle
format of earlier initmem versions (a digest line, then torch.save of the whole state)
can run code when loaded: it is refused unless the user vouches for the file (`initmem
train --trust-checkpoint`).
Saving writes a temporary file (locked while it is written), fsyncs it and renames it
over `latest.pt` after moving the old one to `previous.pt`; so a crash at any moment
leaves at least one complete checkpoint, and at most the temporary file of the save it
killed, which the next resume removes. Loading verifies the checksum and falls back to
the previous generation, naming the file it rejected, for any failure: unreadable,
checksum mismatch, a payload that does not load, or (trainer.PackTrainer) one that does
not restore; when no generation does, resuming stops with an error rather than start
the pack over unasked.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from initmem.errors import InputError, naming
from initmem.plan.inputs import parse_json
from initmem.untrusted import read_bytes

LATEST, PREVIOUS = "latest.pt", "previous.pt"
TMP_PREFIX = ".ckpt."  # a save's file until it is complete
MAGIC = b"initmem-checkpoint json+tensors"
TENSOR, INT_KEYS = "$tensor", "$int_keys"  # JSON stand-ins: a tensor, a dict with int keys
# What a job's checkpoints can take on disk (README "The disk fills up").
ROOM = ("a training job needs room for two copies of the checkpoint of each of its packs "
        "trained so far, the previous and the latest, and one more being written")
TRUST = "--trust-checkpoint"


class CheckpointError(InputError):
    """A checkpoint file is truncated, corrupted, or not one initmem reads."""


class PickledCheckpoint(CheckpointError):
    """A checkpoint in the pickle format of earlier versions, refused unread."""


def encode(payload: dict[str, Any]) -> bytes:
    """A checkpoint file's bytes for a state of tensors and JSON data."""
    tensors: list[Tensor] = []
    state = json.dumps(_split(payload, tensors)).encode()
    buffer = io.BytesIO()
    torch.save({str(i): t for i, t in enumerate(tensors)}, buffer)
    body = state + b"\n" + buffer.getvalue()
    return MAGIC + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _split(value: Any, tensors: list[Tensor]) -> Any:
    """`value` as JSON data, each tensor appended to `tensors` and replaced by its index."""
    if isinstance(value, Tensor):
        tensors.append(value)
        return {TENSOR: len(tensors) - 1}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _split(v, tensors) for k, v in value.items()}
    if isinstance(value, dict) and all(isinstance(k, int) for k in value):
        return {INT_KEYS: [[k, _split(v, tensors)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_split(v, tensors) for v in value]
    if value is None or isinstance(value, str | int | float):
        return value
    raise TypeError(f"a checkpoint holds tensors, lists, dicts and JSON scalars, not a "
                    f"{type(value).__name__}")


def _join(data: Any, tensors: dict[str, Tensor]) -> Any:
    """The state `_split` made `data` of, its tensors put back."""
    if isinstance(data, list):
        return [_join(v, tensors) for v in data]
    if not isinstance(data, dict):
        return data
    if data.keys() == {TENSOR}:
        return tensors[str(data[TENSOR])]
    if data.keys() == {INT_KEYS}:
        return {int(k): _join(v, tensors) for k, v in data[INT_KEYS]}
    return {k: _join(v, tensors) for k, v in data.items()}


def save(folder: Path, payload: dict[str, Any]) -> None:
    """Save `payload` as folder/latest.pt, the old latest becoming previous.pt; written to a
    locked temporary file, fsynced and renamed, so a crash leaves a complete checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    blob = encode(payload)
    with naming(folder / LATEST, ROOM):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TMP_PREFIX, suffix=".tmp")
    try:
        with naming(folder / LATEST, ROOM), os.fdopen(fd, "wb") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # held until renamed: discard_partial skips it
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
            if (folder / LATEST).exists():
                os.replace(folder / LATEST, folder / PREVIOUS)
            os.replace(tmp, folder / LATEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path, limit: int, trust: bool = False) -> dict[str, Any]:
    """The payload of one checkpoint file of at most `limit` bytes; CheckpointError names
    a bad file. `trust`: load the pickle format of earlier versions (it can run code)."""
    raw = _file_bytes(path, limit)
    head, _, rest = raw.partition(b"\n")
    load = _load if head == MAGIC else _pickle_loader(path, head, trust)
    body = _checked(path, rest if head == MAGIC else raw)
    try:
        payload = load(body)
    except Exception as err:  # any malformed content: of JSON, torch's unpickler or ours
        raise CheckpointError(f"{path}: does not load ({type(err).__name__}: {err})") from None
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path}: holds a {type(payload).__name__}, not a checkpoint")
    return payload


def _load(body: bytes) -> Any:
    """The state of a checkpoint's JSON line and tensors."""
    state, _, blob = body.partition(b"\n")
    # the file's bound is the line's
    return _join(parse_json(state, "its state", len(state)), _tensors(blob))


def _file_bytes(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (untrusted.read_bytes)."""
    try:
        return read_bytes(path, limit, "a checkpoint of this pack", CheckpointError)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read ({err.strerror or err})") from None


def _checked(path: Path, sealed: bytes) -> bytes:
    """What follows a valid checksum line."""
    digest, _, body = sealed.partition(b"\n")
    if len(digest) != 64 or hashlib.sha256(body).hexdigest().encode() != digest:
        raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupted)")
    return body


def _tensors(blob: bytes) -> dict[str, Tensor]:
    """The flat tensor dict of torch.save bytes, by torch's weights-only unpickler, after
    its zip directory shows no compressed record (whose expansion the file's size would
    not bound; torch.save stores them as they are)."""
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        if any(r.compress_type != zipfile.ZIP_STORED for r in archive.infolist()):
            raise ValueError("a compressed tensor record; torch.save writes none")
    tensors = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    if not (isinstance(tensors, dict) and all(isinstance(t, Tensor) for t in tensors.values())):
        raise ValueError("the tensor section is not a dict of tensors")
    return tensors


def _pickle_loader(path: Path, head: bytes, trust: bool) -> Callable[[bytes], Any]:
    """torch.load of the earlier pickle format (a digest line, then torch.save of the
    state), only when the user trusts the file."""
    if not re.fullmatch(rb"[0-9a-f]{64}", head):
        raise CheckpointError(f"{path}: not an initmem checkpoint (no {MAGIC.decode()!r} "
                              "line); truncated or corrupted")
    if not trust:
        raise PickledCheckpoint(
            f"{path}: a checkpoint in the pickle format of earlier initmem versions, which "
            f"can run code when loaded: delete {path.parent} to restart the pack from epoch "
            f"0, or rerun with {TRUST} if you made it yourself")
    return lambda blob: torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)


def generations(folder: Path, limit: int, trust: bool = False
                ) -> Iterator[tuple[Path, dict[str, Any] | CheckpointError]]:
    """Each checkpoint file in `folder` (a link too, to be refused), newest first, with its
    payload or the error that keeps it from reading (`read`'s limit and trust)."""
    for name in (LATEST, PREVIOUS):
        path = folder / name
        if not os.path.lexists(path):
            continue
        try:
            yield path, read(path, limit, trust)
        except CheckpointError as err:
            yield path, err


def load_latest(folder: Path, limit: int) -> dict[str, Any] | None:
    """The newest checkpoint in `folder` that reads, or None."""
    return next((saved for _, saved in generations(folder, limit) if isinstance(saved, dict)),
                None)


def discard_partial(folder: Path) -> None:
    """Delete the temporary files of saves that were killed midway (each a checkpoint's
    size); a save in flight, of another trainer of the pack, holds its file's lock."""
    for path in folder.glob(f"{TMP_PREFIX}*.tmp"):
        try:  # a FIFO must not block the open, nor a link lead elsewhere
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)) as fh:
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
