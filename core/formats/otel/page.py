"""What an OTel trace's page shows, computed from its record: the span waterfall (the tree in
start order, each span's bar placed on the trace's time axis) and the conversation (each model
call's new messages and answer, each tool execution's arguments and result beside it, in time
order). Geometry and text only: the format's template draws them (``templates/page.html``).

Pure: no Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.formats.otel import record as rec
from core.formats.otel.audit import message_key

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


def waterfall(spans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The rows of the waterfall: each span's depth, name, what it is, its bar (``x`` and
    ``width`` on an axis of :data:`AXIS`) and its duration."""
    if not spans:
        return {"rows": [], "total": 0, "shown": 0, "duration": "0 ms"}
    starts = [int(s["start_time_unix_nano"]) for s in spans]
    ends = [int(s["end_time_unix_nano"]) for s in spans]
    t0, t1 = min(starts), max(ends)
    scale = AXIS / max(t1 - t0, 1)
    rows = []
    for i, depth in _tree_order(spans)[:MAX_ROWS]:
        span = spans[i]
        start, end = starts[i], ends[i]
        x = (start - t0) * scale
        width = max((end - start) * scale, MIN_WIDTH)
        rows.append(
            {
                "index": i,
                "depth": min(depth, 12),
                "indent": "\u2003" * min(depth, 12),
                "name": span["name"],
                "kind": _kind(span),
                "operation": span["operation"] or "",
                "model": span["response_model"] or span["request_model"] or "",
                "service": span["service"] or "",
                "status": span["status"]["code"],
                "x": round(min(x, AXIS - MIN_WIDTH), 2),
                "width": round(min(width, AXIS - x) if x < AXIS else MIN_WIDTH, 2),
                "duration": _ms(end - start),
                "offset": _ms(start - t0),
            }
        )
    return {"rows": rows, "total": len(spans), "shown": len(rows), "duration": _ms(t1 - t0)}


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
    """Everything the format's page section shows."""
    return {
        "waterfall": waterfall(record.spans),
        "conversation": conversation(record.spans),
        "content": record.content,
        "axis": AXIS,
    }
