"""A Paxman artifact as the trace page's records (:mod:`core.replay.recordview`).

In file order, each top-level field of the artifact (kind ``field``), followed by the entries
of the lists an auditor walks through, each a child of its field: the field results (one per
``field_results`` path, labelled with the path and its status), the evidence items and the
diagnostics, and the execution plan's field plans and its own diagnostics. Locations are JSON
pointers into the artifact; a row's summary holds types, counts, statuses, severities and
codes, never a value a field resolved to.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from core.formats.paxman.artifact import Artifact
from core.replay.diff import pointer_join
from core.replay.recordview import ViewRecord, shape
from core.replay.recordview import short as _short

#: the top-level lists and objects whose entries are records of their own: field -> kind
ENTRIES = {
    "field_results": "field result",
    "evidence": "evidence item",
    "diagnostics": "diagnostic",
}
#: the execution plan's lists whose entries are records (children of ``execution_plan``)
PLAN_ENTRIES = {"field_plans": "field plan", "diagnostics": "diagnostic"}
#: what names an evidence item, the first one that is a string
EVIDENCE_NAMES = ("evidence_id", "id", "field_path", "capability")


def records(artifact: Artifact) -> Iterator[ViewRecord]:
    """The artifact's fields in file order, each followed by its entries (see the module)."""
    at = 0
    for key, value in artifact.document.items():
        parent = at
        yield ViewRecord("field", _short(key), pointer_join([key]), value, None, shape(value))
        at += 1
        for kind, label, tokens, item, summary in _entries(key, value):
            location = pointer_join([key, *tokens])
            yield ViewRecord(kind, label, location, item, parent, summary)
            at += 1


def _entries(key: str, value: Any) -> Iterator[tuple[str, str, list[Any], Any, dict[str, Any]]]:
    """(kind, label, pointer tokens below the field, value, summary) of a field's entries."""
    if key == "execution_plan" and isinstance(value, dict):
        for name, planned in PLAN_ENTRIES.items():
            yield from _listed(planned, value.get(name), [name])
        return
    kind = ENTRIES.get(key)
    if kind is not None:
        yield from _listed(kind, value, [])


def _listed(
    kind: str, value: Any, base: list[Any]
) -> Iterator[tuple[str, str, list[Any], Any, dict[str, Any]]]:
    """Each entry of an object (by its key) or of an array (by its index)."""
    pairs: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, dict):
        pairs = value.items()
    elif isinstance(value, list):
        pairs = enumerate(value)
    for at, item in pairs:
        yield kind, _label(kind, at, item), [*base, at], item, _summary(kind, item)


def _label(kind: str, at: str | int, item: Any) -> str:
    """A field result by its path (and status), a field plan by its field id, a diagnostic
    by its code (and the field it concerns), an evidence item by its id."""
    get = item.get if isinstance(item, dict) else {}.get
    if kind == "field result":
        status = get("status")
        label = f"{at} ({status})" if isinstance(status, str) else str(at)
    elif kind == "field plan":
        label = _first_string(get, ("field_id",)) or f"field plan {at}"
    elif kind == "diagnostic":
        code = _first_string(get, ("code",)) or f"diagnostic {at}"
        context = get("context")
        path = context.get("field_path") if isinstance(context, dict) else None
        label = f"{code} {path}" if isinstance(path, str) else code
    else:
        label = _first_string(get, EVIDENCE_NAMES) or f"{kind} {at}"
    return _short(label)


def _summary(kind: str, item: Any) -> dict[str, Any]:
    """Statuses, severities and codes of an entry; its type and size otherwise."""
    facts = shape(item)
    if isinstance(item, dict):
        for name in ("status", "confidence", "severity", "code"):
            if isinstance(item.get(name), str):
                facts[name] = _short(item[name])
        for name in ("candidates", "evidence_refs", "capability_chain"):
            if isinstance(item.get(name), list):
                facts[name] = len(item[name])
    return facts


def _first_string(get: Any, names: tuple[str, ...]) -> str:
    for name in names:
        value = get(name)
        if isinstance(value, str) and value:
            return value
    return ""
