"""What the receiver's service (``otel.services.otlp_receive``) answers for protobuf bodies,
pinned word for word: each refusal's code and message, and for a body accepted the spans
counted, those rejected with why, and the trace ids its ``OTLP_RECEIVED`` event names.

The request path checks a protobuf body without building the reader's dicts
(``otlp.validate``); these pins were taken from the path that built them
(``otlp.decode``), under two sets of limits: ``parsed`` (short bodies parsed first, the
limits checked on the parsed message) and ``walked`` (the wire format walked first)."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2 as c
from opentelemetry.proto.resource.v1 import resource_pb2 as r
from opentelemetry.proto.trace.v1 import trace_pb2 as t

from core.formats.otel import otlp
from core.formats.otel.otlp import Limits
from core.ledger import codes
from governance.models import GovernanceEvent
from otel import services
from otel.models import OtelSpan, OtlpBody
from tests.console.personas import persona

pytestmark = pytest.mark.django_db

PB = otlp.PROTOBUF
TRACE = bytes(range(1, 17))
OTHER_TRACE = bytes(range(2, 18))
SPAN = bytes(range(1, 9))
PARENT = bytes(range(9, 17))
SPANS = "/resourceSpans/0/scopeSpans/0/spans"

LIMITS = {
    # bodies shorter than the longest string allowed: parsed, then checked
    "parsed": Limits(max_spans=3, max_attributes=2, max_events=2, max_links=2, max_depth=3),
    # bodies longer than 64 bytes: their wire format walked before anything is parsed
    "walked": Limits(
        max_spans=3,
        max_attributes=2,
        max_events=2,
        max_links=2,
        max_depth=3,
        max_string_bytes=64,
        max_values=40,
    ),
}


def kv(key: str, **value) -> c.KeyValue:
    return c.KeyValue(key=key, value=c.AnyValue(**value))


def span(**fields) -> t.Span:
    fields.setdefault("trace_id", TRACE)
    fields.setdefault("span_id", SPAN)
    fields.setdefault("name", "s")
    return t.Span(**fields)


def body(*spans: t.Span, resource: list | None = None, scope: list | None = None) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[
            t.ResourceSpans(
                resource=r.Resource(attributes=resource or []),
                scope_spans=[
                    t.ScopeSpans(
                        scope=c.InstrumentationScope(name="s", attributes=scope or []),
                        spans=spans,
                    )
                ],
            )
        ]
    ).SerializeToString()


def nested(depth: int, kind: str = "kvlist") -> c.AnyValue:
    value = c.AnyValue(string_value="x")
    for _ in range(depth - 1):
        if kind == "kvlist":
            value = c.AnyValue(kvlist_value=c.KeyValueList(values=[kv("k", **_fields(value))]))
        else:
            value = c.AnyValue(array_value=c.ArrayValue(values=[value]))
    return value


def _fields(value: c.AnyValue) -> dict:
    which = value.WhichOneof("value")
    return {which: getattr(value, which)}


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
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def one_span_body(span_payload: bytes) -> bytes:
    return field(1, field(2, field(2, span_payload)))


def kvlist_nest(depth: int) -> bytes:
    value = field(1, b"x")
    for _ in range(depth - 1):
        value = field(6, field(1, field(1, b"k") + field(2, value)))
    return value


def _two_attributes() -> bytes:
    """A resource's wire bytes: two attributes (a KeyValue and its AnyValue each)."""
    return b"".join(field(1, kv(f"a{i}", int_value=i).SerializeToString()) for i in (1, 2))


three = [kv(f"a{i}", bool_value=True) for i in range(3)]
sid = [bytes([n]) * 8 for n in range(1, 9)]

CASES = {
    "two good spans, two traces": lambda: body(
        span(span_id=sid[0], attributes=[kv("i", int_value=1)]),
        span(trace_id=OTHER_TRACE, span_id=sid[1], parent_span_id=PARENT),
    ),
    "spans rejected one by one": lambda: body(
        span(trace_id=b"\x01" * 15),
        span(span_id=b"\x00" * 8),
        span(span_id=sid[2], kind=9),
    ),
    "more rejections": lambda: body(
        span(parent_span_id=b"\x00" * 8),
        span(status=t.Status(code=7)),
        span(links=[t.Span.Link(trace_id=TRACE, span_id=b"\x01" * 7)]),
    ),
    "an empty request": lambda: b"",
    "four spans": lambda: body(*(span(span_id=s) for s in sid[:4])),
    "three attributes on a span": lambda: body(span(attributes=three)),
    "three attributes on an event": lambda: body(span(events=[t.Span.Event(attributes=three)])),
    "three attributes on a link": lambda: body(
        span(links=[t.Span.Link(trace_id=TRACE, span_id=SPAN, attributes=three)])
    ),
    "three attributes on the resource": lambda: body(span(), resource=three),
    "three attributes on the scope": lambda: body(span(), scope=three),
    "three events": lambda: body(span(events=[t.Span.Event(name=str(i)) for i in range(3)])),
    "three links": lambda: body(
        span(links=[t.Span.Link(trace_id=TRACE, span_id=SPAN) for _ in range(3)])
    ),
    "a kvlist 4 deep on a span": lambda: body(
        span(attributes=[c.KeyValue(key="a", value=nested(4))])
    ),
    "an array 4 deep on an event": lambda: body(
        span(events=[t.Span.Event(attributes=[c.KeyValue(key="a", value=nested(4, "array"))])])
    ),
    "a kvlist 4 deep on the resource": lambda: body(
        span(), resource=[c.KeyValue(key="a", value=nested(4))]
    ),
    "a kvlist 3 deep": lambda: body(span(attributes=[c.KeyValue(key="a", value=nested(3))])),
    "an attribute error after a rejected span": lambda: body(
        span(span_id=b""), span(span_id=sid[1], attributes=three)
    ),
    "events before attributes in one span": lambda: body(
        span(attributes=three, events=[t.Span.Event(name=str(i)) for i in range(3)])
    ),
    "a span's attributes before its events' attributes": lambda: body(
        span(attributes=three, events=[t.Span.Event(attributes=three)])
    ),
    "a string of 65 bytes": lambda: body(span(attributes=[kv("k", string_value="x" * 65)])),
    "a name of 65 bytes": lambda: body(span(name="n" * 65)),
    "bytes of 65": lambda: body(span(attributes=[kv("k", bytes_value=b"\x00" * 65)])),
    # 7 resourceSpans of a resource of two attributes: 6 messages each
    "42 messages, no span": lambda: field(1, field(1, _two_attributes())) * 7,
    "not protobuf": lambda: b"\xff\xff\xff",
    "a length past its end": lambda: field(1, b"\x12\x05ab"),
    "wire type 7": lambda: b"\x0f",
    "invalid UTF-8 in a name": lambda: one_span_body(field(5, b"\xff")),
    "kvlists 200 deep": lambda: one_span_body(
        field(9, field(1, b"a") + field(2, kvlist_nest(200)))
    ),
    "groups nested 150 deep": lambda: b"\x0b" * 150 + b"\x0c" * 150,
    "a resource given twice on the wire": lambda: field(
        1,
        field(1, field(1, field(1, b"a")) + field(1, field(1, b"b")))
        + field(1, field(1, field(1, b"c")))
        + field(2, field(2, field(1, TRACE) + field(2, SPAN))),
    ),
}

ACCEPTED = "accepted"
# (case, limits) -> (code, message) refused, or (ACCEPTED, spans, rejected, reasons, trace ids)
EXPECTED: dict[tuple[str, str], tuple] = {
    ("42 messages, no span", "parsed"): ("accepted", 0, 0, [], []),
    ("42 messages, no span", "walked"): (
        "TOO_MANY_VALUES",
        "the request holds more than 40 messages; refused before parsing it",
    ),
    ("a kvlist 3 deep", "parsed"): ("accepted", 1, 0, [], ["0102030405060708090a0b0c0d0e0f10"]),
    ("a kvlist 3 deep", "walked"): ("accepted", 1, 0, [], ["0102030405060708090a0b0c0d0e0f10"]),
    ("a kvlist 4 deep on a span", "parsed"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/kvlistValue/values/0/value/kvlistValue/values/0/value"
            "/kvlistValue/values/0/value: an AnyValue nested deeper than"
            " 3 levels"
        ),
    ),
    ("a kvlist 4 deep on a span", "walked"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/kvlistValue/values/0/value/kvlistValue/values/0/value"
            "/kvlistValue/values/0/value: an AnyValue nested deeper than"
            " 3 levels"
        ),
    ),
    ("a kvlist 4 deep on the resource", "parsed"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/resource/attributes/0/value/kvlistValue"
            "/values/0/value/kvlistValue/values/0/value/kvlistValue"
            "/values/0/value: an AnyValue nested deeper than 3 levels"
        ),
    ),
    ("a kvlist 4 deep on the resource", "walked"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/resource/attributes/0/value/kvlistValue"
            "/values/0/value/kvlistValue/values/0/value/kvlistValue"
            "/values/0/value: an AnyValue nested deeper than 3 levels"
        ),
    ),
    ("a length past its end", "parsed"): (
        "BAD_PROTOBUF",
        (
            "the body is not an ExportTraceServiceRequest: "
            "/resourceSpans/0: a length runs past its end"
        ),
    ),
    ("a length past its end", "walked"): (
        "BAD_PROTOBUF",
        (
            "the body is not an ExportTraceServiceRequest: "
            "/resourceSpans/0: a length runs past its end"
        ),
    ),
    ("a name of 65 bytes", "parsed"): ("accepted", 1, 0, [], ["0102030405060708090a0b0c0d0e0f10"]),
    ("a name of 65 bytes", "walked"): (
        "VALUE_TOO_LARGE",
        ("/resourceSpans/0/scopeSpans/0/spans/0/name: 65 bytes, more than the limit of 64"),
    ),
    ("a resource given twice on the wire", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/resource: more than 2 attributes",
    ),
    ("a resource given twice on the wire", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/resource: more than 2 attributes",
    ),
    ("a span's attributes before its events' attributes", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 attributes",
    ),
    ("a span's attributes before its events' attributes", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 attributes",
    ),
    ("a string of 65 bytes", "parsed"): (
        "accepted",
        1,
        0,
        [],
        ["0102030405060708090a0b0c0d0e0f10"],
    ),
    ("a string of 65 bytes", "walked"): (
        "VALUE_TOO_LARGE",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/stringValue: 65 bytes, more than the limit of 64"
        ),
    ),
    ("an array 4 deep on an event", "parsed"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/events/0/attributes/0"
            "/value/arrayValue/values/0/arrayValue/values/0/arrayValue"
            "/values/0: an AnyValue nested deeper than 3 levels"
        ),
    ),
    ("an array 4 deep on an event", "walked"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/events/0/attributes/0"
            "/value/arrayValue/values/0/arrayValue/values/0/arrayValue"
            "/values/0: an AnyValue nested deeper than 3 levels"
        ),
    ),
    ("an attribute error after a rejected span", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/1: more than 2 attributes",
    ),
    ("an attribute error after a rejected span", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/1: more than 2 attributes",
    ),
    ("an empty request", "parsed"): ("accepted", 0, 0, [], []),
    ("an empty request", "walked"): ("accepted", 0, 0, [], []),
    ("bytes of 65", "parsed"): ("accepted", 1, 0, [], ["0102030405060708090a0b0c0d0e0f10"]),
    ("bytes of 65", "walked"): (
        "VALUE_TOO_LARGE",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/bytesValue: 65 bytes, more than the limit of 64"
        ),
    ),
    ("events before attributes in one span", "parsed"): (
        "TOO_MANY_EVENTS",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 events",
    ),
    ("events before attributes in one span", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 attributes",
    ),
    ("four spans", "parsed"): ("TOO_MANY_SPANS", "the request: more than 3 spans"),
    ("four spans", "walked"): ("TOO_MANY_SPANS", "the request: more than 3 spans"),
    ("groups nested 150 deep", "parsed"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: groups nested too deep",
    ),
    ("groups nested 150 deep", "walked"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: groups nested too deep",
    ),
    ("invalid UTF-8 in a name", "parsed"): (
        "BAD_PROTOBUF",
        (
            "the body is not an ExportTraceServiceRequest: Error parsing"
            " message with type 'opentelemetry.proto.collector.trace.v1.E"
            "xportTraceServiceRequest': String field had bad UTF-8"
        ),
    ),
    ("invalid UTF-8 in a name", "walked"): (
        "BAD_PROTOBUF",
        (
            "the body is not an ExportTraceServiceRequest: Error parsing"
            " message with type 'opentelemetry.proto.collector.trace.v1.E"
            "xportTraceServiceRequest': String field had bad UTF-8"
        ),
    ),
    ("kvlists 200 deep", "parsed"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/kvlistValue/values/0/value/kvlistValue/values/0/value"
            "/kvlistValue/values/0/value: an AnyValue nested deeper than"
            " 3 levels"
        ),
    ),
    ("kvlists 200 deep", "walked"): (
        "TOO_DEEP",
        (
            "/resourceSpans/0/scopeSpans/0/spans/0/attributes/0/value"
            "/kvlistValue/values/0/value/kvlistValue/values/0/value"
            "/kvlistValue/values/0/value: an AnyValue nested deeper than"
            " 3 levels"
        ),
    ),
    ("more rejections", "parsed"): (
        "accepted",
        0,
        3,
        [
            "parent_span_id is all zero, which is not a valid id",
            "status code 7 is not a StatusCode",
            "links[0].span_id is 7 bytes, not 8",
        ],
        [],
    ),
    ("more rejections", "walked"): (
        "accepted",
        0,
        3,
        [
            "parent_span_id is all zero, which is not a valid id",
            "status code 7 is not a StatusCode",
            "links[0].span_id is 7 bytes, not 8",
        ],
        [],
    ),
    ("not protobuf", "parsed"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: truncated varint",
    ),
    ("not protobuf", "walked"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: truncated varint",
    ),
    ("spans rejected one by one", "parsed"): (
        "accepted",
        0,
        3,
        [
            "trace_id is 15 bytes, not 16",
            "span_id is all zero, which is not a valid id",
            "kind 9 is not a SpanKind",
        ],
        [],
    ),
    ("spans rejected one by one", "walked"): (
        "accepted",
        0,
        3,
        [
            "trace_id is 15 bytes, not 16",
            "span_id is all zero, which is not a valid id",
            "kind 9 is not a SpanKind",
        ],
        [],
    ),
    ("three attributes on a link", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        ("/resourceSpans/0/scopeSpans/0/spans/0/links/0: more than 2 attributes"),
    ),
    ("three attributes on a link", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        ("/resourceSpans/0/scopeSpans/0/spans/0/links/0: more than 2 attributes"),
    ),
    ("three attributes on a span", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 attributes",
    ),
    ("three attributes on a span", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 attributes",
    ),
    ("three attributes on an event", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        ("/resourceSpans/0/scopeSpans/0/spans/0/events/0: more than 2 attributes"),
    ),
    ("three attributes on an event", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        ("/resourceSpans/0/scopeSpans/0/spans/0/events/0: more than 2 attributes"),
    ),
    ("three attributes on the resource", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/resource: more than 2 attributes",
    ),
    ("three attributes on the resource", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/resource: more than 2 attributes",
    ),
    ("three attributes on the scope", "parsed"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/scope: more than 2 attributes",
    ),
    ("three attributes on the scope", "walked"): (
        "TOO_MANY_ATTRIBUTES",
        "/resourceSpans/0/scopeSpans/0/scope: more than 2 attributes",
    ),
    ("three events", "parsed"): (
        "TOO_MANY_EVENTS",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 events",
    ),
    ("three events", "walked"): (
        "TOO_MANY_EVENTS",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 events",
    ),
    ("three links", "parsed"): (
        "TOO_MANY_LINKS",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 links",
    ),
    ("three links", "walked"): (
        "TOO_MANY_LINKS",
        "/resourceSpans/0/scopeSpans/0/spans/0: more than 2 links",
    ),
    ("two good spans, two traces", "parsed"): (
        "accepted",
        2,
        0,
        [],
        ["0102030405060708090a0b0c0d0e0f10", "02030405060708090a0b0c0d0e0f1011"],
    ),
    ("two good spans, two traces", "walked"): (
        "accepted",
        2,
        0,
        [],
        ["0102030405060708090a0b0c0d0e0f10", "02030405060708090a0b0c0d0e0f1011"],
    ),
    ("wire type 7", "parsed"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: wire type 7",
    ),
    ("wire type 7", "walked"): (
        "BAD_PROTOBUF",
        "the body is not an ExportTraceServiceRequest: wire type 7",
    ),
}


def outcome(data: bytes, limits: Limits, user, monkeypatch) -> tuple:
    monkeypatch.setattr(services, "limits", lambda: limits)
    try:
        got = services.otlp_receive(body=data, content_type=PB, user=user)
    except otlp.OtlpError as error:
        return (error.code, error.message)
    return (ACCEPTED, got.spans, got.rejected, got.reasons, got.trace_ids)


@pytest.mark.parametrize("regime", sorted(LIMITS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_it_answers_each_body_as_pinned(
    case, regime, monkeypatch, django_capture_on_commit_callbacks
):
    alice = persona("alice")
    events = GovernanceEvent.objects.count()
    data = CASES[case]()
    with django_capture_on_commit_callbacks(execute=True):
        got = outcome(data, LIMITS[regime], alice, monkeypatch)
    assert got == EXPECTED[case, regime]
    if got[0] != ACCEPTED:
        assert OtlpBody.objects.count() == 0
        assert OtelSpan.objects.count() == 0
        assert GovernanceEvent.objects.count() == events
        return
    _, spans, rejected, _reasons, trace_ids = got
    row = OtlpBody.objects.get()
    assert (row.span_count, row.rejected_count) == (spans, rejected)
    event = GovernanceEvent.objects.get(seq=row.event_seq)
    assert event.type == codes.OTLP_RECEIVED
    assert (event.payload["spans"], event.payload["rejected"]) == (spans, rejected)
    assert event.payload["trace_ids"] == trace_ids
    assert OtelSpan.objects.count() == spans  # read (tasks inline), every span accepted stored
