"""Content-addressed blob storage on Django's `blobs` storage (filesystem or S3)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages

from core.errors import MALFORMED_TRACE, ReplayError

CHUNK = 1 << 20


@dataclass
class Spooled:
    """An upload copied to a private temporary file, with its digest and size."""

    path: Path
    sha256: str
    size: int

    def open(self) -> IO[bytes]:
        return open(self.path, "rb")

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)


def spool(
    source: IO[bytes], *, limit: int, progress: Callable[[int], None] | None = None
) -> Spooled:
    """Copy `source` to a temporary file under var/, hashing as it goes; refuse past `limit`."""
    tmp_dir = Path(settings.VAR_DIR) / "tmp"
    tmp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner-only, as all of var/
    tmp_dir.chmod(0o700)
    fd, name = tempfile.mkstemp(dir=tmp_dir, prefix="upload-")
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise ReplayError(
                        MALFORMED_TRACE,
                        f"the file is larger than the upload limit of {limit} bytes",
                    )
                digest.update(chunk)
                out.write(chunk)
                if progress is not None:
                    progress(size)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Spooled(Path(name), digest.hexdigest(), size)


def blob_storage():
    return storages["blobs"]


def blob_name(sha256: str) -> str:
    return f"{sha256[:2]}/{sha256[2:4]}/{sha256}"


def blob_put(spooled: Spooled) -> str:
    """Store the spooled bytes under their digest (once); returns the storage name."""
    storage = blob_storage()
    name = blob_name(spooled.sha256)
    if not storage.exists(name):
        with spooled.open() as fh:
            saved = storage.save(name, File(fh))
        if saved != name:  # a concurrent writer stored the same bytes first
            storage.delete(saved)
    return name


#: Readers an app installs when it keeps some of a stored file's bytes apart (``privacy``:
#: personal values, encrypted per subject): ``(storage name, stored stream) -> the file``.
BLOB_READERS: list[Callable[[str, IO[bytes]], IO[bytes]]] = []


#: Where an app says which fields of a stored file (by sha256) it erased:
#: ``sha256 -> [{"location", "path"}]`` (``privacy``).
ERASED_FIELDS: list[Callable[[str], list[dict[str, str]]]] = []


def blob_erased(sha256: str) -> list[dict[str, str]]:
    """The fields of a stored file whose values are erased, as the apps that hold them say."""
    return [entry for provider in ERASED_FIELDS for entry in provider(sha256)]


def blob_open(name: str) -> IO[bytes]:
    fh: IO[bytes] = blob_storage().open(name, "rb")
    for reader in BLOB_READERS:
        fh = reader(name, fh)
    return fh
