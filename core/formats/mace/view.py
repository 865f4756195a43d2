"""A MACE reflective log as the trace page's records (:mod:`core.replay.recordview`).

A log is one ReflectiveLogEntry: in file order, each of its fields (kind ``field``), the
entries of its lists following their field, each a child of it: the iterations of
``iteration_trace`` (labelled with their ``iteration_id``), the events of ``event_refs``
(their ``sequence_index`` and ``event_type``), the agent outputs, the council votes, the
claims, the evidence items, the memory reads and writes and the errors. Locations are JSON
pointers into the log; a row's summary holds types, counts, ids, hashes and a vote's approval,
never a percept, an output's text or a memory key.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.formats.mace.reader import Log
from core.replay.diff import pointer_join
from core.replay.recordview import ViewRecord, shape
from core.replay.recordview import short as _short

#: the log's lists whose entries are records of their own: field -> kind
ENTRIES = {
    "iteration_trace": "iteration",
    "event_refs": "event",
    "agent_outputs": "agent output",
    "council_votes": "vote",
    "claims": "claim",
    "evidence_items": "evidence item",
    "memory_reads": "memory read",
    "memory_writes": "memory write",
    "errors": "error",
}
#: what names an entry of each kind, the first of them that is a string (else its index)
NAMES = {
    "iteration": ("iteration_id",),
    "agent output": ("agent_output_id", "agent_id"),
    "vote": ("agent_id", "vote_id"),
    "claim": ("claim_id", "id"),
    "evidence item": ("evidence_id", "id"),
}
#: the facts of an entry its row keeps (ids, hashes, types, an approval), by kind
FACTS = {
    "iteration": ("iteration_id", "agent_output_id"),
    "event": ("sequence_index", "event_type", "event_id"),
    "agent output": ("agent_output_id", "agent_id"),
    "vote": ("vote_id", "agent_id", "approve"),
}


def records(log: Log) -> Iterator[ViewRecord]:
    """The log's fields in file order, each followed by its entries (see the module)."""
    at = 0
    for key, value in log.document.items():
        parent = at
        yield ViewRecord("field", _short(key), pointer_join([key]), value, None, shape(value))
        at += 1
        kind = ENTRIES.get(key)
        if kind is None or not isinstance(value, list):
            continue
        for i, item in enumerate(value):
            location = pointer_join([key, i])
            yield ViewRecord(
                kind, _label(kind, i, item), location, item, parent, _summary(kind, item)
            )
            at += 1


def _label(kind: str, i: int, item: Any) -> str:
    get = item.get if isinstance(item, dict) else {}.get
    if kind == "event":
        index, name = get("sequence_index"), get("event_type")
        if type(index) is int and isinstance(name, str):
            return _short(f"{index} {name}")
    for name in NAMES.get(kind, ()):
        value = get(name)
        if isinstance(value, str) and value:
            return _short(value)
    return f"{kind} {i}"


def _summary(kind: str, item: Any) -> dict[str, Any]:
    facts = shape(item)
    if isinstance(item, dict):
        for name in FACTS.get(kind, ()):
            value = item.get(name)
            if isinstance(value, bool | int) or (isinstance(value, str) and value):
                facts[name] = _short(value) if isinstance(value, str) else value
    return facts
