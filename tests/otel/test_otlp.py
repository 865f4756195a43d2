"""core.formats.otel.otlp: OTLP/HTTP trace export bodies, protobuf and JSON, into plain span
dicts; the refusals, each with its exact code and words; the limits; gzip; the response.

The real bodies under fixtures/ were captured from the SDK's own exporters (both encodings
of the same spans, tests/otel/clients); the rest are built here with the protobuf classes
and, for the JSON path, protobuf's own ``MessageToJson`` (ids turned to hex, as OTLP/JSON
spells them)."""

from __future__ import annotations

import base64
import gzip
import json
import math
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1 import common_pb2 as c
from opentelemetry.proto.resource.v1 import resource_pb2 as r
from opentelemetry.proto.trace.v1 import trace_pb2 as t

from core.canonical import jcs
from core.formats.otel import otlp
from core.formats.otel.otlp import Limits, OtlpError, Rejection

FIXTURES = Path(__file__).parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
PB = "application/x-protobuf"
JS = "application/json"

TRACE = bytes(range(1, 17))
SPAN = bytes(range(1, 9))
PARENT = bytes(range(9, 17))


# --- building requests ----------------------------------------------------------------------


def kv(key: str, **value: Any) -> c.KeyValue:
    return c.KeyValue(key=key, value=c.AnyValue(**value))


def request(*spans: t.Span, **resource_spans: Any) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            t.ResourceSpans(
                resource=r.Resource(attributes=[kv("service.name", string_value="svc")]),
                scope_spans=[t.ScopeSpans(scope=c.InstrumentationScope(name="s"), spans=spans)],
                **resource_spans,
            )
        ]
    )


def span(**fields: Any) -> t.Span:
    fields.setdefault("trace_id", TRACE)
    fields.setdefault("span_id", SPAN)
    fields.setdefault("name", "s")
    return t.Span(**fields)


def hex_ids(value: Any) -> Any:
    """protobuf's JSON (ids in base64) -> OTLP/JSON's (ids in hex)."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex()
            if k in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
            else hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [hex_ids(v) for v in value]
    return value


def as_json(message: ExportTraceServiceRequest, **options: Any) -> bytes:
    return json.dumps(hex_ids(MessageToDict(message, **options))).encode()


def both(message: ExportTraceServiceRequest, **limits: Any) -> otlp.Decoded:
    """Decode `message` as protobuf and as JSON; the two must be identical."""
    lim = Limits(**limits)
    from_pb = otlp.decode(message.SerializeToString(), PB, limits=lim)
    from_js = otlp.decode(as_json(message), JS, limits=lim)
    assert from_pb == from_js
    return from_pb


def refused(body: bytes, content_type: str, **limits: Any) -> OtlpError:
    with pytest.raises(OtlpError) as info:
        otlp.decode(body, content_type, limits=Limits(**limits))
    return info.value


def refused_both(message: ExportTraceServiceRequest, **limits: Any) -> tuple[str, str, str]:
    """Refuse `message` in both encodings, with one code; (code, pb message, json message)."""
    pb = refused(message.SerializeToString(), PB, **limits)
    js = refused(as_json(message), JS, **limits)
    assert pb.code == js.code
    return pb.code, pb.message, js.message


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def one_span_body(span_payload: bytes) -> bytes:
    """A request of one span whose wire bytes (its fields) are `span_payload`."""
    return field(1, field(2, field(2, span_payload)))


def kvlist_nest(depth: int) -> bytes:
    """An AnyValue of `depth` levels of kvlistValue, innermost a string (wire bytes)."""
    value = field(1, b"x")  # AnyValue.string_value
    for _ in range(depth - 1):
        value = field(6, field(1, field(1, b"k") + field(2, value)))  # kvlist{values[{k, v}]}
    return value


# --- the real captured bodies ------------------------------------------------------------------


def fixture_sets() -> list[tuple[str, dict[str, Any]]]:
    return sorted(MANIFEST["sets"].items())


@pytest.mark.parametrize(("name", "entry"), fixture_sets(), ids=[n for n, _ in fixture_sets()])
def test_captured_bodies_decode_to_the_spans_the_client_exported(name, entry):
    exports = [e for e in entry["exports"] if e["result"] == "SUCCESS"]
    decoded = []
    for file, export in zip(entry["files"], exports, strict=True):
        kind = JS if file.endswith(".json") else PB
        out = otlp.decode((FIXTURES / file).read_bytes(), kind)
        assert out.rejected == []
        # (the SDK groups a request's spans by scope: the manifest lists them as they ended)
        assert sorted(s["name"] for s in out.spans) == sorted(export["spans"])
        assert {s["trace_id"] for s in out.spans} == {entry["trace_id"]}
        jcs(out.spans)  # canonicalisable as the brief says
        decoded.append(out)
    if entry["options"].get("exporter") == "both":
        # one tracer provider exported the same spans through both exporters
        pb, js = decoded
        assert pb == js


def test_a_captured_body_in_full():
    out = otlp.decode((FIXTURES / "openai-v2-proto.bin").read_bytes(), PB)
    # two model calls (the instrumentation's scope), then the tool and the agent (the client's)
    assert [s["name"] for s in out.spans] == [
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool get_weather",
        "invoke_agent weather-agent",
    ]
    tool = out.spans[2]
    assert tool["kind"] == "SPAN_KIND_INTERNAL"
    assert tool["parent_span_id"] == out.spans[3]["span_id"]
    assert out.spans[3]["parent_span_id"] == ""
    assert tool["flags"] == 256
    assert tool["scope"] == {"name": "otel-test-client.agent", "version": "1.0.0", "attributes": []}
    assert tool["attributes"][-1] == {
        "key": "gen_ai.tool.call.result",
        "value": {"stringValue": '{"city": "Paris", "temperature_c": 18, "conditions": "sunny"}'},
    }
    chat = out.spans[0]
    assert chat["attributes"][4] == {
        "key": "gen_ai.request.max_tokens",
        "value": {"intValue": "200"},
    }
    assert chat["attributes"][3] == {
        "key": "gen_ai.request.temperature",
        "value": {"doubleValue": 0.2},
    }
    assert chat["attributes"][5] == {
        "key": "gen_ai.response.finish_reasons",
        "value": {"arrayValue": {"values": [{"stringValue": "tool_calls"}]}},
    }
    assert {"key": "service.name", "value": {"stringValue": "otel-test-client"}} in chat[
        "resource"
    ]["attributes"]
    assert chat["schema_url"] == "https://opentelemetry.io/schemas/1.37.0"
    assert tool["schema_url"] == ""
    assert int(chat["start_time_unix_nano"]) < int(chat["end_time_unix_nano"])


# --- one request, both encodings --------------------------------------------------------------


def rich_request() -> ExportTraceServiceRequest:
    values = [
        kv("s", string_value="ünïcode ✓"),
        kv("b", bool_value=True),
        kv("i", int_value=-(2**63)),
        kv("big", int_value=2**63 - 1),
        kv("d", double_value=0.1),
        kv("nan", double_value=math.nan),
        kv("inf", double_value=math.inf),
        kv("-inf", double_value=-math.inf),
        kv("zero", double_value=-0.0),
        kv("bytes", bytes_value=b"\x00\xff\xfe"),
        kv("empty"),
        kv(
            "array",
            array_value=c.ArrayValue(
                values=[c.AnyValue(int_value=1), c.AnyValue(), c.AnyValue(string_value="x")]
            ),
        ),
        kv("empty array", array_value=c.ArrayValue()),
        kv(
            "kvlist",
            kvlist_value=c.KeyValueList(
                values=[kv("k", kvlist_value=c.KeyValueList(values=[kv("kk", bool_value=False)]))]
            ),
        ),
    ]
    first = span(
        parent_span_id=PARENT,
        trace_state="vendor=1",
        flags=0x301,
        kind=t.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=2**64 - 2,
        end_time_unix_nano=2**64 - 1,
        attributes=values,
        dropped_attributes_count=3,
        events=[
            t.Span.Event(time_unix_nano=5, name="e", attributes=[kv("x", string_value="y")]),
            t.Span.Event(),
        ],
        dropped_events_count=4,
        links=[
            t.Span.Link(
                trace_id=bytes(range(2, 18)),
                span_id=bytes(range(2, 10)),
                trace_state="a=b",
                attributes=[kv("l", int_value=1)],
                dropped_attributes_count=1,
                flags=0x100,
            )
        ],
        dropped_links_count=5,
        status=t.Status(code=t.Status.STATUS_CODE_ERROR, message="boom"),
    )
    second = span(span_id=bytes(range(3, 11)), kind=t.Span.SPAN_KIND_CONSUMER)
    message = request(first, second, schema_url="https://rs")
    message.resource_spans[0].resource.dropped_attributes_count = 7
    message.resource_spans[0].scope_spans[0].scope.version = "9"
    message.resource_spans[0].scope_spans[0].scope.attributes.append(kv("sa", string_value="v"))
    other = t.ScopeSpans(
        scope=c.InstrumentationScope(name="other"),
        schema_url="https://ss",
        spans=[span(span_id=bytes(range(4, 12)))],
    )
    message.resource_spans[0].scope_spans.append(other)
    message.resource_spans.append(t.ResourceSpans(scope_spans=[t.ScopeSpans(spans=[span()])]))
    return message


def test_protobuf_and_json_give_identical_dicts():
    out = both(rich_request())
    assert [s["span_id"] for s in out.spans] == [
        SPAN.hex(),
        bytes(range(3, 11)).hex(),
        bytes(range(4, 12)).hex(),
        SPAN.hex(),
    ]
    first = out.spans[0]
    assert first == {
        "trace_id": TRACE.hex(),
        "span_id": SPAN.hex(),
        "parent_span_id": PARENT.hex(),
        "trace_state": "vendor=1",
        "flags": 0x301,
        "name": "s",
        "kind": "SPAN_KIND_CLIENT",
        "start_time_unix_nano": str(2**64 - 2),
        "end_time_unix_nano": str(2**64 - 1),
        "attributes": [
            {"key": "s", "value": {"stringValue": "ünïcode ✓"}},
            {"key": "b", "value": {"boolValue": True}},
            {"key": "i", "value": {"intValue": str(-(2**63))}},
            {"key": "big", "value": {"intValue": str(2**63 - 1)}},
            {"key": "d", "value": {"doubleValue": 0.1}},
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "inf", "value": {"doubleValue": "Infinity"}},
            {"key": "-inf", "value": {"doubleValue": "-Infinity"}},
            {"key": "zero", "value": {"doubleValue": -0.0}},
            {"key": "bytes", "value": {"bytesValue": "AP/+"}},
            {"key": "empty", "value": {}},
            {
                "key": "array",
                "value": {"arrayValue": {"values": [{"intValue": "1"}, {}, {"stringValue": "x"}]}},
            },
            {"key": "empty array", "value": {"arrayValue": {"values": []}}},
            {
                "key": "kvlist",
                "value": {
                    "kvlistValue": {
                        "values": [
                            {
                                "key": "k",
                                "value": {
                                    "kvlistValue": {
                                        "values": [{"key": "kk", "value": {"boolValue": False}}]
                                    }
                                },
                            }
                        ]
                    }
                },
            },
        ],
        "dropped_attributes_count": 3,
        "events": [
            {
                "time_unix_nano": "5",
                "name": "e",
                "attributes": [{"key": "x", "value": {"stringValue": "y"}}],
                "dropped_attributes_count": 0,
            },
            {"time_unix_nano": "0", "name": "", "attributes": [], "dropped_attributes_count": 0},
        ],
        "dropped_events_count": 4,
        "links": [
            {
                "trace_id": bytes(range(2, 18)).hex(),
                "span_id": bytes(range(2, 10)).hex(),
                "trace_state": "a=b",
                "attributes": [{"key": "l", "value": {"intValue": "1"}}],
                "dropped_attributes_count": 1,
                "flags": 0x100,
            }
        ],
        "dropped_links_count": 5,
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
        "resource": {
            "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}],
            "dropped_attributes_count": 7,
        },
        "scope": {
            "name": "s",
            "version": "9",
            "attributes": [{"key": "sa", "value": {"stringValue": "v"}}],
        },
        "schema_url": "https://rs",
    }
    assert out.spans[1]["kind"] == "SPAN_KIND_CONSUMER"
    assert out.spans[1]["status"] == {"code": "STATUS_CODE_UNSET", "message": ""}
    assert out.spans[2]["schema_url"] == "https://ss"  # the scope's before the resource's
    assert out.spans[2]["scope"]["name"] == "other"
    assert out.spans[3]["resource"] == {"attributes": [], "dropped_attributes_count": 0}
    assert out.spans[3]["schema_url"] == ""
    jcs(out.spans)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"use_integers_for_enums": True},
        {"preserving_proto_field_name": True},  # snake_case names, as protobuf's parser takes
        {"always_print_fields_with_no_presence": True},
    ],
    ids=["names", "enum-numbers", "snake_case", "defaults-written"],
)
def test_every_json_spelling_protobuf_writes_is_read_the_same(options):
    message = rich_request()
    expected = otlp.decode(message.SerializeToString(), PB)
    assert otlp.decode(as_json(message, **options), JS) == expected


def json_span(**fields: Any) -> dict[str, Any]:
    return {"traceId": TRACE.hex(), "spanId": SPAN.hex(), "name": "s", **fields}


def json_body(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def decode_json_span(**fields: Any) -> dict[str, Any]:
    out = otlp.decode(json_body(json_span(**fields)), JS)
    assert out.rejected == []
    return out.spans[0]


def test_json_what_otlp_json_allows():
    got = decode_json_span(
        traceId=TRACE.hex().upper(),  # either case; written lower
        spanId=SPAN.hex().upper(),
        parentSpanId="",
        kind="SPAN_KIND_SERVER",  # an enum by name
        startTimeUnixNano=1700000000000000000,  # a 64-bit integer as a number
        endTimeUnixNano="1700000000000000001",  # or as a string
        flags="1",  # a 32-bit one as a string
        droppedAttributesCount=2.0,  # an integral double
        status={"code": 2},
        attributes=[
            {"key": "d", "value": {"doubleValue": 1}},  # an integer double
            {"key": "d2", "value": {"doubleValue": "2.5"}},  # a double as a string
            {"key": "n", "value": {"doubleValue": "-Infinity"}},
            {"key": "i", "value": {"intValue": 7}},
            {"key": "b", "value": {"bytesValue": "AP_-"}},  # URL-safe base64, no padding
            {"key": "b2", "value": {"bytesValue": "AA"}},
            {"key": "strindex", "value": {"stringValueStrindex": 3}},  # Profiles only: absent
            {"key": "nul", "value": {"stringValue": None}},  # null: absent
            {"key": "no value"},
            {"key": "unknown", "value": {"stringValue": "v", "future": 1}, "keyStrindex": 2},
        ],
        events=None,  # null: the default
        futureField={"anything": [1, 2]},  # unknown fields are ignored
    )
    assert got["trace_id"] == TRACE.hex()
    assert got["span_id"] == SPAN.hex()
    assert got["kind"] == "SPAN_KIND_SERVER"
    assert got["start_time_unix_nano"] == "1700000000000000000"
    assert got["end_time_unix_nano"] == "1700000000000000001"
    assert got["flags"] == 1
    assert got["dropped_attributes_count"] == 2
    assert got["status"] == {"code": "STATUS_CODE_ERROR", "message": ""}
    assert got["events"] == []
    assert [a["value"] for a in got["attributes"]] == [
        {"doubleValue": 1.0},
        {"doubleValue": 2.5},
        {"doubleValue": "-Infinity"},
        {"intValue": "7"},
        {"bytesValue": "AP/+"},
        {"bytesValue": "AA=="},
        {},
        {},
        {},
        {"stringValue": "v"},
    ]


def test_protobuf_string_value_strindex_is_read_as_absent():
    message = request(
        span(attributes=[kv("a", string_value_strindex=4), c.KeyValue(key_strindex=3)])
    )
    out = otlp.decode(message.SerializeToString(), PB)
    assert out.spans[0]["attributes"] == [{"key": "a", "value": {}}, {"key": "", "value": {}}]


def test_an_empty_request_has_no_spans():
    assert otlp.decode(b"", PB) == otlp.Decoded()
    assert otlp.decode(b"{}", JS) == otlp.Decoded()
    assert otlp.decode(b'{"resourceSpans": []}', JS) == otlp.Decoded()


def test_content_type_parameters_and_case():
    assert otlp.decode(b"{}", "Application/JSON; charset=utf-8").spans == []
    assert otlp.decode(b"", "application/x-protobuf;q=1").spans == []
    error = refused(b"", "text/plain")
    assert (error.code, error.message) == (
        otlp.UNSUPPORTED_MEDIA_TYPE,
        "Content-Type 'text/plain' is not application/x-protobuf or application/json",
    )


# --- spans rejected one by one ------------------------------------------------------------------


def test_spans_that_cannot_stand_are_rejected_one_by_one_in_both_encodings():
    good = span(span_id=bytes(range(20, 28)))
    message = request(
        span(trace_id=b"\x01" * 15),
        span(trace_id=b"\x00" * 16),
        span(span_id=b"\x01" * 9),
        span(span_id=b"\x00" * 8),
        span(span_id=b""),
        good,
        span(parent_span_id=b"\x01" * 4),
        span(parent_span_id=b"\x00" * 8),
        span(kind=9),
        span(status=t.Status(code=7)),
        span(links=[t.Span.Link(trace_id=TRACE, span_id=b"\x01" * 7)]),
        span(links=[t.Span.Link()]),
    )
    out = both(message)
    assert [s["span_id"] for s in out.spans] == [bytes(range(20, 28)).hex()]
    sid = SPAN.hex()
    assert out.rejected == [
        Rejection(0, sid, "trace_id is 15 bytes, not 16"),
        Rejection(1, sid, "trace_id is all zero, which is not a valid id"),
        Rejection(2, "01" * 9, "span_id is 9 bytes, not 8"),
        Rejection(3, "00" * 8, "span_id is all zero, which is not a valid id"),
        Rejection(4, "", "span_id is 0 bytes, not 8"),
        Rejection(6, sid, "parent_span_id is 4 bytes, not 8"),
        Rejection(7, sid, "parent_span_id is all zero, which is not a valid id"),
        Rejection(8, sid, "kind 9 is not a SpanKind"),
        Rejection(9, sid, "status code 7 is not a StatusCode"),
        Rejection(10, sid, "links[0].span_id is 7 bytes, not 8"),
        Rejection(11, sid, "links[0].trace_id is 0 bytes, not 16"),
    ]


# --- refusals of the whole request -----------------------------------------------------------


def test_protobuf_that_does_not_parse():
    error = refused(b"\xff\xff\xff", PB)
    assert error.code == otlp.BAD_PROTOBUF
    assert error.message == "the body is not an ExportTraceServiceRequest: truncated varint"
    error = refused(field(1, b"\x12\x05ab"), PB)  # a span whose length runs past its end
    assert (error.code, error.message) == (
        otlp.BAD_PROTOBUF,
        "the body is not an ExportTraceServiceRequest: /resourceSpans/0: a length runs past "
        "its end",
    )
    error = refused(b"\x0f", PB)  # wire type 7
    assert error.message == "the body is not an ExportTraceServiceRequest: wire type 7"
    # invalid UTF-8 in a string: the walk lets it through, protobuf's parser refuses it
    error = refused(one_span_body(field(5, b"\xff")), PB)
    assert error.code == otlp.BAD_PROTOBUF
    assert error.message.startswith("the body is not an ExportTraceServiceRequest: Error parsing")


def test_json_that_is_not_strict_json():
    cases = {
        b"{": "the body: truncated JSON at line 1 column 2: Expecting property name enclosed "
        "in double quotes",
        b'{"resourceSpans": [], "resourceSpans": []}': "the body: duplicate key "
        "'resourceSpans': a hash over duplicate keys is ambiguous",
        b"\xef\xbb\xbf{}": "the body: starts with a UTF-8 byte-order mark; save the file as "
        "UTF-8 without BOM",
        b'{"a": NaN}': "the body: NaN is not valid in a hashed JSON value",
        b'{"a": "\xff"}': "the body: invalid UTF-8 at line 1 column 8 (byte offset 7): invalid "
        "start byte",
        b"{} {}": "the body: unexpected data after the JSON value at line 1",
    }
    for body, message in cases.items():
        error = refused(body, JS)
        assert (error.code, error.message) == (otlp.BAD_JSON, message), body


def test_json_field_spelled_both_ways():
    body = json.dumps({"resourceSpans": [{"scopeSpans": [], "scope_spans": []}]}).encode()
    error = refused(body, JS)
    assert (error.code, error.message) == (
        otlp.BAD_JSON,
        "/resourceSpans/0: the field scopeSpans is given twice (scopeSpans and scope_spans)",
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"name": 5},
            "/resourceSpans/0/scopeSpans/0/spans/0/name: expected a string, got a number",
        ),
        (
            {"kind": "CLIENT"},
            '/resourceSpans/0/scopeSpans/0/spans/0/kind: "CLIENT" is not one '
            "of SPAN_KIND_UNSPECIFIED, SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, SPAN_KIND_CLIENT, "
            "SPAN_KIND_PRODUCER, SPAN_KIND_CONSUMER",
        ),
        (
            {"kind": 2**31},
            "/resourceSpans/0/scopeSpans/0/spans/0/kind: 2147483648 is out of "
            "range for an enum number",
        ),
        (
            {"flags": -1},
            "/resourceSpans/0/scopeSpans/0/spans/0/flags: -1 is out of range for "
            "an unsigned 32-bit integer",
        ),
        (
            {"flags": 2**32},
            "/resourceSpans/0/scopeSpans/0/spans/0/flags: 4294967296 is out of "
            "range for an unsigned 32-bit integer",
        ),
        (
            {"startTimeUnixNano": "1e9"},
            "/resourceSpans/0/scopeSpans/0/spans/0/"
            'startTimeUnixNano: "1e9" is not an unsigned 64-bit integer',
        ),
        (
            {"startTimeUnixNano": 1.5},
            "/resourceSpans/0/scopeSpans/0/spans/0/"
            "startTimeUnixNano: 1.5 is not an unsigned 64-bit integer",
        ),
        (
            {"startTimeUnixNano": str(2**64)},
            "/resourceSpans/0/scopeSpans/0/spans/0/"
            "startTimeUnixNano: 18446744073709551616 is out of range for an unsigned 64-bit "
            "integer",
        ),
        (
            {"startTimeUnixNano": True},
            "/resourceSpans/0/scopeSpans/0/spans/0/"
            "startTimeUnixNano: expected an unsigned 64-bit integer, got a boolean",
        ),
        (
            {"attributes": {}},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes: expected an array, got an object",
        ),
        (
            {"attributes": ["k"]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0: expected an object, got a string",
        ),
        (
            {"attributes": [{"key": "k", "value": {"intValue": str(2**63)}}]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/intValue: "
            "9223372036854775808 is out of range for a signed 64-bit integer",
        ),
        (
            {"attributes": [{"key": "k", "value": {"boolValue": "true"}}]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/boolValue: expected a "
            "boolean, got a string",
        ),
        (
            {"attributes": [{"key": "k", "value": {"doubleValue": "nan"}}]},
            '/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/doubleValue: "nan" is not '
            "a double",
        ),
        (
            {"attributes": [{"key": "k", "value": {"doubleValue": int("9" * 400)}}]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/doubleValue: "
            "999999999999999999999999999999... (400 characters) is out of range for a double",
        ),
        (
            {"attributes": [{"key": "k", "value": {"bytesValue": "a"}}]},
            '/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/bytesValue: "a" is not '
            "base64",
        ),
        (
            {"attributes": [{"key": "k", "value": {"stringValue": "a", "intValue": "1"}}]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value: an AnyValue holds one "
            "value, not intValue, stringValue",
        ),
        (
            {"attributes": [{"key": "k", "value": {"arrayValue": []}}]},
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/arrayValue: expected an "
            "object, got an array",
        ),
        (
            {"status": "ok"},
            "/resourceSpans/0/scopeSpans/0/spans/0/status: expected an object, got a string",
        ),
    ],
)
def test_json_wrong_types(fields, message):
    error = refused(json_body(json_span(**fields)), JS)
    assert (error.code, error.message) == (otlp.WRONG_TYPE, message)


def test_json_wrong_types_at_the_top():
    error = refused(b"[]", JS)
    assert (error.code, error.message) == (
        otlp.WRONG_TYPE,
        "the body: expected an object, got an array",
    )
    error = refused(b'{"resourceSpans": {}}', JS)
    assert error.message == "/resourceSpans: expected an array, got an object"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("AQIDBAUGBwgJCgsMDQ4PEA==", '"AQIDBAUGBwgJCgsMDQ4PEA=="'),  # base64, as protobuf's
        ("0102030405060708090a0b0c0d0e0f1", '"0102030405060708090a0b0c0d0e0f1"'),  # odd
        ("0x0102030405060708", '"0x0102030405060708"'),
        (" 0102030405060708090a0b0c0d0e0f10", '" 0102030405060708090a0b0c0d0e0f10"'),
    ],
)
def test_json_ids_not_in_hex(value, shown):
    error = refused(json_body(json_span(traceId=value)), JS)
    assert (error.code, error.message) == (
        otlp.INVALID_ID,
        f"/resourceSpans/0/scopeSpans/0/spans/0/traceId: {shown} is not an id in hex "
        "(OTLP/JSON spells trace and span ids in hex, not base64)",
    )


def test_json_link_id_not_in_hex():
    error = refused(json_body(json_span(links=[{"traceId": TRACE.hex(), "spanId": "zz"}])), JS)
    assert error.code == otlp.INVALID_ID
    assert error.message.startswith("/resourceSpans/0/scopeSpans/0/spans/0/links/0/spanId:")


def test_anyvalue_nested_to_the_limit_is_read_and_one_deeper_is_refused():
    def nested(depth: int) -> c.AnyValue:
        value = c.AnyValue(string_value="x")
        for _ in range(depth - 1):
            value = c.AnyValue(
                kvlist_value=c.KeyValueList(values=[c.KeyValue(key="k", value=value)])
            )
        return value

    # 32 levels of kvlists in an event's attribute: 100 protobuf messages deep, protobuf's own
    # limit exactly
    deepest = request(
        span(events=[t.Span.Event(attributes=[c.KeyValue(key="a", value=nested(32))])])
    )
    out = both(deepest)
    value = out.spans[0]["events"][0]["attributes"][0]["value"]
    for _ in range(31):
        value = value["kvlistValue"]["values"][0]["value"]
    assert value == {"stringValue": "x"}

    where = "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value" + (
        "/kvlistValue/values/0/value" * 3
    )
    code, pb, js = refused_both(
        request(span(attributes=[c.KeyValue(key="a", value=nested(4))])), max_depth=3
    )
    assert code == otlp.TOO_DEEP
    assert pb == js == f"{where}: an AnyValue nested deeper than 3 levels"


def test_protobuf_nesting_past_protobufs_own_limit_is_too_deep_not_a_crash():
    body = one_span_body(field(9, field(1, b"a") + field(2, kvlist_nest(200))))
    error = refused(body, PB)
    assert error.code == otlp.TOO_DEEP
    assert error.message == (
        "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
        + "/kvlistValue/values/0/value" * 32
        + ": an AnyValue nested deeper than 32 levels"
    )
    # 20,000 levels of arrays: walked iteratively
    value = field(1, b"x")
    for _ in range(20_000):
        value = field(5, field(1, value))
    error = refused(one_span_body(field(9, field(2, value))), PB)
    assert error.code == otlp.TOO_DEEP


def test_protobuf_unknown_groups_nested_past_the_limit():
    body = b"\x0b" * 150 + b"\x0c" * 150  # field 1 groups (unknown here), nested 150 deep
    error = refused(body, PB)
    assert (error.code, error.message) == (
        otlp.BAD_PROTOBUF,
        "the body is not an ExportTraceServiceRequest: groups nested too deep",
    )


def test_json_text_nested_past_what_a_request_can_be():
    deep = b'{"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    error = refused(deep, JS)
    assert (error.code, error.message) == (
        otlp.TOO_DEEP,
        # the object is level 1, its array 2, ...: the 145th container is at /x + 143 indexes
        "the JSON text nests deeper than 144 levels at /x" + "/0" * 143 + "; refused before "
        "parsing it",
    )


def test_two_hundred_thousand_attributes_on_one_span_are_refused():
    ids = field(1, TRACE) + field(2, SPAN)
    pairs = b"".join(field(9, field(1, b"a%d" % i) + field(2, b"\x18\x01")) for i in range(200_000))
    pb = refused(one_span_body(ids + pairs), PB)
    pair = '{"key": "a%d", "value": {"intValue": "1"}}'
    attributes = ", ".join(pair % i for i in range(200_000))
    js = refused(json_body(json_span(attributes=[])).replace(b"[]", f"[{attributes}]".encode()), JS)
    assert (
        (pb.code, pb.message)
        == (js.code, js.message)
        == (
            otlp.TOO_MANY_ATTRIBUTES,
            "/resourceSpans/0/scopeSpans/0/spans/0: more than 10000 attributes",
        )
    )


def test_attribute_limits_on_events_links_resources_and_scopes():
    where = "/resourceSpans/0/scopeSpans/0/spans/0"
    three = [kv(f"a{i}", bool_value=True) for i in range(3)]
    cases = [
        (span(events=[t.Span.Event(attributes=three)]), f"{where}/events/0"),
        (
            span(links=[t.Span.Link(trace_id=TRACE, span_id=SPAN, attributes=three)]),
            f"{where}/links/0",
        ),
    ]
    for one, place in cases:
        code, pb, js = refused_both(request(one), max_attributes=2)
        assert (code, pb, js) == (
            otlp.TOO_MANY_ATTRIBUTES,
            f"{place}: more than 2 attributes",
            f"{place}: more than 2 attributes",
        )
    message = request(span())
    message.resource_spans[0].resource.attributes.extend(three[:2])  # 3 with service.name
    assert refused_both(message, max_attributes=2)[1] == (
        "/resourceSpans/0/resource: more than 2 attributes"
    )
    message = request(span())
    message.resource_spans[0].scope_spans[0].scope.attributes.extend(three)
    assert refused_both(message, max_attributes=2)[1] == (
        "/resourceSpans/0/scopeSpans/0/scope: more than 2 attributes"
    )


def test_a_resource_given_twice_on_the_wire_merges_and_is_counted_whole():
    body = field(
        1,
        field(1, field(1, field(1, b"a")) + field(1, field(1, b"b")))
        + field(1, field(1, field(1, b"c")))
        + field(2, field(2, field(1, TRACE) + field(2, SPAN))),
    )
    error = refused(body, PB, max_attributes=2)
    assert (error.code, error.message) == (
        otlp.TOO_MANY_ATTRIBUTES,
        "/resourceSpans/0/resource: more than 2 attributes",
    )
    out = otlp.decode(body, PB)
    assert [a["key"] for a in out.spans[0]["resource"]["attributes"]] == ["a", "b", "c"]


def test_too_many_spans_events_and_links():
    spans = [span(span_id=bytes([i + 1]) * 8) for i in range(4)]
    assert refused_both(request(*spans), max_spans=3) == (
        otlp.TOO_MANY_SPANS,
        "the request: more than 3 spans",
        "the request: more than 3 spans",
    )
    events = [t.Span.Event(name=str(i)) for i in range(3)]
    assert refused_both(request(span(events=events)), max_events=2) == (
        otlp.TOO_MANY_EVENTS,
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 events",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 events",
    )
    links = [t.Span.Link(trace_id=TRACE, span_id=SPAN) for _ in range(3)]
    assert refused_both(request(span(links=links)), max_links=2) == (
        otlp.TOO_MANY_LINKS,
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 links",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 links",
    )


def test_the_default_limits():
    limits = Limits()
    assert limits == Limits(
        max_body_bytes=16 * 2**20,
        max_spans=20_000,
        max_attributes=10_000,
        max_events=10_000,
        max_links=10_000,
        max_depth=32,
        max_string_bytes=4 * 2**20,
        max_values=1_000_000,
    )
    assert limits.max_json_depth == 144
    with pytest.raises(AttributeError):
        limits.max_spans = 1  # type: ignore[misc]


def test_body_too_large():
    error = refused(b"x" * 101, PB, max_body_bytes=100)
    assert (error.code, error.message) == (
        otlp.BODY_TOO_LARGE,
        "the body is 101 bytes, more than the limit of 100",
    )
    assert refused(b"x" * 101, JS, max_body_bytes=100).code == otlp.BODY_TOO_LARGE


def test_a_string_longer_than_the_limit():
    # (the request's longest other string is its resource's key "service.name": 12 bytes)
    message = request(span(attributes=[kv("k", string_value="é" * 10)]))  # 20 bytes
    code, pb, js = refused_both(message, max_string_bytes=19)
    assert code == otlp.VALUE_TOO_LARGE
    assert (
        pb
        == js
        == (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/stringValue: 20 bytes, more "
            "than the limit of 19"
        )
    )
    assert both(message, max_string_bytes=20).spans[0]["attributes"][0]["value"] == {
        "stringValue": "é" * 10
    }
    message = request(span(attributes=[kv("k", bytes_value=b"\x00" * 20)]))
    code, pb, js = refused_both(message, max_string_bytes=19)
    assert (
        pb
        == js
        == (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value/bytesValue: 20 bytes, more "
            "than the limit of 19"
        )
    )
    code, pb, js = refused_both(request(span(name="n" * 20)), max_string_bytes=19)
    assert (
        pb
        == js
        == ("/resourceSpans/0/scopeSpans/0/spans/0/name: 20 bytes, more than the limit of 19")
    )


def test_protobuf_messages_are_counted_before_they_are_built(monkeypatch):
    # 16 MiB of empty attributes: ~8 million messages, ~430 MB once parsed. Refused by the
    # walk over the wire bytes; protobuf's parser is never asked.
    body = one_span_body(b"\x4a\x00" * (8 * 2**20 - 16))
    assert len(body) < 16 * 2**20

    class Unparsed:
        def ParseFromString(self, data):
            raise AssertionError("parsed")

    monkeypatch.setattr(otlp, "ExportTraceServiceRequest", Unparsed)
    error = refused(body, PB)
    assert (error.code, error.message) == (
        otlp.TOO_MANY_ATTRIBUTES,
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 10000 attributes",
    )
    error = refused(body, PB, max_attributes=10**9)
    assert (error.code, error.message) == (
        otlp.TOO_MANY_VALUES,
        "the request holds more than 1000000 messages; refused before parsing it",
    )


def test_json_values_are_counted_before_they_are_parsed():
    body = b'{"x": [' + b"{}," * 1_000_001 + b"{}]}"
    error = refused(body, JS)
    assert (error.code, error.message) == (
        otlp.TOO_MANY_VALUES,
        "the body: more than 1000000 objects and arrays; refused before parsing it",
    )


# --- gzip ---------------------------------------------------------------------------------


def test_gunzip_bounded():
    data = b"otlp " * 1000
    assert otlp.gunzip_bounded(gzip.compress(data), len(data)) == data
    assert otlp.gunzip_bounded(gzip.compress(b""), 0) == b""
    # several members are one body (RFC 1952)
    assert otlp.gunzip_bounded(gzip.compress(b"ab") + gzip.compress(b"cd"), 4) == b"abcd"

    def gzip_error(body: bytes, max_bytes: int = 10**6) -> tuple[str, str]:
        with pytest.raises(OtlpError) as info:
            otlp.gunzip_bounded(body, max_bytes)
        return info.value.code, info.value.message

    assert gzip_error(gzip.compress(data), len(data) - 1) == (
        otlp.BODY_TOO_LARGE,
        f"the gzip body inflates to more than {len(data) - 1} bytes",
    )
    assert gzip_error(gzip.compress(b"ab") + gzip.compress(b"cd"), 3)[0] == otlp.BODY_TOO_LARGE
    whole = gzip.compress(data)
    assert gzip_error(whole[:-3]) == (otlp.BAD_GZIP, "the gzip body is truncated")
    assert gzip_error(whole[:15]) == (otlp.BAD_GZIP, "the gzip body is truncated")
    assert gzip_error(whole + b"garbage") == (otlp.BAD_GZIP, "bytes after the gzip data")
    assert gzip_error(whole + b"\x00\x00") == (otlp.BAD_GZIP, "bytes after the gzip data")
    assert gzip_error(b"{}") == (otlp.BAD_GZIP, "the body is not gzip")
    assert gzip_error(b"") == (otlp.BAD_GZIP, "the gzip body is empty")
    assert gzip_error(gzip.compress(b"") * 65) == (otlp.BAD_GZIP, "more than 64 gzip members")
    assert otlp.gunzip_bounded(gzip.compress(b"a") * 64, 64) == b"a" * 64
    # a body longer than what the inflater is given at a time
    noise = bytes(range(256)) * 1024
    compressed = gzip.compress(noise, 0)  # stored: longer than the data
    assert len(compressed) > 3 * 2**16
    assert otlp.gunzip_bounded(compressed, len(noise)) == noise
    assert gzip_error(compressed + b"x")[1] == "bytes after the gzip data"
    assert gzip_error(compressed[: 2**16 + 5]) == (otlp.BAD_GZIP, "the gzip body is truncated")
    corrupt = bytearray(whole)
    corrupt[-5] ^= 0xFF  # the CRC
    code, message = gzip_error(bytes(corrupt))
    assert code == otlp.BAD_GZIP
    assert message.startswith("the gzip body is corrupt: Error -3 while decompressing data")


@pytest.mark.parametrize(
    "bomb",
    [
        # 64 MiB of zeros in one member (~64 KB)
        pytest.param(lambda: gzip.compress(bytes(64 * 2**20), 6), id="one-member"),
        # 1 GiB of zeros in 64 members
        pytest.param(lambda: gzip.compress(bytes(16 * 2**20), 6) * 64, id="many-members"),
    ],
)
def test_a_gzip_bomb_is_refused_without_inflating_it(bomb):
    body = bomb()
    assert len(body) < 2 * 2**20
    tracemalloc.start()
    try:
        with pytest.raises(OtlpError) as info:
            otlp.gunzip_bounded(body, 8 * 2**20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (info.value.code, info.value.message) == (
        otlp.BODY_TOO_LARGE,
        f"the gzip body inflates to more than {8 * 2**20} bytes",
    )
    assert peak < 20 * 2**20  # what it inflated (the limit, and a little), never the bomb


# --- the response ---------------------------------------------------------------------------


def test_encode_response():
    assert otlp.encode_response(PB, 0, "") == b""
    assert otlp.encode_response(JS, 0, "") == b"{}"
    body = otlp.encode_response(PB, 3, "3 spans rejected: trace_id is all zero")
    response = ExportTraceServiceResponse()
    response.ParseFromString(body)
    assert response.partial_success.rejected_spans == 3
    assert response.partial_success.error_message == "3 spans rejected: trace_id is all zero"
    assert json.loads(otlp.encode_response("application/json; charset=utf-8", 2, "é")) == {
        "partialSuccess": {"rejectedSpans": "2", "errorMessage": "é"}
    }
    assert json.loads(otlp.encode_response(JS, 0, "a warning")) == {
        "partialSuccess": {"errorMessage": "a warning"}
    }
    with pytest.raises(OtlpError):
        otlp.encode_response("text/plain", 0, "")


# --- fuzz: only OtlpError or success ---------------------------------------------------------

SEEDS = [
    ((FIXTURES / name).read_bytes(), JS if name.endswith(".json") else PB)
    for name in ("openai-v2-proto.bin", "openinference-json.json", "openllmetry-proto-stream.bin")
] + [(rich_request().SerializeToString(), PB), (as_json(rich_request()), JS)]


def decode_or_refuse(body: bytes, content_type: str, limits: Limits = otlp.DEFAULT_LIMITS) -> None:
    try:
        out = otlp.decode(body, content_type, limits=limits)
    except OtlpError as error:
        code = error.code
    else:
        jcs(out.spans)  # whatever it accepts can be canonicalised
        return
    assert code in otlp.CODES


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, str]:
    body, content_type = draw(st.sampled_from(SEEDS))
    data = bytearray(body)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[at:]
    return bytes(data), content_type


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["NaN", "Infinity", "", "00", "AA==", TRACE.hex(), "SPAN_KIND_CLIENT"])
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "stringValue",
                    "intValue",
                    "doubleValue",
                    "bytesValue",
                    "arrayValue",
                    "kvlistValue",
                    "values",
                    "key",
                    "value",
                    "traceId",
                    "spanId",
                    "kind",
                    "attributes",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@st.composite
def replaced_subtree(draw: st.DrawFn) -> bytes:
    """A captured JSON body with one value somewhere replaced by a random JSON value."""
    document = json.loads((FIXTURES / "openai-v2-json.json").read_bytes())
    node: Any = document
    for _ in range(draw(st.integers(0, 12))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            if not isinstance(node[key], dict | list) or draw(st.booleans()):
                node[key] = draw(JSON_VALUES)
                break
            node = node[key]
        elif isinstance(node, list) and node:
            i = draw(st.integers(0, len(node) - 1))
            if not isinstance(node[i], dict | list) or draw(st.booleans()):
                node[i] = draw(JSON_VALUES)
                break
            node = node[i]
        else:
            break
    return json.dumps(document).encode()


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=300), content_type=st.sampled_from([PB, JS]))
def test_fuzz_random_bytes(body, content_type):
    decode_or_refuse(body, content_type)
    decode_or_refuse(body, content_type, Limits(max_string_bytes=4, max_values=8, max_depth=2))


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_fuzz_mutated_bodies(case):
    body, content_type = case
    decode_or_refuse(body, content_type)
    decode_or_refuse(body, content_type, Limits(max_string_bytes=64, max_values=50, max_depth=2))


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=replaced_subtree())
def test_fuzz_json_structure(body):
    decode_or_refuse(body, JS)
