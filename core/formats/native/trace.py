"""What a read gives and what it may cost: the :class:`Limits` of an upload, and the
:class:`NativeTrace` a read returns, with its records (:class:`Record`) and the engine's
plain rows (:data:`Row`, :func:`expand_events`).

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:
    from orjson import loads as orjson_loads
except ImportError:  # pragma: no cover - parse_compact proves nothing without orjson
    orjson_loads = None  # type: ignore[assignment]
from core.formats.jsonstrict import MAX_KEYS, MAX_OBJECT_KEYS
from core.formats.native.schema import FORMAT


@dataclass(frozen=True)
class Limits:
    """What an upload may be. Oversized input is refused before it is held in memory."""

    max_document_bytes: int = 256 * 1024**2  # a .trace.json is parsed whole; use JSONL beyond
    max_total_bytes: int = 8 * 1024**3  # decompressed, JSONL included (gzip bombs stop here)
    max_line_bytes: int = 32 * 1024**2  # one JSONL record
    max_depth: int = 64
    max_string: int = 16 * 1024**2  # characters in one string
    max_records: int = 50_000_000
    max_blank_lines: int = 1024  # whitespace-only JSONL lines: padding, not records
    # gzip: past `ratio_floor` decompressed bytes, at most `max_ratio` times the bytes read
    max_ratio: int = 200
    ratio_floor: int = 32 * 1024**2
    max_keys: int = MAX_KEYS  # keys in one JSON text (the document, or one JSONL line)
    max_object_keys: int = MAX_OBJECT_KEYS

    def keys(self) -> dict[str, int]:
        return {"max_keys": self.max_keys, "max_object_keys": self.max_object_keys}


DEFAULT_LIMITS = Limits()


@dataclass(slots=True)
class Record:
    kind: str  # "event" | "step" | "output"
    body: dict[str, Any]
    where: str
    ref: str = ""  # the output_ref of an output record


#: A record as `NativeTrace.rows` yields it: `(kind, body, where, ref, pre)`. `pre` is None
#: or what a parallel reader worked out already: for an event `(derived event_id, hashed
#: body bytes or None, previous event's hash or None, chain hash after it or None)`, for an
#: output the hash of its content (or None). A reader also yields runs of plain, validated
#: events whose ids and inner links it checked (`runs.EventRun`) as one row, `("events",
#: lines, where, "", (first seq, first body bytes, first hash, the events' sealed bytes
#: joined with commas, last hash, count, the events or None))`, where `lines` is `[(line
#: number, line), ...]` for a JSON Lines trace and the `range` of the events' indexes in a
#: document's ``events``: the engine checks the run's link to what came before and takes it
#: whole, or expands it with `expand_events`. The events come parsed for long lines (and
#: always from a document); short lines are parsed again.
Row = tuple[str, Any, str, str, Any]


def expand_events(
    lines: list[tuple[int, bytes]] | range, events: list[dict[str, Any]] | None
) -> Iterator[Row]:
    """The rows of an `"events"` run, one event each, named as their own rows would be."""
    if isinstance(lines, range):  # a document's events[i]; they come parsed
        assert events is not None
        for i, event in zip(lines, events, strict=True):
            yield ("event", event, f"events[{i}]", "", None)
        return
    for i, (lineno, line) in enumerate(lines):
        if events is not None:
            event = events[i]
        else:
            event = orjson_loads(line)
            del event["record"]
        yield ("event", event, f"line {lineno}", "", None)


@dataclass
class NativeTrace:
    """A parsed header and a one-pass stream of its records, in file order."""

    header: dict[str, Any]
    encoding: str  # "json" | "jsonl"
    compressed: bool
    _rows: Callable[[int], Iterator[Row]] = field(repr=False, default=lambda _workers: iter(()))
    _lines: Callable[[], Iterator[tuple[int, bytes]]] | None = field(repr=False, default=None)

    def raw_lines(self) -> Iterator[tuple[int, bytes]] | None:
        """A JSON Lines trace's record lines as read, ``(line number, bytes)``, within the
        read's limits but neither parsed nor validated (None for a JSON document): for
        comparing two files line by line. One pass, instead of `records` or `rows`."""
        return self._lines() if self._lines is not None else None

    def records(self) -> Iterator[Record]:
        """The records, validated, in file order (one pass: call this or `rows` once)."""
        return (Record(kind, body, where, ref) for kind, body, where, ref, _pre in self._rows(0))

    def rows(self, workers: int = 1) -> Iterator[Row]:
        """The records as plain tuples, and runs of plain events as one row (see `Row`):
        the engine's fast path; one pass.

        A JSON Lines trace is read in chunks of lines, each parsed, validated and hashed at
        once; with `workers` > 1 by that many worker processes. The rows still come in file
        order, with the same refusals at the same place as `records` gives. A JSON document
        is already in memory and always read here, record by record.
        """
        return self._rows(workers)

    @property
    def format(self) -> str:
        return FORMAT
