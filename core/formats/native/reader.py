"""Opening a native trace (:func:`open_native`): gzip detected and bounded (its total size
and its ratio), the spelling told by the name or the first line, a JSON document read whole
up to its limit, a JSON Lines trace's header read and its records left to stream.

Pure: no Django.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats.jsonstrict import check_shape, loads_document, loads_strict
from core.formats.native.hashing import event_id_deriver
from core.formats.native.lines import _blank_lines, _long_line, _serial_rows
from core.formats.native.parallel import _chunked_rows
from core.formats.native.runs import EventRun
from core.formats.native.schema import (
    DOCUMENT_KEYS,
    FORMAT,
    HEADER_KEYS,
    _expect,
    _malformed,
    _no_extra,
    _type_name,
    validate_event,
    validate_header,
    validate_output,
    validate_step,
)
from core.formats.native.trace import DEFAULT_LIMITS, Limits, NativeTrace, Row

GZIP_MAGIC = b"\x1f\x8b"
_READ_BYTES = 1 << 20  # what one read of an upload asks for
#: events of a document in one run at most: its sealed bytes are joined, and written to the
#: seal, a run at a time, not in one copy of the whole trace's (a few MB a run; 2,048 was 3%
#: slower over 100,000 events, no limit no faster)
_RUN_EVENTS = 16384


class _BoundedReader(io.RawIOBase):
    """Reads a (decompressed) stream and refuses to deliver more than `limit` bytes."""

    def __init__(
        self,
        raw: io.RawIOBase | gzip.GzipFile,
        limit: int,
        what: str,
        compressed: _Counted | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._raw = raw
        self._left = limit
        self._limit = limit
        self._what = what
        self._compressed = compressed
        self._ratio = limits.max_ratio
        self._floor = limits.ratio_floor

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        # At most 1 MiB a call (a caller's huge buffer must not be filled at once), and never
        # past the limit: the bytes up to it are delivered, and only a read beyond it, when
        # the stream has more, is refused (a page reading a stored file up to its budget
        # gets what lies before it).
        if not len(b):
            return 0
        want = min(len(b), self._left, _READ_BYTES) or 1
        try:
            # straight into the caller's buffer: a copy of every byte fewer than read()
            got = self._raw.readinto(memoryview(b)[:want]) or 0
        except (OSError, EOFError, zlib.error) as exc:
            raise _malformed(
                f"{self._what}: the gzip stream is corrupt or truncated ({exc})"
            ) from None
        if got > self._left:
            raise ReplayError(
                MALFORMED_TRACE,
                f"{self._what}: more than {self._limit} bytes once decompressed; refused "
                "(a gzip bomb, or a trace larger than this console accepts)",
                detail={"limit": "max_total_bytes"},
            )
        self._left -= got
        if self._compressed is not None:
            out = self._limit - self._left
            if out > self._floor and out > self._ratio * self._compressed.count:
                raise _malformed(
                    f"{self._what}: decompresses to more than {self._ratio} times its "
                    f"compressed size ({out} bytes from {self._compressed.count}, past the "
                    f"first {self._floor}); refused as a gzip bomb"
                )
        return got


class _Counted(io.RawIOBase):
    """A stream that counts the bytes read from it (the compressed side of a gzip)."""

    def __init__(self, raw: IO[bytes] | io.RawIOBase) -> None:
        self._raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._raw.read(len(b))
        self.count += len(data)
        b[: len(data)] = data
        return len(data)


def open_native(
    source: IO[bytes],
    filename: str,
    limits: Limits = DEFAULT_LIMITS,
    *,
    read_ahead: int = _READ_BYTES,
) -> NativeTrace:
    """Open a native trace from a binary stream; detects gzip and the JSON/JSONL spelling.
    ``read_ahead``: the buffer in front of the stream (a reader of the whole file wants a
    large one; a page that reads a JSON Lines file's header line only, a small one)."""
    head = source.read(2)
    rest = _Prefixed(head, source)
    compressed = head == GZIP_MAGIC
    name = filename.lower().removesuffix(".gz")
    stream: io.BufferedReader
    if compressed:
        counted = _Counted(rest)
        stream = io.BufferedReader(
            _BoundedReader(
                gzip.GzipFile(fileobj=counted, mode="rb"),
                limits.max_total_bytes,
                filename,
                counted,
                limits,
            ),
            buffer_size=read_ahead,
        )
    else:
        stream = io.BufferedReader(
            _BoundedReader(rest, limits.max_total_bytes, filename), buffer_size=read_ahead
        )
    if name.endswith(".jsonl"):
        return _open_jsonl(stream, compressed, limits)
    if name.endswith(".json"):
        return _open_document(stream, compressed, limits)
    # no telling suffix: a JSONL trace's first line is a complete header without events
    first = stream.peek(limits.max_line_bytes)[: limits.max_line_bytes]
    newline = first.find(b"\n")
    if newline > 0:
        try:
            candidate = loads_strict(first[:newline], where="line 1", **limits.keys())
        except ReplayError:
            candidate = None
        if isinstance(candidate, dict) and "events" not in candidate and "format" in candidate:
            return _open_jsonl(stream, compressed, limits)
    return _open_document(stream, compressed, limits)


class _Prefixed(io.RawIOBase):
    """Puts the sniffed bytes back in front of the stream."""

    def __init__(self, prefix: bytes, raw: IO[bytes]) -> None:
        self._prefix = prefix
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._prefix:
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        readinto = getattr(self._raw, "readinto", None)
        if readinto is not None:  # a file: straight into the caller's buffer
            return readinto(b) or 0
        data = self._raw.read(len(b))
        b[: len(data)] = data
        return len(data)


def _read_document_bytes(stream: io.BufferedReader, limits: Limits) -> bytearray:
    # in pieces, refused as soon as the limit is crossed: never a buffer of the limit's
    # size. One buffer that grows (in place: a large one is remapped, not copied), each
    # piece copied into it once; a list of pieces joined at the end would touch twice the
    # memory, and fresh pages cost more than the copy (15,000 page faults for a 30 MB
    # document against 8,400, three times the time)
    data = bytearray()
    while chunk := stream.read1(_READ_BYTES):
        if len(data) + len(chunk) > limits.max_document_bytes:
            raise ReplayError(
                MALFORMED_TRACE,
                f"the JSON document is larger than {limits.max_document_bytes} bytes; send "
                "large traces as JSON Lines (*.trace.jsonl), which are streamed",
                detail={"limit": "max_document_bytes"},
            )
        data += chunk
    if not data or data.isspace():  # what strip() would empty, without a copy of the text
        raise _malformed("the file is empty")
    return data


def _open_document(stream: io.BufferedReader, compressed: bool, limits: Limits) -> NativeTrace:
    data = _read_document_bytes(stream, limits)
    # loads_strict's value and refusals; `bounded`: the shape is proven from the bytes (the
    # walk of a large document costs more), in the pass the key count makes over them
    doc, bounded = loads_document(
        data,
        where="trace",
        max_depth=limits.max_depth,
        max_string=limits.max_string,
        **limits.keys(),
    )
    del data  # not held beside the parsed document
    if not isinstance(doc, dict):
        raise _malformed(f"trace: expected a JSON object, got {_type_name(doc)}")
    if doc.get("format") != FORMAT:
        validate_header(doc)  # names the format problem
    _no_extra(doc, DOCUMENT_KEYS, "trace")
    if not bounded:
        check_shape(doc, where="trace", max_depth=limits.max_depth, max_string=limits.max_string)
    header = validate_header({k: v for k, v in doc.items() if k in HEADER_KEYS})
    events = _expect(doc, "events", (list,), "trace")
    steps = _expect(doc, "steps", (list,), "trace")
    outputs = _expect(doc, "outputs", (dict,), "trace")
    total = len(events) + len(steps) + len(outputs)
    if total > limits.max_records:
        raise _malformed(f"trace: {total} records, more than the limit of {limits.max_records}")

    def rows(workers: int) -> Iterator[Row]:
        if workers < 1:  # records(): one row per record
            for i, event in enumerate(events):
                w = f"events[{i}]"
                yield ("event", validate_event(event, w), w, "", None)
        else:
            yield from _event_rows(events, event_id_deriver(header["job"]["job_seed"]))
        for i, step in enumerate(steps):
            w = f"steps[{i}]"
            yield ("step", validate_step(step, w), w, "", None)
        for ref in sorted(outputs):
            w = f"outputs[{ref!r}]"
            yield ("output", validate_output(ref, outputs[ref], w), w, ref, None)

    return NativeTrace(header, "json", compressed, rows)


def _event_rows(events: list[Any], derive_id: Callable[[int, str], str]) -> Iterator[Row]:
    """A document's events as runs of plain events (`EventRun`, at most `_RUN_EVENTS`
    each), each one `"events"` row whose item is the range of their indexes, and a row of
    its own for each event that ends a run."""
    i, n = 0, len(events)
    while i < n:
        run = EventRun(islice(events, i, i + _RUN_EVENTS), derive_id)
        taken = len(run.events)
        if taken:
            yield ("events", range(i, i + taken), f"events[{i}]", "", run.summary(keep=True))
            i += taken
            if taken == _RUN_EVENTS or i == n:  # the run ended at its length, not an event
                continue
        w = f"events[{i}]"
        yield ("event", validate_event(events[i], w), w, "", None)
        i += 1


def _read_line(stream: IO[bytes], limits: Limits, lineno: int) -> bytes:
    line = stream.readline(limits.max_line_bytes + 1)
    if len(line) > limits.max_line_bytes:
        raise _long_line(lineno, limits.max_line_bytes)
    return line


def _open_jsonl(stream: IO[bytes], compressed: bool, limits: Limits) -> NativeTrace:
    first = _read_line(stream, limits, 1)
    if not first.strip():
        raise _malformed("line 1: the file is empty; a JSON Lines trace starts with its header")
    header = loads_strict(first, where="line 1", **limits.keys())
    if isinstance(header, dict):
        for key in ("events", "steps", "outputs"):
            if key in header:
                raise _malformed(f"line 1: the JSON Lines header must not carry {key!r}")
        if header.get("format") == FORMAT:
            _no_extra(header, HEADER_KEYS, "line 1")
        check_shape(
            header, where="line 1", max_depth=limits.max_depth, max_string=limits.max_string
        )
    validate_header(header, "line 1")

    def rows(workers: int) -> Iterator[Row]:
        if workers < 1:  # records(): one row per record
            return _serial_rows(stream, limits)
        return _chunked_rows(stream, limits, header["job"]["job_seed"], workers)

    def lines() -> Iterator[tuple[int, bytes]]:
        lineno, blank = 1, 0
        while True:
            lineno += 1
            line = _read_line(stream, limits, lineno)
            if not line:
                return
            if not line.strip():
                blank += 1
                if blank > limits.max_blank_lines:
                    raise _blank_lines(lineno, limits.max_blank_lines)
                continue
            yield lineno, line

    return NativeTrace(header, "jsonl", compressed, rows, lines)
