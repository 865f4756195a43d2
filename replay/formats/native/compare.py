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

from replay.diff import MISSING, iter_diff, pointer_escape
from replay.errors import ReplayError
from replay.formats.native.trace import NativeTrace, Record

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
    value each file records (:data:`replay.diff.MISSING` for the side that has none)."""

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


def _pairs(
    a: Iterable[Record], b: Iterable[Record]
) -> Iterator[tuple[str, int | str, dict[str, Any] | None, dict[str, Any] | None]]:
    """(kind, index or output_ref, record of a, record of b), reading both streams in step.

    Events and steps pair by their place among their kind; outputs by their ref (a ref only
    one file has pairs with None). Only records one stream is ahead by are held."""
    streams = (iter(a), iter(b))
    waiting: dict[str, tuple[deque[dict[str, Any]], deque[dict[str, Any]]]] = {
        EVENT: (deque(), deque()),
        STEP: (deque(), deque()),
    }
    counted = {EVENT: 0, STEP: 0}  # pairs yielded so far, per kind
    outputs: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] = ({}, {})
    live = [True, True]
    while live[0] or live[1]:
        for side in (0, 1):
            if not live[side]:
                continue
            record = next(streams[side], None)
            if record is None:
                live[side] = False
                continue
            if record.kind == OUTPUT:
                other = outputs[1 - side].pop(record.ref, None)
                if other is None:
                    outputs[side][record.ref] = record.body
                else:
                    pair = (record.body, other) if side == 0 else (other, record.body)
                    yield OUTPUT, record.ref, pair[0], pair[1]
                continue
            queues = waiting[record.kind]
            queues[side].append(record.body)
            if queues[0] and queues[1]:
                yield record.kind, counted[record.kind], queues[0].popleft(), queues[1].popleft()
                counted[record.kind] += 1
    for kind, (left, right) in waiting.items():
        index = counted[kind]
        for body in left:
            yield kind, index, body, None
            index += 1
        index = counted[kind]
        for body in right:
            yield kind, index, None, body
            index += 1
    for ref in sorted(outputs[0]):
        yield OUTPUT, ref, outputs[0][ref], None
    for ref in sorted(outputs[1]):
        yield OUTPUT, ref, None, outputs[1][ref]


def record_changes(a: Iterable[Record], b: Iterable[Record]) -> Iterator[tuple[Section, Change]]:
    """Every change between two record streams, record by record, with its section."""
    for kind, index, left, right in _pairs(a, b):
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
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
) -> Comparison:
    """The page of changes between two traces given as headers and record streams."""
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
        for section, change in record_changes(records_a, records_b):
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
    """Two opened native traces (:func:`replay.formats.native.open_native`), compared; reads
    each one's records once, as far as the page needs."""
    return compare_records(a.header, b.header, a.records(), b.records(), offset=offset, limit=limit)
