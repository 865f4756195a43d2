"""What an OTel trace's page shows, computed from its record: the span waterfall (the tree in
start order, each span's bar placed on the trace's time axis) and the conversation (each model
call's new messages and answer, each tool execution's arguments and result beside it, in time
order). Geometry and text only: the format's template draws them (``templates/page.html``).

Pure: no Django.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from core.canonical import jcs
from core.formats.otel import record as rec
from core.formats.otel.audit import message_key
from core.replay.recordview import ViewRecord

#: the waterfall's rows at most (a larger trace's page says how many it leaves out)
MAX_ROWS = 2000
#: the width the bars are placed on (the SVG's viewBox)
AXIS = 1000
#: the smallest bar, so an instant span still shows
MIN_WIDTH = 2.0


def _tree_order(spans: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(index, depth) of every span, depth first from the roots, children by start time; a
    span whose parent is missing, or that sits in a cycle, is listed at depth 0 after."""
    children: dict[str | None, list[int]] = {}
    ids = {s["span_id"] for s in spans}
    for i, span in enumerate(spans):
        parent = span["parent_span_id"]
        children.setdefault(parent if parent in ids else None, []).append(i)
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    stack = [(i, 0) for i in reversed(children.get(None, []))]
    while stack:
        i, depth = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        out.append((i, depth))
        for child in reversed(children.get(spans[i]["span_id"], [])):
            stack.append((child, depth + 1))
    out.extend((i, 0) for i in range(len(spans)) if i not in seen)
    return out


def _ms(nanos: int) -> str:
    ms = nanos / 1e6
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2f} ms"


def _kind(span: Mapping[str, Any]) -> str:
    if rec.is_model_call(span):
        return "model"
    if rec.is_tool_call(span):
        return "tool"
    if rec.is_agent(span):
        return "agent"
    return "other"


def _bars(spans: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Every span in tree order: its index, its depth and its row's facts (what it is, its
    bar: ``x`` and ``width`` on an axis of :data:`AXIS`, when it starts and how long it
    takes). Names of operations, models and services only: no message or attribute."""
    if not spans:
        return
    starts = [int(s["start_time_unix_nano"]) for s in spans]
    ends = [int(s["end_time_unix_nano"]) for s in spans]
    t0, t1 = min(starts), max(ends)
    scale = AXIS / max(t1 - t0, 1)
    for i, depth in _tree_order(spans):
        span = spans[i]
        start, end = starts[i], ends[i]
        x = (start - t0) * scale
        width = max((end - start) * scale, MIN_WIDTH)
        yield (
            i,
            depth,
            {
                "index": i,
                "kind": _kind(span),
                "operation": span["operation"] or "",
                "model": span["response_model"] or span["request_model"] or "",
                "service": span["service"] or "",
                "status": span["status"]["code"],
                "x": round(min(x, AXIS - MIN_WIDTH), 2),
                "width": round(min(width, AXIS - x) if x < AXIS else MIN_WIDTH, 2),
                "duration": _ms(end - start),
                "offset": _ms(start - t0),
            },
        )


def duration(spans: Sequence[Mapping[str, Any]]) -> str:
    """The trace's time from its first span's start to its last span's end, in words."""
    if not spans:
        return "0 ms"
    t0 = min(int(s["start_time_unix_nano"]) for s in spans)
    t1 = max(int(s["end_time_unix_nano"]) for s in spans)
    return _ms(t1 - t0)


def waterfall(spans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The rows of the waterfall (at most :data:`MAX_ROWS`): each span's depth, name, what it
    is, its bar and its duration (an open trace's page, drawn before any index)."""
    rows = []
    for _i, depth, facts in itertools.islice(_bars(spans), MAX_ROWS):
        rows.append(
            {
                **facts,
                "depth": min(depth, 12),
                "indent": "\u2003" * min(depth, 12),
                "name": spans[facts["index"]]["name"],
            }
        )
    return {"rows": rows, "total": len(spans), "shown": len(rows), "duration": duration(spans)}


def span_extents(record: rec.Record) -> list[tuple[int, int]] | None:
    """Where each span's bytes lie in the file the record was read from, when that file is
    its canonical form (a sealed record as stored: RFC 8785, so each span is exactly its
    own JCS bytes, one after the other in ``"spans":[...]``); None for any other file (an
    OTLP export sealed when read) or when a span is not where its bytes say."""
    data = record.data
    if data is None or record.source != "record" or not record.spans:
        return None
    opening = b'"spans":['
    offset = data.find(opening)
    if offset < 0:
        return None
    offset += len(opening)
    extents = []
    for span in record.spans:
        body = jcs(span)
        if data[offset : offset + len(body)] != body:
            return None
        extents.append((offset, len(body)))
        offset += len(body) + 1  # the comma after it, or the closing bracket
    return extents if data[offset - 1 : offset] == b"]" else None


def records(record: rec.Record) -> Iterator[ViewRecord]:
    """The trace as records (the page's one view of every format): each span in the
    waterfall's tree order, its value the span's record, its parent the position of its
    parent span (None for a root or a span whose parent never arrived), its summary the
    waterfall row's facts, its extent where its bytes lie in a canonical record."""
    spans = record.spans
    extents = span_extents(record)
    position: dict[int, int] = {}
    for n, (i, depth, facts) in enumerate(_bars(spans)):
        position[i] = n
        span = spans[i]
        parent = None
        at = record.index_of(span["parent_span_id"]) if depth else None
        if at is not None:
            parent = position.get(at)
        yield ViewRecord(
            kind="span",
            label=str(span["name"]),
            location=f"/spans/{i}",
            value=span,
            parent=parent,
            summary=facts,
            extent=extents[i] if extents is not None else None,
        )


def _shown(value: Any) -> str:
    """A JSON value as the page prints it: a string as itself, anything else indented."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _parts(message: Mapping[str, Any]) -> list[dict[str, str]]:
    shown = []
    for part in message.get("parts") or []:
        kind = part.get("type", "")
        if kind == "text":
            if part.get("content"):
                shown.append({"type": "text", "text": str(part["content"])})
        elif kind == "tool_call":
            shown.append(
                {
                    "type": "tool_call",
                    "name": str(part.get("name") or ""),
                    "id": str(part.get("id") or ""),
                    "text": _shown(part.get("arguments")),
                }
            )
        elif kind == "tool_call_response":
            shown.append(
                {
                    "type": "tool_call_response",
                    "id": str(part.get("id") or ""),
                    "text": _shown(part.get("response")),
                }
            )
        else:
            shown.append({"type": kind or "part", "text": _shown(part)})
    return shown


def _messages(messages: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [
        {
            "role": str(m.get("role", "")),
            "finish_reason": str(m.get("finish_reason") or ""),
            "parts": _parts(m),
        }
        for m in messages or []
    ]


def conversation(spans: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The model calls and tool executions in time order. A call shows the messages it
    received that the call before it did not already show (the whole input for the first),
    and its answer; a tool execution its arguments and result."""
    items: list[dict[str, Any]] = []
    before: list[bytes] = []
    for i, span in enumerate(spans):
        if rec.is_model_call(span):
            received = span["input_messages"] or []
            keys = [message_key(m) for m in received]
            same = 0
            while same < len(before) and same < len(keys) and keys[same] == before[same]:
                same += 1
            items.append(
                {
                    "type": "call",
                    "index": i,
                    "name": span["name"],
                    "model": span["response_model"] or span["request_model"] or "",
                    "provider": span["provider"] or "",
                    "usage": span["usage"] or {},
                    "earlier": same,
                    "received": _messages(received[same:]),
                    "answered": _messages(span["output_messages"]),
                    "content": rec.has_content(span),
                }
            )
            before = [*keys, *(message_key(m) for m in span["output_messages"] or [])]
        elif rec.is_tool_call(span):
            tool = span["tool"] or {}
            items.append(
                {
                    "type": "tool",
                    "index": i,
                    "name": str(tool.get("name") or span["name"]),
                    "id": str(tool.get("call_id") or ""),
                    "arguments": _shown(tool.get("arguments"))
                    if tool.get("arguments") is not None
                    else "",
                    "result": _shown(tool.get("result")) if tool.get("result") is not None else "",
                    "status": span["status"]["code"],
                }
            )
    return items


def page(record: rec.Record) -> dict[str, Any]:
    """What the format's page section shows besides the window of spans the page's index
    gives (:func:`records`, drawn as the waterfall): the conversation, whether content was
    captured, the trace's duration."""
    return {
        "conversation": conversation(record.spans),
        "content": record.content,
        "axis": AXIS,
        "duration": duration(record.spans),
    }
