"""Two native traces compared record by record: the header, then each event, step and output
paired with its counterpart (events and steps by their place in the file, outputs by their
``output_ref``), then the final answer, and the seal last.

Every change is addressed by the JSON Pointer it has in the JSON document spelling of the
trace (``/steps/3/output/route``), whichever spelling (JSON or JSON Lines) either file has, and
carries the two recorded values side by side. The records are read as two streams in step
with each other, so a pair of large JSON Lines traces is compared holding a few records at a
time; a page of changes (``offset``, ``limit``) stops reading once it is full and knows
whether more follow.

The seal is listed last and never alone: a different seal follows from a difference listed
before it, and when nothing else differs the comparison says so (the sealed content is the
same; one seal was made with another key or does not verify).

Pure: no Django, no I/O beyond the two traces' record streams.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats.jsonstrict import loads_strict
from core.formats.native.trace import NativeTrace, Record
from core.replay.diff import MISSING, iter_diff, pointer_escape

#: the record lists of the JSON document; everything else in it is the header
RECORD_KEYS = ("events", "steps", "outputs")
FINAL_ANSWER = "final_answer"
SEAL = "seal"
DEFAULT_LIMIT = 200

HEADER = "header"
EVENT = "event"
STEP = "step"
OUTPUT = "output"

SEAL_ALONE = (
    "Only the seal differs: everything the seal covers is the same in both files, so one "
    "seal was made with another key, or one file's seal does not verify."
)


@dataclass(frozen=True)
class Change:
    """One value that differs: its JSON Pointer, ``added``/``removed``/``changed``, and the
    value each file records (:data:`core.replay.diff.MISSING` for the side that has none)."""

    path: str
    kind: str
    before: Any
    after: Any


@dataclass
class Section:
    """The changes of one record (a step, an event, an output) or of one part of the header,
    under its JSON Pointer (``/steps/3``) and a title in words."""

    kind: str  # HEADER | EVENT | STEP | OUTPUT | FINAL_ANSWER | SEAL
    path: str
    title: str
    changes: list[Change] = field(default_factory=list)


@dataclass
class Comparison:
    """A page of the changes between two native traces, in reading order: the header, the
    records' changes from ``offset`` (at most ``limit`` of them), the final answer, the seal.
    ``more``: record changes follow this page; ``seal_alone``: the seal is all that differs."""

    sections: list[Section]
    offset: int
    limit: int
    shown: int
    more: bool
    seal_alone: bool = False
    #: a record that could not be read (a budget, a malformed line): the page stops there
    stopped: ReplayError | None = None

    @property
    def changes(self) -> list[Change]:
        return [c for s in self.sections for c in s.changes]

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.shown if self.more else None


def _change(prefix: str, entry: Any) -> Change:
    kind = (
        "added" if entry.before is MISSING else "removed" if entry.after is MISSING else "changed"
    )
    return Change(prefix + entry.path, kind, entry.before, entry.after)


def diff_values(prefix: str, a: Any, b: Any) -> Iterator[Change]:
    """The changes that turn ``a`` into ``b``, each pointer under ``prefix``."""
    for entry in iter_diff(a, b):
        yield _change(prefix, entry)


def header_of(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in RECORD_KEYS}


def _record_title(kind: str, index: int | str, body: dict[str, Any]) -> str:
    if kind == EVENT:
        return f"event {index} (seq {body.get('seq')}, {body.get('type', '')})"
    if kind == STEP:
        call = body.get("fn") or body.get("name") or ""
        return f"step {index} (seq {body.get('seq')}, {body.get('step_id', '')}, {call})"
    return f"output {index}"


_LIST = {EVENT: "events", STEP: "steps"}

Pair = tuple[str, int | str, dict[str, Any] | None, dict[str, Any] | None]


class _Pairing:
    """Pairs the records of two streams read in step: events and steps by their place among
    their kind, outputs by their ref. Only the records one stream is ahead by are held."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[deque[dict[str, Any]], deque[dict[str, Any]]]] = {
            EVENT: (deque(), deque()),
            STEP: (deque(), deque()),
        }
        self.counted = {EVENT: 0, STEP: 0}  # pairs made so far, per kind
        self.outputs: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] = ({}, {})

    def in_step(self, kind: str) -> bool:
        """Neither stream is ahead in this kind: a record both have at this place pairs."""
        return kind == OUTPUT or not (self.waiting[kind][0] or self.waiting[kind][1])

    def skip(self, kind: str) -> None:
        """Both streams hold the same record here (byte for byte): a pair without changes."""
        if kind != OUTPUT:
            self.counted[kind] += 1

    def add(self, side: int, kind: str, body: dict[str, Any], ref: str = "") -> Pair | None:
        if kind == OUTPUT:
            other = self.outputs[1 - side].pop(ref, None)
            if other is None:
                self.outputs[side][ref] = body
                return None
            return (OUTPUT, ref, body, other) if side == 0 else (OUTPUT, ref, other, body)
        queues = self.waiting[kind]
        queues[side].append(body)
        if not (queues[0] and queues[1]):
            return None
        index = self.counted[kind]
        self.counted[kind] += 1
        return kind, index, queues[0].popleft(), queues[1].popleft()

    def rest(self) -> Iterator[Pair]:
        """What only one stream has, once both are read."""
        for kind, (left, right) in self.waiting.items():
            for i, body in enumerate(left):
                yield kind, self.counted[kind] + i, body, None
            for i, body in enumerate(right):
                yield kind, self.counted[kind] + i, None, body
        for ref in sorted(self.outputs[0]):
            yield OUTPUT, ref, self.outputs[0][ref], None
        for ref in sorted(self.outputs[1]):
            yield OUTPUT, ref, None, self.outputs[1][ref]


def _pairs(a: Iterable[Record], b: Iterable[Record]) -> Iterator[Pair]:
    """(kind, index or output_ref, record of a, record of b), reading both streams in step."""
    streams = (iter(a), iter(b))
    pairing = _Pairing()
    live = [True, True]
    while live[0] or live[1]:
        for side in (0, 1):
            if not live[side]:
                continue
            record = next(streams[side], None)
            if record is None:
                live[side] = False
                continue
            pair = pairing.add(side, record.kind, record.body, record.ref)
            if pair is not None:
                yield pair
    yield from pairing.rest()


_QUICK_KINDS = tuple((b'{"record":"' + k.encode() + b'"', k) for k in (EVENT, STEP, OUTPUT))


def _quick_kind(line: bytes) -> str | None:
    """A JSON Lines record's kind when its first key says it (as the writer puts it)."""
    for prefix, kind in _QUICK_KINDS:
        if line.startswith(prefix):
            return kind
    return None


def _parsed(line: bytes, lineno: int) -> tuple[str, dict[str, Any], str]:
    where = f"line {lineno}"
    obj = loads_strict(line, where=where)
    if not isinstance(obj, dict) or obj.get("record") not in (EVENT, STEP, OUTPUT):
        raise ReplayError(MALFORMED_TRACE, f"{where}: not an event, step or output record")
    kind = obj.pop("record")
    ref = ""
    if kind == OUTPUT:
        ref = obj.pop("output_ref", None)
        if not isinstance(ref, str):
            raise ReplayError(MALFORMED_TRACE, f"{where}.output_ref: expected a string")
    return kind, obj, ref


def _line_pairs(a: Iterable[tuple[int, bytes]], b: Iterable[tuple[int, bytes]]) -> Iterator[Pair]:
    """As :func:`_pairs`, over two JSON Lines traces' raw record lines: a line both files
    hold byte for byte at the same place is the same record and is not parsed (the common
    case of two runs of one job); only lines that differ are."""
    streams = (iter(a), iter(b))
    pairing = _Pairing()
    while True:
        la, lb = next(streams[0], None), next(streams[1], None)
        if la is None and lb is None:
            break
        if la is not None and lb is not None and la[1] == lb[1]:
            kind = _quick_kind(la[1])
            if kind is not None and pairing.in_step(kind):
                pairing.skip(kind)
                continue
        for side, item in ((0, la), (1, lb)):
            if item is None:
                continue
            kind, body, ref = _parsed(item[1], item[0])
            pair = pairing.add(side, kind, body, ref)
            if pair is not None:
                yield pair
    yield from pairing.rest()


def record_changes(pairs: Iterable[Pair]) -> Iterator[tuple[Section, Change]]:
    """Every change between two record streams' pairs of records, with its section."""
    for kind, index, left, right in pairs:
        prefix = (
            f"/outputs/{pointer_escape(str(index))}"
            if kind == OUTPUT
            else f"/{_LIST[kind]}/{index}"
        )
        shown = left if left is not None else right
        assert shown is not None
        section = Section(kind, prefix, _record_title(kind, index, shown))
        if left is None or right is None:
            yield (
                section,
                Change(
                    prefix,
                    "added" if left is None else "removed",
                    MISSING if left is None else left,
                    MISSING if right is None else right,
                ),
            )
            continue
        for change in diff_values(prefix, left, right):
            yield section, change


def compare_records(
    header_a: dict[str, Any],
    header_b: dict[str, Any],
    records_a: Iterable[Record],
    records_b: Iterable[Record],
    *,
    pairs: Iterable[Pair] | None = None,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
) -> Comparison:
    """The page of changes between two traces given as headers and record streams (or the
    pairs of their records, already made)."""
    head = Section(HEADER, "", "header")
    final = Section(FINAL_ANSWER, "/final_answer", "final answer")
    seal = Section(SEAL, "/seal", "seal")
    for change in diff_values("", header_of(header_a), header_of(header_b)):
        top = change.path.split("/")[1] if change.path else ""
        {FINAL_ANSWER: final, SEAL: seal}.get(top, head).changes.append(change)
    sections: list[Section] = [head] if head.changes else []
    seen = shown = 0
    more = False
    current: Section | None = None
    stopped = None
    try:
        made = pairs if pairs is not None else _pairs(records_a, records_b)
        for section, change in record_changes(made):
            seen += 1
            if seen <= offset:
                continue
            if shown == limit:
                more = True
                break
            if current is None or current.path != section.path:
                current = section
                sections.append(section)
            current.changes.append(change)
            shown += 1
    except ReplayError as exc:
        stopped = exc
    if final.changes:
        sections.append(final)
    if seal.changes:
        sections.append(seal)
    alone = bool(seal.changes) and len(sections) == 1 and offset == 0 and stopped is None
    return Comparison(sections, offset, limit, shown, more, seal_alone=alone, stopped=stopped)


def compare(
    a: NativeTrace, b: NativeTrace, *, offset: int = 0, limit: int = DEFAULT_LIMIT
) -> Comparison:
    """Two opened native traces (:func:`core.formats.native.open_native`), compared; reads
    each one's records once, as far as the page needs. Two JSON Lines traces are read line by
    line, parsing only the lines that differ."""
    lines_a, lines_b = a.raw_lines(), b.raw_lines()
    pairs = _line_pairs(lines_a, lines_b) if lines_a is not None and lines_b is not None else None
    return compare_records(
        a.header,
        b.header,
        () if pairs is not None else a.records(),
        () if pairs is not None else b.records(),
        pairs=pairs,
        offset=offset,
        limit=limit,
    )
