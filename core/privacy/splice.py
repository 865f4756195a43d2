"""A stored file read back with its personal values spliced in, streaming and seekable.

The stored bytes are the file with each value's byte span cut out; `Spliced` presents the
whole file (``pieces``: each span's offset in the whole file and the bytes to show there: the
value, or an erased marker of the same length) without reading the stored bytes into
memory. Read from its start to its end without a seek, it checks the whole file's SHA-256
(`expected`) and raises `mismatch()` (an OSError unless the caller says) on a mismatch.

Pure: no Django.
"""

from __future__ import annotations

import bisect
import hashlib
import io
from collections.abc import Callable, Sequence
from typing import IO


class Spliced(io.RawIOBase):
    def __init__(
        self,
        stored: IO[bytes],
        pieces: Sequence[tuple[int, bytes]],
        size: int,
        expected: str | None,
        mismatch: Callable[[], Exception] = lambda: OSError(
            "the stored file does not reassemble to its digest"
        ),
    ) -> None:
        self._stored = stored
        self._starts = [start for start, _ in pieces]
        self._pieces = [data for _, data in pieces]
        # bytes cut out before piece i (the stored offset of a place p outside every piece
        # is p minus the lengths of the pieces that end at or before it)
        self._cut_before = [0]
        for data in self._pieces:
            self._cut_before.append(self._cut_before[-1] + len(data))
        self._size = size
        self._pos = 0
        self._digest = hashlib.sha256() if expected is not None else None
        self._expected = expected
        self._mismatch = mismatch
        self._stored_at = -1

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            target = offset
        elif whence == io.SEEK_CUR:
            target = self._pos + offset
        else:
            target = self._size + offset
        if target < 0:
            raise OSError("negative seek position")
        if target != self._pos:
            self._digest = None  # read out of order: the whole-file check no longer applies
        self._pos = target
        return target

    def _read_stored(self, at: int, n: int) -> bytes:
        if self._stored_at != at:
            self._stored.seek(at)
        data = self._stored.read(n)
        self._stored_at = at + len(data)
        return data

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._pos >= self._size or not len(view):
            self._finish()
            return 0
        i = bisect.bisect_right(self._starts, self._pos) - 1
        if i >= 0 and self._pos < self._starts[i] + len(self._pieces[i]):
            piece = self._pieces[i]
            offset = self._pos - self._starts[i]
            data = piece[offset : offset + len(view)]
        else:
            following = i + 1
            limit = self._starts[following] if following < len(self._starts) else self._size
            n = min(len(view), limit - self._pos)
            data = self._read_stored(self._pos - self._cut_before[following], n)
            if len(data) != n:
                raise OSError("the stored file is shorter than its sealed size")
        view[: len(data)] = data
        if self._digest is not None:
            self._digest.update(data)
        self._pos += len(data)
        return len(data)

    def _finish(self) -> None:
        if self._digest is not None and self._pos == self._size:
            digest, self._digest = self._digest.hexdigest(), None
            if digest != self._expected:
                raise self._mismatch()

    def close(self) -> None:
        if not self.closed:
            self._stored.close()
        super().close()
