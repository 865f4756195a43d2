"""What the OpenTelemetry tests share: reading a sealed record, and messages as the fake
OpenAI server saw them and as a record holds them, in one comparable shape."""

from __future__ import annotations

import json
from pathlib import Path

from otel.models import OtelTrace
from replay.models import Trace
from replay.storage import blob_open

FIXTURES = Path(__file__).parent / "fixtures"


def only_trace_id() -> str:
    (trace_id,) = OtelTrace.objects.values_list("trace_id", flat=True)
    return trace_id


def record_of(trace: Trace) -> dict:
    with blob_open(trace.blob.storage_name) as fh:
        return json.loads(fh.read())


def seen_messages(name: str) -> list[list[dict]]:
    """What the fake OpenAI server received: each call's messages."""
    return [req["body"]["messages"] for req in json.loads((FIXTURES / name).read_text())]


def _value(text):
    """A JSON string as the value it spells (arguments, tool results), else itself."""
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def seen_parts(message: dict) -> tuple:
    """An OpenAI chat message as the fake server received it, as (role, parts)."""
    if message["role"] == "tool":
        return (
            "tool",
            [("tool_call_response", message["tool_call_id"], _value(message["content"]))],
        )
    parts = [("text", message["content"])] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call["function"]
        parts.append(("tool_call", call["id"], function["name"], _value(function["arguments"])))
    return (message["role"], parts)


def as_parts(message: dict) -> tuple:
    """A record's message (the GenAI conventions' shape) as (role, parts); empty text parts
    (OpenLLMetry's before a streamed tool call) say nothing."""
    parts = []
    for part in message["parts"]:
        if part["type"] == "text" and part.get("content"):
            parts.append(("text", part["content"]))
        elif part["type"] == "tool_call":
            parts.append(("tool_call", part["id"], part["name"], _value(part["arguments"])))
        elif part["type"] == "tool_call_response":
            parts.append(("tool_call_response", part["id"], _value(part["response"])))
    return (message["role"], parts)
