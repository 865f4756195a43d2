"""Owner-only files and directories under var/ (the database, secrets, blobs, spools).

Plain `os` calls, no Django, so settings can use them before Django is set up. A file is
created with its final mode (never world-readable for a moment), and a directory or file left
by an older version with a wider mode is tightened, as long as it is ours.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def _tighten(path: Path, mode: int) -> None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    if info.st_uid == os.getuid() and info.st_mode & 0o777 != mode:
        path.chmod(mode)


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) owner-only, or tighten it if it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create an empty owner-only file unless it exists; tighten it if it does."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        _tighten(path, FILE_MODE)
    return path


def private_write(path: Path, data: bytes | str) -> Path:
    """Write `data` to an owner-only file (created 0600, so never readable by others)."""
    private_file(path)
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    return path


def private_sqlite(path: Path) -> None:
    """Pre-create the SQLite database owner-only: SQLite gives its -wal, -shm and -journal
    files the database file's own mode. Tightens those of an existing database too."""
    private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        _tighten(path.with_name(path.name + suffix), FILE_MODE)
