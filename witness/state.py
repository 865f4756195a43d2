"""The witness's record, one file per log under its state directory, owner-only:

* ``<sha256(origin) hex>.checkpoint``: the latest cosigned checkpoint (the signed note with
  the log's verified signatures and the witness's cosignature), replaced atomically (a
  temporary file, fsync, rename, fsync of the directory);
* ``<...>.lock``: held (``flock``) while one request reads and replaces the checkpoint, so two
  requests for the same log, from threads or processes, never interleave;
* ``<...>.refused``: one JSON line per validly signed checkpoint refused as inconsistent, the
  evidence of a log that forked or rolled back.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import IO

from tlog import checkpoint as checkpoints
from witness.core import Held

FILE_MODE = 0o600
DIR_MODE = 0o700


def origin_hash(origin: str) -> str:
    return hashlib.sha256(origin.encode()).hexdigest()


def _held_from(note: bytes) -> Held:
    text = note[: note.rfind(b"\n\n") + 1]
    cp = checkpoints.parse_checkpoint(text)
    return Held(cp.size, cp.root_hash, note)


class FileStore:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(self.directory, DIR_MODE)

    def _path(self, origin: str, suffix: str) -> Path:
        return self.directory / f"{origin_hash(origin)}.{suffix}"

    def latest(self, origin: str) -> Held | None:
        try:
            return _held_from(self._path(origin, "checkpoint").read_bytes())
        except FileNotFoundError:
            return None

    def locked(self, origin: str) -> _Transaction:
        return _Transaction(self, origin)

    def refused(self, origin: str, status: int, reason: str, request: bytes) -> None:
        record = {
            "origin": origin,
            "status": status,
            "reason": reason,
            "request": base64.b64encode(request).decode(),
        }
        fd = os.open(
            self._path(origin, "refused"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE
        )
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")

    def write(self, origin: str, held: Held) -> None:
        final = self._path(origin, "checkpoint")
        temporary = final.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.write(fd, held.note)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, final)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


class _Transaction:
    def __init__(self, store: FileStore, origin: str) -> None:
        self.store = store
        self.origin = origin
        self._lock: IO[bytes] | None = None

    def __enter__(self) -> _Transaction:
        path = self.store._path(self.origin, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        self._lock = os.fdopen(fd, "r+b")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._lock is not None
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()
        self._lock = None

    def read(self) -> Held | None:
        return self.store.latest(self.origin)

    def write(self, held: Held) -> None:
        self.store.write(self.origin, held)
