"""A ContextOS trace as the trace page's records (:mod:`core.replay.recordview`).

In the order of the trace's chain (seed 004: the invoke, each tool call and its result, the
DecisionRecord), which is the file's order: each top-level field (kind ``field``); the
``invoke`` (kind ``invoke``); then each tool envelope, its call and its result together (kind
``tool envelope``, labelled with the capability called and the ``call_id``); the
``decision_record`` (kind ``decision record``, its status in its row's summary) followed by
each of its fields (kind ``field``, its children: what replay diffs field by field).

No record holds ``tool_envelopes`` whole: a trace of millions of envelopes is spooled to disk
as it is read and each envelope is read back from there one at a time, so the envelopes are
records of their own at the top. Locations are JSON pointers into the trace; a row's summary
holds types, counts, the capability, the call's and the result's kinds and the record's
status, never arguments or outputs.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterator

from core.formats.contextos.reader import ContextosTrace
from core.replay.diff import pointer_join
from core.replay.recordview import ViewRecord, shape
from core.replay.recordview import short as _short

#: the top-level fields that are entries of the chain: field -> kind
KINDS = {"invoke": "invoke", "decision_record": "decision record"}


def records(trace: ContextosTrace) -> Iterator[ViewRecord]:
    """The trace's records in chain order (see the module): its tool envelopes follow its
    ``invoke`` (ContextOS writes them there; the parsed head keeps no other place)."""
    at = 0
    envelopes_done = False
    for key, value in trace.head.items():
        parent = at
        kind = KINDS.get(key, "field")
        summary = shape(value)
        if kind == "decision record" and isinstance(value, dict):
            status = value.get("status")
            if isinstance(status, str):
                summary["status"] = _short(status)
        yield ViewRecord(kind, _short(key), pointer_join([key]), value, None, summary)
        at += 1
        if key == "decision_record" and isinstance(value, dict):
            for name, item in value.items():
                location = pointer_join([key, name])
                yield ViewRecord("field", _short(name), location, item, parent, shape(item))
                at += 1
        elif key == "invoke":
            envelopes_done = True
            for envelope in _envelopes(trace):
                yield envelope
                at += 1
    if not envelopes_done:
        yield from _envelopes(trace)


def _envelopes(trace: ContextosTrace) -> Iterator[ViewRecord]:
    for i, envelope in enumerate(trace.envelopes):
        call, result = envelope.get("call"), envelope.get("result")
        call = call if isinstance(call, dict) else {}
        result = result if isinstance(result, dict) else {}
        capability, call_id = call.get("capability"), call.get("call_id")
        summary = shape(envelope)
        for name, value in (
            ("capability", capability),
            ("call", call.get("kind")),
            ("result", result.get("kind")),
        ):
            if isinstance(value, str):
                summary[name] = _short(value)
        named = [v for v in (capability, call_id) if isinstance(v, str) and v]
        label = " ".join(named) or f"tool envelope {i}"
        location = pointer_join(["tool_envelopes", i])
        yield ViewRecord("tool envelope", _short(label), location, envelope, None, summary)
