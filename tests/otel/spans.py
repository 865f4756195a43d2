"""Hand-written span records (the shape ``mapping.span_record`` gives) and one agent run made
of them: what the record, audit and adapter tests build their records from."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from core.canonical import jcs
from core.formats.otel import record as rec

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SEALED_AT = "2025-06-01T12:00:00.000Z"
#: 2025-06-01T10:00:00Z in nanoseconds
T0 = 1_748_772_000_000_000_000
MS = 1_000_000


def span(
    span_id: str,
    name: str,
    *,
    parent: str | None = None,
    start: int = 0,
    end: int = 100,
    **fields: Any,
) -> dict[str, Any]:
    """A span record; ``start``/``end`` in milliseconds after :data:`T0`."""
    record: dict[str, Any] = {
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "kind": "internal",
        "start_time_unix_nano": str(T0 + start * MS),
        "end_time_unix_nano": str(T0 + end * MS),
        "status": {"code": "unset", "message": ""},
        "service": "weather-service",
        "scope": {
            "name": "opentelemetry.instrumentation.openai_v2",
            "version": "2.4b0",
            "attributes": [],
        },
        "schema_url": "",
        "trace_state": "",
        "flags": 256,
        "dialect": "gen_ai",
        "operation": None,
        "provider": None,
        "request_model": None,
        "response_model": None,
        "response_id": None,
        "request_parameters": {},
        "conversation_id": None,
        "agent_name": None,
        "input_messages": None,
        "output_messages": None,
        "system_instructions": None,
        "tool_definitions": None,
        "tool": None,
        "usage": None,
        "finish_reasons": None,
        "attributes": [],
        "events": [],
        "links": [],
        "dropped": {"attributes": 0, "events": 0, "links": 0},
        "resource_attributes": [
            {"key": "service.name", "value": {"stringValue": "weather-service"}}
        ],
    }
    for key, value in fields.items():
        assert key in record, key
        record[key] = value
    return record


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def usage(i: int | None, o: int | None, t: int | None = None) -> dict[str, Any]:
    total = t if t is not None else (None if i is None or o is None else i + o)
    return {"input_tokens": i, "output_tokens": o, "total_tokens": total}


CALL = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
RESULT = {"temperature": 22, "unit": "celsius"}
RESPONSE = {"type": "tool_call_response", "id": "call_1", "response": RESULT}


def agent_run(*, content: bool = True) -> list[dict[str, Any]]:
    """One agent run: invoke_agent > chat (asks for get_weather) > execute_tool > chat
    (answers), in a deliberately shuffled order (seal orders them)."""
    user = text("user", "What is the weather in Paris?")
    asked = {"role": "assistant", "parts": [CALL], "finish_reason": "tool_call"}
    answer = text("assistant", "It is 22 degrees in Paris.") | {"finish_reason": "stop"}
    model = {
        "operation": "chat",
        "provider": "openai",
        "request_model": "gpt-4o-mini",
        "response_model": "gpt-4o-mini-2024-07-18",
        "kind": "client",
        "request_parameters": {"temperature": 0},
    }
    spans = [
        span(
            "00000000000000c3",
            "chat gpt-4o-mini",
            parent="00000000000000a1",
            start=60,
            end=90,
            response_id="chatcmpl-2",
            input_messages=[
                user,
                {"role": "assistant", "parts": [CALL]},
                {"role": "tool", "parts": [RESPONSE]},
            ],
            output_messages=[answer],
            usage=usage(30, 8),
            finish_reasons=["stop"],
            **model,
        ),
        span(
            "00000000000000a1",
            "invoke_agent weather-agent",
            start=0,
            end=100,
            operation="invoke_agent",
            agent_name="weather-agent",
            usage=usage(50, 20),
        ),
        span(
            "00000000000000b2",
            "chat gpt-4o-mini",
            parent="00000000000000a1",
            start=5,
            end=40,
            response_id="chatcmpl-1",
            input_messages=[user],
            output_messages=[asked],
            usage=usage(20, 12),
            finish_reasons=["tool_calls"],
            **model,
        ),
        span(
            "00000000000000d4",
            "execute_tool get_weather",
            parent="00000000000000a1",
            start=45,
            end=55,
            operation="execute_tool",
            tool={
                "name": "get_weather",
                "call_id": "call_1",
                "arguments": {"city": "Paris"},
                "result": RESULT,
            },
        ),
    ]
    if not content:
        for s in spans:
            s["input_messages"] = s["output_messages"] = None
            if s["tool"]:
                s["tool"] = {
                    "name": "get_weather",
                    "call_id": "call_1",
                    "arguments": None,
                    "result": None,
                }
    return copy.deepcopy(spans)


def sealed(spans: list[dict[str, Any]] | None = None, **kwargs: Any) -> rec.Record:
    """The record of ``spans`` (default :func:`agent_run`), sealed and parsed back."""
    kwargs.setdefault("sealed_at", SEALED_AT)
    kwargs.setdefault("reason", "quiet")
    _doc, data, _digest = rec.seal(TRACE_ID, agent_run() if spans is None else spans, **kwargs)
    return rec.parse(data)


def resealed(document: dict[str, Any]) -> rec.Record:
    """A changed record sealed again (its digest recomputed): what a writer that changed the
    content before sealing would give, so the later checks see the change."""
    doc = copy.deepcopy(document)
    doc["seal"]["digest"] = rec.digest_of(doc)
    return rec.parse(jcs(doc))


# --- the real instrumentations' captured exports (tests/otel/fixtures, helper A's) ---------

FIXTURES = Path(__file__).with_name("fixtures")


def manifest() -> dict[str, Any]:
    return json.loads((FIXTURES / "manifest.json").read_text())


def fixture_sets() -> list[str]:
    return sorted(manifest()["sets"])


def fixture_spans(name: str, encoding: str = "proto") -> list[dict[str, Any]]:
    """The span records of a captured set's files of one encoding (``proto``: its ``.bin``
    bodies, ``json``: its ``.json`` ones), decoded and mapped, one per span id."""
    from core.formats.otel import mapping, otlp

    suffix, media = (".bin", otlp.PROTOBUF) if encoding == "proto" else (".json", otlp.JSON)
    records: dict[str, dict[str, Any]] = {}
    for filename in manifest()["sets"][name]["files"]:
        if filename.endswith(suffix):
            for plain in otlp.decode((FIXTURES / filename).read_bytes(), media).spans:
                record = mapping.span_record(plain)
                records.setdefault(record["span_id"], record)
    return list(records.values())


def fixture_record(name: str, encoding: str = "proto") -> rec.Record:
    """A captured set sealed (as the receiver seals it) and parsed back."""
    trace_id = manifest()["sets"][name]["trace_id"]
    _doc, data, _digest = rec.seal(
        trace_id, fixture_spans(name, encoding), sealed_at=SEALED_AT, reason="quiet"
    )
    return rec.parse(data)
