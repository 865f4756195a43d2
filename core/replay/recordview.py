"""Every format's trace as records: the one view the trace page, its background index, its
windows, its outline and its record viewer read, whatever the format.

A format lists its trace as :class:`ViewRecord`\\ s (its optional ``records(parsed)``): in the
order the page shows them, each with a kind (``span``, ``event``, ``step``, ``field``...), a
label, a location (a JSON pointer into the file's document, or a line), its JSON value, the
position of its parent record (None at the top: the children follow) and a few short facts
for its row (``summary``: what a column shows, never a content value).

:func:`build` keeps everything but the values (the page's index: built once per stored file,
in the background for a large one, then windows are slices of it); :func:`window` is a page
of it; :func:`value_at` reads one record's value from the records again (the record viewer).
The index holds no message, payload or attribute value, so erasure and redaction, which act
on the stored file, reach everything the page shows of a value.

Pure: no Django, and no format (formats import it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: what :func:`build` writes, so a page tells a records index from a native one
VIEW = "records"
#: the overview's buckets at most (``console.charts.overview``), as the native index has
BUCKETS = 200
#: the depth the page indents at most
MAX_DEPTH = 12
#: progress is said every this many records
PROGRESS_EVERY = 10_000
#: the longest label a record gets (:func:`short`)
MAX_LABEL = 120


@dataclass(frozen=True)
class ViewRecord:
    """One record of a trace, as the page shows every format."""

    kind: str
    label: str
    location: str
    value: Any = None
    parent: int | None = None
    summary: Mapping[str, Any] = field(default_factory=dict)
    #: ``(offset, length)``: the bytes of the stored file whose JSON is exactly ``value``,
    #: when the format knows them (an OpenTelemetry record's spans): the record viewer then
    #: reads those bytes alone, not the whole file; None otherwise
    extent: tuple[int, int] | None = None


def shape(value: Any) -> dict[str, Any]:
    """A value's JSON type and, for an object or an array, how many entries it holds: the
    summary of a record whose content the index must not keep."""
    if isinstance(value, dict):
        return {"type": "object", "entries": len(value)}
    if isinstance(value, list):
        return {"type": "array", "items": len(value)}
    return {"type": _TYPES.get(type(value), "number")}


_TYPES: Mapping[type, str] = {str: "string", bool: "boolean", type(None): "null"}


def short(text: str) -> str:
    """A label cut to :data:`MAX_LABEL` characters (an ellipsis says it was)."""
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\u2026"


class ViewError(ValueError):
    """A format's records are not a view (a parent after its child, a position out of
    range): a bug in the format, which the page reports as an unreadable file."""


def build(
    records: Iterable[ViewRecord],
    progress: Callable[[int], None] | None = None,
    facts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The index of a trace's records: for each, ``[kind, label, location, parent, depth,
    summary, extent]`` (no value), their count by kind, the overview's buckets, and
    ``facts``: the header facts a format keeps for a page that does not parse the file
    (``TraceFormat.index_facts``: none of them personal)."""
    rows: list[list[Any]] = []
    depths: list[int] = []
    for n, record in enumerate(records):
        parent = record.parent
        if parent is None:
            depth = 0
        elif isinstance(parent, int) and 0 <= parent < n:
            depth = depths[parent] + 1
        else:
            raise ViewError(f"record {n} names parent {parent!r}, not an earlier record")
        depths.append(depth)
        extent = list(record.extent) if record.extent is not None else None
        rows.append(
            [
                record.kind,
                record.label,
                record.location,
                parent,
                depth,
                dict(record.summary),
                extent,
            ]
        )
        if progress is not None and (n + 1) % PROGRESS_EVERY == 0:
            progress(n + 1)
    total = len(rows)
    parts = min(total, BUCKETS)
    buckets = []
    for part in range(parts):
        chunk = range(part * total // parts, (part + 1) * total // parts)
        buckets.append(
            {
                "first": chunk.start,
                "last": chunk.stop - 1,
                "count": len(chunk),
                "types": dict(Counter(rows[i][0] for i in chunk).most_common()),
            }
        )
    return {
        "version": 1,
        "view": VIEW,
        "count": total,
        "kinds": dict(Counter(row[0] for row in rows).most_common()),
        "records": rows,
        "buckets": buckets,
        "facts": dict(facts or {}),
    }


def is_view(index: Mapping[str, Any]) -> bool:
    """Whether ``index`` is a records index (:func:`build`), not a native one."""
    return index.get("view") == VIEW


@dataclass
class RecordWindow:
    """A page of records by position, and how it sits in the whole."""

    rows: list[dict[str, Any]]
    start: int
    total: int

    @property
    def has_before(self) -> bool:
        return self.start > 0

    @property
    def has_after(self) -> bool:
        return self.start + len(self.rows) < self.total


def row(index: Mapping[str, Any], position: int) -> dict[str, Any]:
    """One record of the index as the page reads it (by name)."""
    kind, label, location, parent, depth, summary, extent = index["records"][position]
    return {
        "extent": extent,
        "position": position,
        "kind": kind,
        "label": label,
        "location": location,
        "parent": parent,
        "depth": depth,
        "indent": "\u2003" * min(depth, MAX_DEPTH),
        "summary": summary,
    }


def window(index: Mapping[str, Any], *, start: int = 0, limit: int = 100) -> RecordWindow:
    """Up to ``limit`` records from position ``start`` (clamped to the records there are)."""
    total = int(index.get("count", 0))
    start = max(0, min(start, max(total - 1, 0)))
    stop = min(total, start + limit)
    return RecordWindow([row(index, i) for i in range(start, stop)], start, total)


def extent_of(index: Mapping[str, Any], position: int) -> tuple[int, int] | None:
    """Where the value of the record at ``position`` lies in the stored file, when the
    index knows it; None for a position past the end or a record without one."""
    rows = index.get("records", [])
    if not 0 <= position < len(rows) or rows[position][6] is None:
        return None
    offset, length = rows[position][6]
    return int(offset), int(length)


def value_at(records: Iterable[ViewRecord], position: int) -> ViewRecord | None:
    """The record at ``position`` of ``records`` (its value included), or None."""
    if position < 0:
        return None
    for n, record in enumerate(records):
        if n == position:
            return record
    return None
