"""A compact index of a stored native trace, so a page reads a window of events or steps
without parsing what comes before it. Pure: no Django.

Built once in one pass over the (decompressed) file and kept by the console
(``replay.models.TraceIndex``):

- ``event_marks`` / ``step_marks``: every ``STRIDE``-th event (step), ``[seq, offset]``, the
  byte offset of its line in the decompressed JSON Lines stream;
- ``buckets``: the whole trace's events in at most ``BUCKETS`` runs of consecutive events,
  each with its first and last seq, its size and its counts by event type (the page's
  overview of the timeline);
- ``events``, ``steps``, ``cut_short`` (the build stopped at its byte budget).

A window (:func:`read_window`) starts at the mark before the wanted seq and reads at most
``STRIDE`` lines more than it returns, whatever the trace's length. A JSON document (not
JSON Lines) has no line offsets: its windows are read by walking the parsed document, which
ingest keeps small (large traces are JSON Lines).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

STRIDE = 64
BUCKETS = 200
_SKIP_CHUNK = 1 << 16

EVENT = "event"
STEP = "step"
_MARKS = {EVENT: "event_marks", STEP: "step_marks"}


class IndexMismatch(ValueError):
    """The stored file does not have, at an offset of its index, the record it names."""


def _loads(line: bytes) -> Any:
    return json.loads(line)


PROGRESS_EVERY = 10_000


def build_jsonl(
    stream: IO[bytes], budget: int, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """The index of a JSON Lines trace read from ``stream`` (decompressed), reading at most
    ``budget`` bytes (``cut_short`` says the build stopped there). ``progress(events)`` is
    called every ``PROGRESS_EVERY`` events read."""
    marks: dict[str, list[list[int]]] = {EVENT: [], STEP: []}
    counts = {EVENT: 0, STEP: 0}
    types: list[str] = []
    seqs: list[int] = []
    offset = 0
    cut_short = False
    first = True
    while True:
        line = stream.readline(budget - offset + 1)
        if not line:
            break
        start, offset = offset, offset + len(line)
        if offset > budget:
            cut_short = True
            break
        if first:
            first = False  # the header
            continue
        if not line.strip():
            continue
        obj = _loads(line)
        kind = obj.get("record") if isinstance(obj, dict) else None
        if kind not in marks:
            continue
        seq = obj.get("seq")
        if counts[kind] % STRIDE == 0:
            marks[kind].append([seq, start])
        counts[kind] += 1
        if kind == EVENT:
            seqs.append(seq)
            types.append(str(obj.get("type", "")))
            if progress is not None and counts[EVENT] % PROGRESS_EVERY == 0:
                progress(counts[EVENT])
    index = _index("jsonl", marks, counts, seqs, types, cut_short)
    index["end"] = offset if not cut_short else start  # windows never read past it
    return index


def build_records(records: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The index of a JSON document trace from its ``(kind, body)`` records (no offsets: the
    marks carry the ordinal of the record among its kind)."""
    marks: dict[str, list[list[int]]] = {EVENT: [], STEP: []}
    counts = {EVENT: 0, STEP: 0}
    types: list[str] = []
    seqs: list[int] = []
    for kind, body in records:
        if kind not in marks:
            continue
        seq: Any = body.get("seq")  # as the JSON Lines build: what the record says
        if counts[kind] % STRIDE == 0:
            marks[kind].append([seq, counts[kind]])
        counts[kind] += 1
        if kind == EVENT:
            seqs.append(seq)
            types.append(str(body.get("type", "")))
    return _index("json", marks, counts, seqs, types, False)


def _index(  # noqa: PLR0917 - private, called twice with the build's parts
    encoding: str,
    marks: dict[str, list[list[int]]],
    counts: dict[str, int],
    seqs: list[int],
    types: list[str],
    cut_short: bool,
) -> dict[str, Any]:
    n = len(seqs)
    parts = min(n, BUCKETS)  # BUCKETS runs of (nearly) equal size, one per event if fewer
    buckets = []
    for part in range(parts):
        chunk = range(part * n // parts, (part + 1) * n // parts)
        buckets.append(
            {
                "first": seqs[chunk.start],
                "last": seqs[chunk.stop - 1],
                "count": len(chunk),
                "types": dict(Counter(types[i] for i in chunk).most_common()),
            }
        )
    return {
        "version": 1,
        "encoding": encoding,
        "events": counts[EVENT],
        "steps": counts[STEP],
        "event_marks": marks[EVENT],
        "step_marks": marks[STEP],
        "buckets": buckets,
        "cut_short": cut_short,
    }


@dataclass
class Window:
    """A page of records of one kind, in file order, and how it sits in the whole."""

    records: list[dict[str, Any]] = field(default_factory=list)
    has_before: bool = False
    has_after: bool = False
    parsed: int = 0  # lines parsed to find it: bounded by the window and one stride


def _mark_before(marks: list[list[int]], seq: int) -> int:
    """The index of the last mark whose seq is at most ``seq`` (0 when none)."""
    lo, hi = 0, len(marks)
    while lo < hi:
        mid = (lo + hi) // 2
        mark_seq = marks[mid][0]
        if isinstance(mark_seq, int) and mark_seq <= seq:
            lo = mid + 1
        else:
            hi = mid
    return max(0, lo - 1)


def _skip(stream: IO[bytes], n: int) -> None:
    try:
        stream.seek(n)
        return
    except (OSError, AttributeError, ValueError):
        pass
    while n > 0:  # not seekable: read and drop, nothing is parsed
        got = stream.read(min(n, _SKIP_CHUNK))
        if not got:
            return
        n -= len(got)


def _jsonl_records(  # noqa: PLR0917 - private
    stream: IO[bytes], kind: str, start: int, end: int, max_line: int, counter: list[int]
) -> Iterator[dict[str, Any]]:
    _skip(stream, start)
    position = start
    while position < end:
        line = stream.readline(min(max_line + 1, end - position))
        if not line:
            return
        position += len(line)
        if len(line) > max_line:
            raise IndexMismatch(f"a line longer than {max_line} bytes")
        if not line.strip():
            continue
        counter[0] += 1
        try:
            obj = _loads(line)
        except ValueError as exc:
            raise IndexMismatch(f"a line of the stored file is not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise IndexMismatch("a line of the stored file is not a JSON object")
        if obj.pop("record", None) == kind:
            yield obj


def read_window(
    index: dict[str, Any],
    open_stream: Any,
    kind: str,
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int = 50,
    max_line: int = 1 << 24,
    records: Any = None,
) -> Window:
    """Up to ``limit`` records of ``kind`` (``"event"`` or ``"step"``): the ones after seq
    ``after`` (all from the start when None), or the ones just before seq ``before``.

    ``open_stream()`` opens the decompressed file positioned at its start; for a JSON
    document index, ``records()`` gives its ``(kind, body)`` records instead.
    """
    marks = index.get(_MARKS[kind], [])
    counter = [0]
    if before is not None:
        origin = before - limit - 1
    elif after is not None:
        origin = after
    else:
        origin = None
    mark = _mark_before(marks, origin) if origin is not None and marks else 0
    if index.get("encoding") == "jsonl":
        if not marks:
            return Window()
        stream = open_stream()
        try:
            found = _collect(
                _jsonl_records(
                    stream, kind, marks[mark][1], int(index.get("end", 0)), max_line, counter
                ),
                after=after,
                before=before,
                limit=limit,
            )
        finally:
            stream.close()
    else:
        bodies = (body for k, body in records() if k == kind)
        found = _collect(_counted(bodies, counter), after=after, before=before, limit=limit)
    window, more = found
    first_seq = marks[0][0] if marks else None
    return Window(
        records=window,
        has_before=bool(window) and window[0].get("seq") != first_seq,
        has_after=more,
        parsed=counter[0],
    )


def _counted(bodies: Iterator[dict[str, Any]], counter: list[int]) -> Iterator[dict[str, Any]]:
    for body in bodies:
        counter[0] += 1
        yield body


def _collect(
    bodies: Iterator[dict[str, Any]], *, after: int | None, before: int | None, limit: int
) -> tuple[list[dict[str, Any]], bool]:
    """The window out of ``bodies`` (records of one kind in file order), and whether more
    records follow it."""
    if before is not None:
        kept: list[dict[str, Any]] = []
        for body in bodies:
            seq = body.get("seq")
            if isinstance(seq, int) and seq >= before:
                return kept[-limit:], True
            kept.append(body)
        return kept[-limit:], False
    window: list[dict[str, Any]] = []
    for body in bodies:
        seq = body.get("seq")
        if after is not None and isinstance(seq, int) and seq <= after:
            continue
        if len(window) == limit:
            return window, True
        window.append(body)
    return window, False
