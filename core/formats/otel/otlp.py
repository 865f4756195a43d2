"""One OTLP/HTTP trace export body (an ``ExportTraceServiceRequest``, protobuf or JSON) into
plain span dicts, and the export response back.

:func:`decode` gives every span of the request, flattened in request order, each carrying
its resource and scope, in OTLP's own JSON mapping with ids as lower-case hex and 64-bit
integers as decimal strings: a protobuf body and a JSON body holding the same data give
*identical* dicts (the sealed record hashes them). A span the request spells well but that
cannot stand (a trace id that is not 16 bytes or is all zero, a span id that is not 8 bytes,
an unknown kind) is rejected on its own (:attr:`Decoded.rejected`, reported back in the
response's ``partial_success``); a body that cannot be read, or one past a :class:`Limits`
bound, is refused whole with an :class:`OtlpError` whose code says why.

Memory stays bounded: a protobuf body long enough to break a limit (more than two bytes
per allowed message, or longer than the longest string allowed) has its wire format walked
first (:func:`_prescan_protobuf`), building nothing, so its spans, attributes, messages,
strings and nesting are counted before the protobuf runtime allocates them (a 16 MiB body
of empty attributes would cost ~430 MB parsed); a shorter one is parsed and checked as it
is read, and walked only when the runtime refuses it, to say why in the same words. A JSON
body's objects, arrays and keys are counted and its nesting measured before it is parsed
(:mod:`core.formats.jsonstrict`). gzip is undone by the caller, with
:func:`gunzip_bounded`.

:func:`validate` is the request path's check: the same refusals as :func:`decode`, in the
same words, and the same rejections, found on the parsed protobuf message without building
a dict (the reader decodes the body later); a body at the limits then costs what the
protobuf runtime holds, a few MiB, not the dict tree's hundreds. :func:`jcs_bytes` writes a
span record's RFC 8785 bytes with orjson where those are exactly the canonical bytes.

The JSON path is a strict walker over OTLP's JSON mapping (protobuf's own ``json_format``
would read ids as base64): field names in lowerCamelCase, or the proto names in
snake_case as protobuf's JSON parser accepts, unknown fields ignored as OTLP asks; ids in
hex (either case); 64-bit integers as strings or numbers; enums as numbers or names.

Pure: no Django.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from core.canonical import es_number_to_string
from core.errors import ReplayError
from core.formats import jsonstrict

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# ---------------------------------------------------------------------------------------
# Refusal codes (OtlpError.code): a public contract of the OTLP receiver, asserted by tests

#: the Content-Type is neither OTLP/HTTP protobuf nor JSON
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
#: a gzip body that is not gzip, is truncated or has bytes after its last member
BAD_GZIP = "BAD_GZIP"
#: the (decoded) body is larger than Limits.max_body_bytes
BODY_TOO_LARGE = "BODY_TOO_LARGE"
#: the protobuf body does not parse as an ExportTraceServiceRequest
BAD_PROTOBUF = "BAD_PROTOBUF"
#: the JSON body is not strict JSON (syntax, duplicate keys, BOM, invalid UTF-8, a field
#: spelled both ways)
BAD_JSON = "BAD_JSON"
#: a JSON field holds a value of the wrong type or out of its range
WRONG_TYPE = "WRONG_TYPE"
#: a JSON id that is not hex (OTLP/JSON spells ids in hex, never base64)
INVALID_ID = "INVALID_ID"
#: an AnyValue nested deeper than Limits.max_depth, or a JSON text nested past its bound
TOO_DEEP = "TOO_DEEP"
#: more spans in the request than Limits.max_spans
TOO_MANY_SPANS = "TOO_MANY_SPANS"
#: more attributes on one span, event, link, resource or scope than Limits.max_attributes
TOO_MANY_ATTRIBUTES = "TOO_MANY_ATTRIBUTES"
#: more events on one span than Limits.max_events
TOO_MANY_EVENTS = "TOO_MANY_EVENTS"
#: more links on one span than Limits.max_links
TOO_MANY_LINKS = "TOO_MANY_LINKS"
#: more messages (protobuf) or keys, objects and arrays (JSON) than the request may hold
TOO_MANY_VALUES = "TOO_MANY_VALUES"
#: a string or bytes value longer than Limits.max_string_bytes
VALUE_TOO_LARGE = "VALUE_TOO_LARGE"

CODES: dict[str, str] = {
    UNSUPPORTED_MEDIA_TYPE: f"the Content-Type is neither {PROTOBUF} nor {JSON}",
    BAD_GZIP: "the gzip body is not gzip, is truncated or has bytes after its end",
    BODY_TOO_LARGE: "the body, once decompressed, is larger than the limit",
    BAD_PROTOBUF: "the protobuf body does not parse as an ExportTraceServiceRequest",
    BAD_JSON: "the JSON body is not strict JSON",
    WRONG_TYPE: "a JSON field holds a value of the wrong type or out of range",
    INVALID_ID: "a JSON trace or span id is not hex",
    TOO_DEEP: "a value is nested deeper than the limit",
    TOO_MANY_SPANS: "the request holds more spans than the limit",
    TOO_MANY_ATTRIBUTES: "a span, event, link, resource or scope has more attributes than allowed",
    TOO_MANY_EVENTS: "a span has more events than the limit",
    TOO_MANY_LINKS: "a span has more links than the limit",
    TOO_MANY_VALUES: "the request holds more values than the limit",
    VALUE_TOO_LARGE: "a string or bytes value is longer than the limit",
}


class OtlpError(Exception):
    """A request refused whole: `code` is one of :data:`CODES`, `message` says where."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """The bounds one request is held to (the defaults are generous for real exporters: the
    SDKs' batch processors send at most 512 spans of at most 128 attributes, events and
    links each)."""

    #: the body's bytes, after gzip is undone (also gunzip_bounded's bound)
    max_body_bytes: int = 16 * MiB
    #: spans in one request (rejected ones count)
    max_spans: int = 20_000
    #: attributes on one span, event, link, resource or scope
    max_attributes: int = 10_000
    #: events on one span
    max_events: int = 10_000
    #: links on one span
    max_links: int = 10_000
    #: AnyValue nesting: an attribute's value is at depth 1, a value inside an arrayValue or
    #: kvlistValue at depth d is at d + 1 (protobuf's runtime parses no deeper than 100
    #: messages: 32 levels of kvlists in an event's attribute are 100 exactly)
    max_depth: int = 32
    #: UTF-8 bytes of one string (any: names, keys, values), or bytes of a bytesValue
    max_string_bytes: int = 4 * MiB
    #: protobuf messages in one request (each resource, scope, span, event, link, status,
    #: attribute and value counts one); in a JSON body, its objects and arrays, and its keys
    #: (each bounded apart; jsonstrict's own bounds, a million each, still apply). A parsed
    #: one costs tens to hundreds of bytes whatever its two bytes on the wire.
    max_values: int = 1_000_000

    @property
    def max_json_depth(self) -> int:
        """The nesting a JSON text may reach: the request's own structure, then four
        levels per AnyValue level (kvlistValue, values, the pair, its value)."""
        return 16 + 4 * self.max_depth


DEFAULT_LIMITS = Limits()


class Rejection(NamedTuple):
    """A span refused on its own: its place among the request's spans (0-based, in request
    order), its span id as given (lower-case hex, whatever its length) and why."""

    position: int
    span_id: str
    reason: str


@dataclass
class Decoded:
    """What :func:`decode` gives: the accepted spans' plain dicts, in request order, and
    the spans rejected one by one. The spans of one resource (one scope) share its
    ``resource`` (``scope``) dict: read them, do not change them."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def media_type(content_type: str) -> str:
    """The OTLP media type `content_type` names (parameters dropped, any case), or raise
    UNSUPPORTED_MEDIA_TYPE."""
    base = content_type.split(";", 1)[0].strip().lower()
    if base not in (PROTOBUF, JSON):
        raise OtlpError(
            UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type {content_type[:100]!r} is not {PROTOBUF} or {JSON}",
        )
    return base


def decode(body: bytes, content_type: str, *, limits: Limits = DEFAULT_LIMITS) -> Decoded:
    """The spans of one OTLP/HTTP ``ExportTraceServiceRequest`` body (already gunzipped).

    Raises :class:`OtlpError` for a body refused whole; spans refused one by one are in
    :attr:`Decoded.rejected`.
    """
    kind = media_type(content_type)
    _check_size(body, limits)
    if kind == PROTOBUF:
        return _decode_protobuf(body, limits)
    return _decode_json(body, limits)


@dataclass
class Checked:
    """What :func:`validate` gives: how many spans :func:`decode` would accept, the spans
    it would reject (the same :class:`Rejection` values) and the accepted spans' trace ids
    (lower-case hex, sorted, each once)."""

    spans: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)


def validate(body: bytes, content_type: str, *, limits: Limits = DEFAULT_LIMITS) -> Checked:
    """Check one body as :func:`decode` does, without building its spans' dicts: the same
    :class:`OtlpError` (code and message) for a body refused whole, else the count of spans
    accepted, the rejections and the trace ids. What the request path needs to answer; the
    reader decodes the body later.

    A protobuf body is parsed by the protobuf runtime (a few bytes of memory a message,
    where a dict tree costs hundreds) and its limits and ids are checked on the parsed
    message, in decode's order, so the first refusal is decode's. A JSON body is decoded
    (its parser builds the tree anyway)."""
    kind = media_type(content_type)
    _check_size(body, limits)
    if kind == PROTOBUF:
        return _validate_protobuf(body, limits)
    decoded = _decode_json(body, limits)
    return Checked(
        spans=len(decoded.spans),
        rejected=decoded.rejected,
        trace_ids=sorted({span["trace_id"] for span in decoded.spans}),
    )


def _check_size(body: bytes, limits: Limits) -> None:
    if len(body) > limits.max_body_bytes:
        raise OtlpError(
            BODY_TOO_LARGE,
            f"the body is {len(body)} bytes, more than the limit of {limits.max_body_bytes}",
        )


# ---------------------------------------------------------------------------------------
# What both encodings share: ids, enums, the span finished and checked


SPAN_KINDS = (
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
)
STATUS_CODES = ("STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR")


def _id_problem(name: str, value: bytes, size: int, *, empty_ok: bool = False) -> str | None:
    if not value and empty_ok:
        return None
    if len(value) != size:
        return f"{name} is {len(value)} bytes, not {size}"
    if not any(value):
        return f"{name} is all zero, which is not a valid id"
    return None


def _finish_span(raw: dict[str, Any], index: int) -> Rejection | None:
    """Check a span whose ids are still bytes and whose kind and status code are still
    numbers; turn them into hex and names in place. A span that cannot stand gives its
    :class:`Rejection` (the same reasons whatever the body's encoding)."""
    problem = (
        _id_problem("trace_id", raw["trace_id"], 16)
        or _id_problem("span_id", raw["span_id"], 8)
        or _id_problem("parent_span_id", raw["parent_span_id"], 8, empty_ok=True)
    )
    if problem is None and not 0 <= raw["kind"] < len(SPAN_KINDS):
        problem = f"kind {raw['kind']} is not a SpanKind"
    status = raw["status"]
    if problem is None and not 0 <= status["code"] < len(STATUS_CODES):
        problem = f"status code {status['code']} is not a StatusCode"
    if problem is None:
        for i, link in enumerate(raw["links"]):
            problem = _id_problem(f"links[{i}].trace_id", link["trace_id"], 16) or _id_problem(
                f"links[{i}].span_id", link["span_id"], 8
            )
            if problem:
                break
    if problem is not None:
        return Rejection(index, raw["span_id"][:64].hex(), problem)
    raw["trace_id"] = raw["trace_id"].hex()
    raw["span_id"] = raw["span_id"].hex()
    raw["parent_span_id"] = raw["parent_span_id"].hex()
    raw["kind"] = SPAN_KINDS[raw["kind"]]
    status["code"] = STATUS_CODES[status["code"]]
    for link in raw["links"]:
        link["trace_id"] = link["trace_id"].hex()
        link["span_id"] = link["span_id"].hex()
    return None


def _double(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _too_many(code: str, what: str, where: str, limit: int) -> OtlpError:
    return OtlpError(code, f"{where}: more than {limit} {what}")


def _deep(where: str, limits: Limits) -> OtlpError:
    return OtlpError(TOO_DEEP, f"{where}: an AnyValue nested deeper than {limits.max_depth} levels")


def _long(where: str, size: int, limits: Limits) -> OtlpError:
    return OtlpError(
        VALUE_TOO_LARGE,
        f"{where}: {size} bytes, more than the limit of {limits.max_string_bytes}",
    )


# ---------------------------------------------------------------------------------------
# Protobuf: the wire format walked first, then parsed and read

# the messages of a trace export, and for each its submessage fields: number -> (message,
# JSON name, repeated)
_REQ, _RS, _RES, _SS, _SCOPE, _SPAN, _EVENT, _LINK, _STATUS, _KV, _AV, _ARR, _KVL = range(13)
_CHILDREN: dict[int, dict[int, tuple[int, str, bool]]] = {
    _REQ: {1: (_RS, "resourceSpans", True)},
    _RS: {1: (_RES, "resource", False), 2: (_SS, "scopeSpans", True)},
    _RES: {1: (_KV, "attributes", True)},
    _SS: {1: (_SCOPE, "scope", False), 2: (_SPAN, "spans", True)},
    _SCOPE: {3: (_KV, "attributes", True)},
    _SPAN: {
        9: (_KV, "attributes", True),
        11: (_EVENT, "events", True),
        13: (_LINK, "links", True),
        15: (_STATUS, "status", False),
    },
    _EVENT: {3: (_KV, "attributes", True)},
    _LINK: {4: (_KV, "attributes", True)},
    _STATUS: {},
    _KV: {2: (_AV, "value", False)},
    _AV: {5: (_ARR, "arrayValue", False), 6: (_KVL, "kvlistValue", False)},
    _ARR: {1: (_AV, "values", True)},
    _KVL: {1: (_KV, "values", True)},
}
# the string and bytes fields of each: number -> JSON name (their lengths are bounded)
_STRINGS: dict[int, dict[int, str]] = {
    _REQ: {},
    _RS: {3: "schemaUrl"},
    _RES: {},
    _SS: {3: "schemaUrl"},
    _SCOPE: {1: "name", 2: "version"},
    _SPAN: {1: "traceId", 2: "spanId", 3: "traceState", 4: "parentSpanId", 5: "name"},
    _EVENT: {2: "name"},
    _LINK: {1: "traceId", 2: "spanId", 3: "traceState"},
    _STATUS: {2: "message"},
    _KV: {1: "key"},
    _AV: {1: "stringValue", 7: "bytesValue"},
    _ARR: {},
    _KVL: {},
}
# the messages whose attributes are bounded by Limits.max_attributes (a kvlist is not: the
# request's count of values bounds it)
_ATTRIBUTED = frozenset({_RES, _SCOPE, _SPAN, _EVENT, _LINK})
_MAX_GROUP_DEPTH = 100  # protobuf's own parser refuses deeper


class _Malformed(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        result = byte & 0x7F
        shift = 7
        while True:
            pos += 1
            byte = buf[pos]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos + 1
            shift += 7
            if shift >= 70:
                raise _Malformed("a varint longer than 10 bytes")
    except IndexError:
        raise _Malformed("truncated varint") from None


class _Frame:
    """One message being walked: where it ends, where it is (for a refusal's pointer),
    how many of each repeated submessage it has had so far, its AnyValue depth."""

    __slots__ = ("counts", "depth", "end", "index", "kind", "name", "parent")

    def __init__(
        self,
        kind: int,
        end: int,
        parent: _Frame | None,
        *,
        name: str = "",
        index: int | None = None,
        depth: int = 0,
    ) -> None:
        self.kind = kind
        self.end = end
        self.parent = parent
        self.name = name
        self.index = index
        self.depth = depth
        self.counts: dict[int, int] = {}

    def pointer(self) -> str:
        parts: list[str] = []
        frame: _Frame | None = self
        while frame is not None and frame.parent is not None:
            if frame.index is not None:
                parts.append(str(frame.index))
            parts.append(frame.name)
            frame = frame.parent
        return "/" + "/".join(reversed(parts)) if parts else ""


def _prescan_protobuf(buf: bytes, limits: Limits) -> None:
    """Walk the wire format of an ExportTraceServiceRequest without building it: refuse
    more spans, attributes, events, links or messages than the limits, a string longer
    than the limit, an AnyValue nested too deep, and malformed wire data, each before the
    protobuf runtime allocates anything. Iterative, and a step per field: the limits bound
    the fields it reads before it refuses."""
    frame = _Frame(_REQ, len(buf), None)
    pos = 0
    messages = spans = 0
    while True:
        while pos == frame.end:
            if frame.parent is None:
                return
            frame = frame.parent
        if pos > frame.end:
            raise _Malformed(f"{frame.pointer() or 'the request'}: a field runs past its message")
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _Malformed("field number 0")
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > frame.end:
                raise _Malformed(f"{frame.pointer() or 'the request'}: a length runs past its end")
            child = _CHILDREN[frame.kind].get(number)
            if child is None:
                name = _STRINGS[frame.kind].get(number)
                if name is not None and size > limits.max_string_bytes:
                    raise _long(f"{frame.pointer()}/{name}", size, limits)
                pos += size
                continue
            kind, name, repeated = child
            index = None
            if repeated:
                index = frame.counts.get(number, 0)
                frame.counts[number] = index + 1
                _check_counts(frame, kind, index + 1, name, limits)
            messages += 1
            if messages > limits.max_values:
                raise OtlpError(
                    TOO_MANY_VALUES,
                    f"the request holds more than {limits.max_values} messages; refused "
                    "before parsing it",
                )
            depth = frame.depth + (kind == _AV)
            if depth > limits.max_depth:
                raise _deep(
                    _Frame(kind, 0, frame, name=name, index=index, depth=depth).pointer(), limits
                )
            if kind == _SPAN:
                spans += 1
                if spans > limits.max_spans:
                    raise _too_many(TOO_MANY_SPANS, "spans", "the request", limits.max_spans)
            frame = _Frame(kind, pos + size, frame, name=name, index=index, depth=depth)
            continue
        elif wire == 3:
            pos = _skip_group(buf, pos, number, frame.end)
        else:
            raise _Malformed(f"wire type {wire}")
        if pos > frame.end:
            raise _Malformed(f"{frame.pointer() or 'the request'}: a field runs past its message")


def _check_counts(frame: _Frame, kind: int, count: int, name: str, limits: Limits) -> None:
    where = frame.pointer() or "the request"
    if kind == _KV and frame.kind in _ATTRIBUTED and count > limits.max_attributes:
        raise _too_many(TOO_MANY_ATTRIBUTES, "attributes", where, limits.max_attributes)
    if kind == _EVENT and count > limits.max_events:
        raise _too_many(TOO_MANY_EVENTS, "events", where, limits.max_events)
    if kind == _LINK and count > limits.max_links:
        raise _too_many(TOO_MANY_LINKS, "links", where, limits.max_links)


def _skip_group(buf: bytes, pos: int, number: int, end: int) -> int:
    """Past the end of an (unknown) group started with field `number`."""
    open_groups = [number]
    while open_groups:
        if pos >= end:
            raise _Malformed("an unterminated group")
        tag, pos = _varint(buf, pos)
        inner, wire = tag >> 3, tag & 7
        if inner == 0:
            raise _Malformed("field number 0")
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            pos += size
        elif wire == 3:
            open_groups.append(inner)
            if len(open_groups) > _MAX_GROUP_DEPTH:
                raise _Malformed("groups nested too deep")
        elif wire == 4:
            if open_groups.pop() != inner:
                raise _Malformed("a group ends with another field's number")
        else:
            raise _Malformed(f"wire type {wire}")
    return pos


def _prescan(body: bytes, limits: Limits) -> None:
    try:
        _prescan_protobuf(body, limits)
    except _Malformed as exc:
        raise OtlpError(
            BAD_PROTOBUF, f"the body is not an ExportTraceServiceRequest: {exc}"
        ) from None


def _parse_protobuf(body: bytes, limits: Limits) -> Any:
    """The parsed ``ExportTraceServiceRequest``, its span count within the limit."""
    # A body of n bytes holds at most n / 2 messages (an empty one is a tag and a length)
    # and no string longer than n: a short body is parsed straight away (its spans,
    # attributes and nesting are checked as it is read), a longer one is walked first.
    # One the protobuf runtime refuses is walked too, so that the refusal says why in the
    # same words (nesting past the runtime's own limit is TOO_DEEP, not malformed).
    if len(body) > min(2 * limits.max_values, limits.max_string_bytes):
        _prescan(body, limits)
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        _prescan(body, limits)
        raise OtlpError(
            BAD_PROTOBUF, f"the body is not an ExportTraceServiceRequest: {exc}"
        ) from None
    if sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans) > (
        limits.max_spans
    ):
        raise _too_many(TOO_MANY_SPANS, "spans", "the request", limits.max_spans)
    return request


def _decode_protobuf(body: bytes, limits: Limits) -> Decoded:
    request = _parse_protobuf(body, limits)
    out = Decoded()
    index = 0
    for r, rs in enumerate(request.resource_spans):
        where_r = f"/resourceSpans/{r}"
        resource = {
            "attributes": _pb_attributes(rs.resource.attributes, f"{where_r}/resource", limits),
            "dropped_attributes_count": rs.resource.dropped_attributes_count,
        }
        for s, ss in enumerate(rs.scope_spans):
            where_s = f"{where_r}/scopeSpans/{s}"
            scope = {
                "name": ss.scope.name,
                "version": ss.scope.version,
                "attributes": _pb_attributes(ss.scope.attributes, f"{where_s}/scope", limits),
            }
            schema_url = ss.schema_url or rs.schema_url
            for i, span in enumerate(ss.spans):
                where = f"{where_s}/spans/{i}"
                raw = _pb_span(span, where, limits)
                raw["resource"] = resource
                raw["scope"] = scope
                raw["schema_url"] = schema_url
                _accept(out, raw, index)
                index += 1
    return out


def _accept(out: Decoded, raw: dict[str, Any], index: int) -> None:
    rejection = _finish_span(raw, index)
    if rejection is None:
        out.spans.append(raw)
    else:
        out.rejected.append(rejection)


def _pb_span(span: Any, where: str, limits: Limits) -> dict[str, Any]:
    if len(span.events) > limits.max_events:
        raise _too_many(TOO_MANY_EVENTS, "events", where, limits.max_events)
    if len(span.links) > limits.max_links:
        raise _too_many(TOO_MANY_LINKS, "links", where, limits.max_links)
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "trace_state": span.trace_state,
        "flags": span.flags,
        "name": span.name,
        "kind": span.kind,
        "start_time_unix_nano": str(span.start_time_unix_nano),
        "end_time_unix_nano": str(span.end_time_unix_nano),
        "attributes": _pb_attributes(span.attributes, where, limits),
        "dropped_attributes_count": span.dropped_attributes_count,
        "events": [
            {
                "time_unix_nano": str(event.time_unix_nano),
                "name": event.name,
                "attributes": _pb_attributes(event.attributes, f"{where}/events/{e}", limits),
                "dropped_attributes_count": event.dropped_attributes_count,
            }
            for e, event in enumerate(span.events)
        ],
        "dropped_events_count": span.dropped_events_count,
        "links": [
            {
                "trace_id": link.trace_id,
                "span_id": link.span_id,
                "trace_state": link.trace_state,
                "attributes": _pb_attributes(link.attributes, f"{where}/links/{k}", limits),
                "dropped_attributes_count": link.dropped_attributes_count,
                "flags": link.flags,
            }
            for k, link in enumerate(span.links)
        ],
        "dropped_links_count": span.dropped_links_count,
        "status": {"code": span.status.code, "message": span.status.message},
    }


def _pb_attributes(pairs: Any, where: str, limits: Limits) -> list[dict[str, Any]]:
    # the prescan counted each occurrence; a message given twice on the wire merges (its
    # attributes concatenate), so the total is checked again here
    if len(pairs) > limits.max_attributes:
        raise _too_many(TOO_MANY_ATTRIBUTES, "attributes", where, limits.max_attributes)
    if limits.max_depth < 1:  # every value is too deep: _pb_value says where
        return [
            {
                "key": kv.key,
                "value": _pb_value(kv.value, f"{where}/attributes/{a}/value", 1, limits),
            }
            for a, kv in enumerate(pairs)
        ]
    out = []
    for a, kv in enumerate(pairs):
        # _pb_value inlined for the scalars (most values), its pointer written only for the
        # values that nest
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            plain: dict[str, Any] = {"stringValue": value.string_value}
        elif which == "int_value":
            plain = {"intValue": str(value.int_value)}
        elif which == "bool_value":
            plain = {"boolValue": value.bool_value}
        elif which == "double_value":
            plain = {"doubleValue": _double(value.double_value)}
        else:
            plain = _pb_value(value, f"{where}/attributes/{a}/value", 1, limits)
        out.append({"key": kv.key, "value": plain})
    return out


def _pb_value(value: Any, where: str, depth: int, limits: Limits) -> dict[str, Any]:
    if depth > limits.max_depth:
        raise _deep(where, limits)
    which = value.WhichOneof("value")
    if which == "string_value":
        return {"stringValue": value.string_value}
    if which == "bool_value":
        return {"boolValue": value.bool_value}
    if which == "int_value":
        return {"intValue": str(value.int_value)}
    if which == "double_value":
        return {"doubleValue": _double(value.double_value)}
    if which == "bytes_value":
        return {"bytesValue": _b64(value.bytes_value)}
    if which == "array_value":
        return {
            "arrayValue": {
                "values": [
                    _pb_value(item, f"{where}/arrayValue/values/{n}", depth + 1, limits)
                    for n, item in enumerate(value.array_value.values)
                ]
            }
        }
    if which == "kvlist_value":
        return {
            "kvlistValue": {
                "values": [
                    {
                        "key": kv.key,
                        "value": _pb_value(
                            kv.value, f"{where}/kvlistValue/values/{n}/value", depth + 1, limits
                        ),
                    }
                    for n, kv in enumerate(value.kvlist_value.values)
                ]
            }
        }
    # unset, or string_value_strindex: a reference into the Profiles signal's string table,
    # which OTLP asks other signals' receivers to read as absent
    return {}


# ---------------------------------------------------------------------------------------
# Protobuf: checked on the parsed message, nothing built (validate)
#
# The same checks as _decode_protobuf and _finish_span, in the same order (a resource's
# attributes, then each scope's, then each span's event and link counts, its attributes,
# its events' and its links' attributes, then its ids): the first refusal is the one decode
# gives, in its words. Pointers are written only for a refusal.

_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


def _validate_protobuf(body: bytes, limits: Limits) -> Checked:
    request = _parse_protobuf(body, limits)
    out = Checked()
    trace_ids: set[bytes] = set()
    max_events, max_links = limits.max_events, limits.max_links
    index = 0
    for r, rs in enumerate(request.resource_spans):
        _pb_check_attributes(rs.resource.attributes, limits, "/resourceSpans/{}/resource", r)
        for s, ss in enumerate(rs.scope_spans):
            _pb_check_attributes(
                ss.scope.attributes, limits, "/resourceSpans/{}/scopeSpans/{}/scope", r, s
            )
            for i, span in enumerate(ss.spans):
                events, links = span.events, span.links
                if len(events) > max_events or len(links) > max_links:
                    where = f"/resourceSpans/{r}/scopeSpans/{s}/spans/{i}"
                    if len(events) > max_events:
                        raise _too_many(TOO_MANY_EVENTS, "events", where, max_events)
                    raise _too_many(TOO_MANY_LINKS, "links", where, max_links)
                _pb_check_attributes(
                    span.attributes, limits, "/resourceSpans/{}/scopeSpans/{}/spans/{}", r, s, i
                )
                for e, event in enumerate(events):
                    _pb_check_attributes(
                        event.attributes,
                        limits,
                        "/resourceSpans/{}/scopeSpans/{}/spans/{}/events/{}",
                        r,
                        s,
                        i,
                        e,
                    )
                for k, link in enumerate(links):
                    _pb_check_attributes(
                        link.attributes,
                        limits,
                        "/resourceSpans/{}/scopeSpans/{}/spans/{}/links/{}",
                        r,
                        s,
                        i,
                        k,
                    )
                problem = _pb_span_problem(span, links)
                if problem is None:
                    out.spans += 1
                    trace_ids.add(span.trace_id)
                else:
                    out.rejected.append(Rejection(index, span.span_id[:64].hex(), problem))
                index += 1
    out.trace_ids = sorted(trace_id.hex() for trace_id in trace_ids)
    return out


def _pb_check_attributes(pairs: Any, limits: Limits, where: str, *at: int) -> None:
    """_pb_attributes' checks: the count, then each value's nesting (`where`, a format of
    the indexes `at`, is the pointer of the attributes' owner)."""
    if len(pairs) > limits.max_attributes:
        raise _too_many(TOO_MANY_ATTRIBUTES, "attributes", where.format(*at), limits.max_attributes)
    if limits.max_depth < 1:  # every value is too deep: the first one says where
        if len(pairs):
            raise _deep(f"{where.format(*at)}/attributes/0/value", limits)
        return
    for a, kv in enumerate(pairs):
        value = kv.value
        which = value.WhichOneof("value")
        if which in ("array_value", "kvlist_value"):
            _pb_check_nested(value, f"{where.format(*at)}/attributes/{a}/value", 1, limits)


def _pb_check_nested(value: Any, where: str, depth: int, limits: Limits) -> None:
    """_pb_value's depth check over an arrayValue or kvlistValue at `depth` (in range)."""
    if value.WhichOneof("value") == "array_value":
        for n, item in enumerate(value.array_value.values):
            at = f"{where}/arrayValue/values/{n}"
            if depth + 1 > limits.max_depth:
                raise _deep(at, limits)
            if item.WhichOneof("value") in ("array_value", "kvlist_value"):
                _pb_check_nested(item, at, depth + 1, limits)
        return
    for n, kv in enumerate(value.kvlist_value.values):
        at = f"{where}/kvlistValue/values/{n}/value"
        if depth + 1 > limits.max_depth:
            raise _deep(at, limits)
        item = kv.value
        if item.WhichOneof("value") in ("array_value", "kvlist_value"):
            _pb_check_nested(item, at, depth + 1, limits)


def _pb_id_problem(name: str, value: bytes, zero: bytes, *, empty_ok: bool = False) -> str | None:
    """_id_problem, the all-zero id compared whole."""
    if not value and empty_ok:
        return None
    if len(value) != len(zero):
        return f"{name} is {len(value)} bytes, not {len(zero)}"
    if value == zero:
        return f"{name} is all zero, which is not a valid id"
    return None


def _pb_span_problem(span: Any, links: Any) -> str | None:
    """Why _finish_span would reject a parsed span, or None."""
    problem = (
        _pb_id_problem("trace_id", span.trace_id, _ZERO_TRACE_ID)
        or _pb_id_problem("span_id", span.span_id, _ZERO_SPAN_ID)
        or _pb_id_problem("parent_span_id", span.parent_span_id, _ZERO_SPAN_ID, empty_ok=True)
    )
    if problem is not None:
        return problem
    if not 0 <= span.kind < len(SPAN_KINDS):
        return f"kind {span.kind} is not a SpanKind"
    code = span.status.code
    if not 0 <= code < len(STATUS_CODES):
        return f"status code {code} is not a StatusCode"
    for i, link in enumerate(links):
        problem = _pb_id_problem(
            f"links[{i}].trace_id", link.trace_id, _ZERO_TRACE_ID
        ) or _pb_id_problem(f"links[{i}].span_id", link.span_id, _ZERO_SPAN_ID)
        if problem:
            return problem
    return None


# ---------------------------------------------------------------------------------------
# JSON: a strict walker over OTLP's JSON mapping

_HEX = re.compile(r"[0-9a-fA-F]*")
_INTEGER = re.compile(r"-?[0-9]{1,20}")
_BASE64 = re.compile(r"[A-Za-z0-9+/\-_]*={0,2}")
_SPECIAL_DOUBLES = frozenset({"NaN", "Infinity", "-Infinity"})
_U32 = (0, (1 << 32) - 1)
_U64 = (0, (1 << 64) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _spec(*names: str) -> dict[str, str]:
    """The JSON spellings of a message's fields -> their proto names."""
    spellings = {}
    for name in names:
        spellings[name] = name
        spellings[_camel(name)] = name
    return spellings


_REQUEST_FIELDS = _spec("resource_spans")
_RESOURCE_SPANS_FIELDS = _spec("resource", "scope_spans", "schema_url")
_RESOURCE_FIELDS = _spec("attributes", "dropped_attributes_count")
_SCOPE_SPANS_FIELDS = _spec("scope", "spans", "schema_url")
_SCOPE_FIELDS = _spec("name", "version", "attributes")
_SPAN_FIELDS = _spec(
    "trace_id",
    "span_id",
    "trace_state",
    "parent_span_id",
    "flags",
    "name",
    "kind",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "attributes",
    "dropped_attributes_count",
    "events",
    "dropped_events_count",
    "links",
    "dropped_links_count",
    "status",
)
_EVENT_FIELDS = _spec("time_unix_nano", "name", "attributes", "dropped_attributes_count")
_LINK_FIELDS = _spec(
    "trace_id", "span_id", "trace_state", "attributes", "dropped_attributes_count", "flags"
)
_STATUS_FIELDS = _spec("message", "code")
_KEY_VALUE_FIELDS = _spec("key", "value")
_ANY_VALUE_FIELDS = _spec(
    "string_value",
    "bool_value",
    "int_value",
    "double_value",
    "array_value",
    "kvlist_value",
    "bytes_value",
    "string_value_strindex",
)
_VALUES_FIELDS = _spec("values")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _wrong(where: str, expected: str, value: Any) -> OtlpError:
    return OtlpError(WRONG_TYPE, f"{where}: expected {expected}, got {_json_type(value)}")


def _fields(obj: Any, where: str, spec: dict[str, str]) -> dict[str, Any]:
    """The known fields of the JSON object `obj` by proto name (unknown ones ignored, a
    null read as absent, as protobuf's JSON mapping does)."""
    if type(obj) is not dict:
        raise _wrong(where or "the body", "an object", obj)
    found: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in obj.items():
        name = spec.get(key)
        if name is None:
            continue
        if name in spelled:
            raise OtlpError(
                BAD_JSON,
                f"{where}: the field {_camel(name)} is given twice ({spelled[name]} and {key})",
            )
        spelled[name] = key
        if value is not None:
            found[name] = value
    return found


def _list(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise _wrong(where, "an array", value)
    return value


def _str(value: Any, where: str, limits: Limits) -> str:
    if type(value) is not str:
        raise _wrong(where, "a string", value)
    if len(value) * 4 > limits.max_string_bytes:
        size = len(value.encode("utf-8"))
        if size > limits.max_string_bytes:
            raise _long(where, size, limits)
    return value


def _integer(value: Any, where: str, bounds: tuple[int, int], what: str) -> int:
    if type(value) is int:
        number = value
    elif (type(value) is float and value.is_integer()) or (
        type(value) is str and _INTEGER.fullmatch(value)
    ):
        number = int(value)
    else:
        if type(value) in (int, float, str):
            raise OtlpError(WRONG_TYPE, f"{where}: {_clip(value)} is not {what}")
        raise _wrong(where, what, value)
    if not bounds[0] <= number <= bounds[1]:
        raise OtlpError(WRONG_TYPE, f"{where}: {number} is out of range for {what}")
    return number


def _clip(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _enum(value: Any, where: str, names: tuple[str, ...]) -> int:
    if type(value) is str and not _INTEGER.fullmatch(value):
        try:
            return names.index(value)
        except ValueError:
            raise OtlpError(
                WRONG_TYPE, f"{where}: {_clip(value)} is not one of {', '.join(names)}"
            ) from None
    return _integer(value, where, _I32, "an enum number")


def _hex_id(value: Any, where: str, limits: Limits) -> bytes:
    if type(value) is not str:
        raise _wrong(where, "a string", value)
    if len(value) % 2 or not _HEX.fullmatch(value):
        raise OtlpError(
            INVALID_ID,
            f"{where}: {_clip(value)} is not an id in hex (OTLP/JSON spells trace and span ids "
            "in hex, not base64)",
        )
    if len(value) // 2 > limits.max_string_bytes:  # its bytes, as on the protobuf wire
        raise _long(where, len(value) // 2, limits)
    return bytes.fromhex(value)


def _json_bytes(value: Any, where: str, limits: Limits) -> str:
    if type(value) is not str:
        raise _wrong(where, "a string", value)
    unpadded = value.rstrip("=")
    if not _BASE64.fullmatch(value) or len(unpadded) % 4 == 1:
        raise OtlpError(WRONG_TYPE, f"{where}: {_clip(value)} is not base64")
    size = len(unpadded) * 3 // 4  # the bytes it decodes to, as on the protobuf wire
    if size > limits.max_string_bytes:
        raise _long(where, size, limits)
    unpadded = unpadded.replace("-", "+").replace("_", "/")
    try:
        data = base64.b64decode(unpadded + "=" * (-len(unpadded) % 4), validate=True)
    except binascii.Error:
        raise OtlpError(WRONG_TYPE, f"{where}: {_clip(value)} is not base64") from None
    return _b64(data)


def _json_double(value: Any, where: str) -> float | str:
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            raise OtlpError(
                WRONG_TYPE, f"{where}: {_clip(value)} is out of range for a double"
            ) from None
    if type(value) is float:
        return value
    if type(value) is str:
        if value in _SPECIAL_DOUBLES:
            return value
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and value.strip() == value and "_" not in value:
            return number
        raise OtlpError(WRONG_TYPE, f"{where}: {_clip(value)} is not a double")
    raise _wrong(where, "a number", value)


def _decode_json(body: bytes, limits: Limits) -> Decoded:
    where = "the body"
    try:
        jsonstrict.check_container_count(body, where=where, max_containers=limits.max_values)
        jsonstrict.check_key_count(
            body,
            where=where,
            max_keys=limits.max_values,
            max_object_keys=min(limits.max_values, jsonstrict.MAX_OBJECT_KEYS),
        )
    except ReplayError as exc:
        raise OtlpError(TOO_MANY_VALUES, exc.message) from None
    _check_json_depth(body, limits)
    try:
        request = jsonstrict.loads_strict(body, where=where)
    except ReplayError as exc:
        raise OtlpError(BAD_JSON, exc.message) from None
    fields = _fields(request, "", _REQUEST_FIELDS)
    out = Decoded()
    index = 0
    all_spans = 0
    resource_spans = _list(fields.get("resource_spans", []), "/resourceSpans")
    for r, rs_obj in enumerate(resource_spans):
        where_r = f"/resourceSpans/{r}"
        rs = _fields(rs_obj, where_r, _RESOURCE_SPANS_FIELDS)
        res = _fields(rs.get("resource", {}), f"{where_r}/resource", _RESOURCE_FIELDS)
        resource = {
            "attributes": _json_attributes(res, f"{where_r}/resource", limits),
            "dropped_attributes_count": _u32(
                res, "dropped_attributes_count", f"{where_r}/resource"
            ),
        }
        rs_schema = _str(rs.get("schema_url", ""), f"{where_r}/schemaUrl", limits)
        scope_spans = _list(rs.get("scope_spans", []), f"{where_r}/scopeSpans")
        for s, ss_obj in enumerate(scope_spans):
            where_s = f"{where_r}/scopeSpans/{s}"
            ss = _fields(ss_obj, where_s, _SCOPE_SPANS_FIELDS)
            sc = _fields(ss.get("scope", {}), f"{where_s}/scope", _SCOPE_FIELDS)
            scope = {
                "name": _str(sc.get("name", ""), f"{where_s}/scope/name", limits),
                "version": _str(sc.get("version", ""), f"{where_s}/scope/version", limits),
                "attributes": _json_attributes(sc, f"{where_s}/scope", limits),
            }
            schema_url = _str(ss.get("schema_url", ""), f"{where_s}/schemaUrl", limits)
            spans = _list(ss.get("spans", []), f"{where_s}/spans")
            all_spans += len(spans)
            if all_spans > limits.max_spans:
                raise _too_many(TOO_MANY_SPANS, "spans", "the request", limits.max_spans)
            for i, span_obj in enumerate(spans):
                raw = _json_span(span_obj, f"{where_s}/spans/{i}", limits)
                raw["resource"] = resource
                raw["scope"] = scope
                raw["schema_url"] = schema_url or rs_schema
                _accept(out, raw, index)
                index += 1
    return out


def _check_json_depth(body: bytes, limits: Limits) -> None:
    """Refuse a JSON text nested deeper than the request can be, before parsing it (a
    parser would recurse that deep), with the JSON pointer of the first container too
    deep."""
    limit = limits.max_json_depth
    if jsonstrict.text_shape_is_bounded(body, max_depth=limit, max_string=len(body) + 1):
        return
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return  # the strict decoder words it
    found = jsonstrict.locate_too_deep(text, 0, limit)
    if found is not None:
        raise OtlpError(
            TOO_DEEP,
            f"the JSON text nests deeper than {limit} levels at {found[1] or '/'}; refused "
            "before parsing it",
        )


def _u32(obj: dict[str, Any], name: str, where: str) -> int:
    if name not in obj:
        return 0
    return _integer(obj[name], f"{where}/{_camel(name)}", _U32, "an unsigned 32-bit integer")


def _u64(obj: dict[str, Any], name: str, where: str) -> str:
    if name not in obj:
        return "0"
    return str(_integer(obj[name], f"{where}/{_camel(name)}", _U64, "an unsigned 64-bit integer"))


def _json_span(obj: Any, where: str, limits: Limits) -> dict[str, Any]:
    span = _fields(obj, where, _SPAN_FIELDS)
    events = _list(span.get("events", []), f"{where}/events")
    if len(events) > limits.max_events:
        raise _too_many(TOO_MANY_EVENTS, "events", where, limits.max_events)
    links = _list(span.get("links", []), f"{where}/links")
    if len(links) > limits.max_links:
        raise _too_many(TOO_MANY_LINKS, "links", where, limits.max_links)
    status = _fields(span.get("status", {}), f"{where}/status", _STATUS_FIELDS)
    return {
        "trace_id": _hex_id(span.get("trace_id", ""), f"{where}/traceId", limits),
        "span_id": _hex_id(span.get("span_id", ""), f"{where}/spanId", limits),
        "parent_span_id": _hex_id(span.get("parent_span_id", ""), f"{where}/parentSpanId", limits),
        "trace_state": _str(span.get("trace_state", ""), f"{where}/traceState", limits),
        "flags": _u32(span, "flags", where),
        "name": _str(span.get("name", ""), f"{where}/name", limits),
        "kind": _enum(span.get("kind", 0), f"{where}/kind", SPAN_KINDS),
        "start_time_unix_nano": _u64(span, "start_time_unix_nano", where),
        "end_time_unix_nano": _u64(span, "end_time_unix_nano", where),
        "attributes": _json_attributes(span, where, limits),
        "dropped_attributes_count": _u32(span, "dropped_attributes_count", where),
        "events": [
            _json_event(event, f"{where}/events/{e}", limits) for e, event in enumerate(events)
        ],
        "dropped_events_count": _u32(span, "dropped_events_count", where),
        "links": [_json_link(link, f"{where}/links/{k}", limits) for k, link in enumerate(links)],
        "dropped_links_count": _u32(span, "dropped_links_count", where),
        "status": {
            "code": _enum(status.get("code", 0), f"{where}/status/code", STATUS_CODES),
            "message": _str(status.get("message", ""), f"{where}/status/message", limits),
        },
    }


def _json_event(obj: Any, where: str, limits: Limits) -> dict[str, Any]:
    event = _fields(obj, where, _EVENT_FIELDS)
    return {
        "time_unix_nano": _u64(event, "time_unix_nano", where),
        "name": _str(event.get("name", ""), f"{where}/name", limits),
        "attributes": _json_attributes(event, where, limits),
        "dropped_attributes_count": _u32(event, "dropped_attributes_count", where),
    }


def _json_link(obj: Any, where: str, limits: Limits) -> dict[str, Any]:
    link = _fields(obj, where, _LINK_FIELDS)
    return {
        "trace_id": _hex_id(link.get("trace_id", ""), f"{where}/traceId", limits),
        "span_id": _hex_id(link.get("span_id", ""), f"{where}/spanId", limits),
        "trace_state": _str(link.get("trace_state", ""), f"{where}/traceState", limits),
        "attributes": _json_attributes(link, where, limits),
        "dropped_attributes_count": _u32(link, "dropped_attributes_count", where),
        "flags": _u32(link, "flags", where),
    }


def _json_attributes(obj: dict[str, Any], where: str, limits: Limits) -> list[dict[str, Any]]:
    pairs = _list(obj.get("attributes", []), f"{where}/attributes")
    if len(pairs) > limits.max_attributes:
        raise _too_many(TOO_MANY_ATTRIBUTES, "attributes", where, limits.max_attributes)
    return [_json_pair(pair, f"{where}/attributes/{a}", 1, limits) for a, pair in enumerate(pairs)]


def _json_pair(obj: Any, where: str, depth: int, limits: Limits) -> dict[str, Any]:
    pair = _fields(obj, where, _KEY_VALUE_FIELDS)
    return {
        "key": _str(pair.get("key", ""), f"{where}/key", limits),
        "value": _json_value(pair.get("value", {}), f"{where}/value", depth, limits),
    }


def _json_value(obj: Any, where: str, depth: int, limits: Limits) -> dict[str, Any]:
    if depth > limits.max_depth:
        raise _deep(where, limits)
    value = _fields(obj, where, _ANY_VALUE_FIELDS)
    value.pop("string_value_strindex", None)  # the Profiles signal's: read as absent
    if len(value) > 1:
        names = ", ".join(sorted(_camel(name) for name in value))
        raise OtlpError(WRONG_TYPE, f"{where}: an AnyValue holds one value, not {names}")
    if not value:
        return {}
    ((name, item),) = value.items()
    at = f"{where}/{_camel(name)}"
    if name == "string_value":
        return {"stringValue": _str(item, at, limits)}
    if name == "bool_value":
        if type(item) is not bool:
            raise _wrong(at, "a boolean", item)
        return {"boolValue": item}
    if name == "int_value":
        return {"intValue": str(_integer(item, at, _I64, "a signed 64-bit integer"))}
    if name == "double_value":
        return {"doubleValue": _json_double(item, at)}
    if name == "bytes_value":
        return {"bytesValue": _json_bytes(item, at, limits)}
    values = _list(_fields(item, at, _VALUES_FIELDS).get("values", []), f"{at}/values")
    if name == "array_value":
        return {
            "arrayValue": {
                "values": [
                    _json_value(element, f"{at}/values/{n}", depth + 1, limits)
                    for n, element in enumerate(values)
                ]
            }
        }
    return {
        "kvlistValue": {
            "values": [
                _json_pair(pair, f"{at}/values/{n}", depth + 1, limits)
                for n, pair in enumerate(values)
            ]
        }
    }


# ---------------------------------------------------------------------------------------
# A span record's RFC 8785 (JCS) bytes, fast where orjson writes them exactly

#: keys are sorted by UTF-16 code units in JCS, by code points (UTF-8 bytes) in orjson: the
#: two orders differ only between a character of U+E000..U+FFFF (UTF-8 lead byte EE or EF)
#: and one past U+FFFF (lead byte F0 to F4), so a text holding both goes to the exact path
_HIGH_BMP = re.compile(rb"[\xee\xef]")
_ASTRAL = re.compile(rb"[\xf0-\xf4]")
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def jcs_bytes(value: Any) -> bytes | None:
    """The RFC 8785 (JCS) bytes of a JSON value as ``json.loads`` and
    ``mapping.span_record`` give them (dicts with str keys, lists, tuples, str, int, float,
    bool, None), or None when the fast path cannot vouch for them: then call
    ``core.canonical.jcs``, which writes (or refuses) them exactly.

    orjson, keys sorted, writes JCS's bytes (no whitespace, raw UTF-8, the same escapes,
    lower-case ``\\u00xx``) but for three things, each sent to the exact path: a float
    orjson writes otherwise than ECMAScript (1.0 and 1e+16 where ECMAScript writes 1 and
    10000000000000000: every float is compared with ``es_number_to_string``), a NaN or an
    infinity (orjson writes null), and keys that may sort otherwise by UTF-16 code units
    than by code points. What orjson refuses (a lone surrogate, a non-str key, an integer
    past 2**53 - 1, a type JSON has not) goes there too. About twice as fast as the
    pure-Python canonicaliser on GenAI spans; tests/otel/test_span_digest.py holds the two
    to the same bytes."""
    try:
        data: bytes = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except (TypeError, ValueError, RecursionError):  # orjson.JSONEncodeError is a TypeError
        return None
    if not data.isascii() and _HIGH_BMP.search(data) and _ASTRAL.search(data):
        return None
    if not _floats_as_written(value):
        return None
    return data


def _floats_as_written(value: Any) -> bool:
    """Every float in ``value`` is finite and orjson writes it as ECMAScript does."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            stack.extend(node.values())
        elif kind is list or kind is tuple:
            stack.extend(node)
        elif kind is float:
            if not _float_as_written(node):
                return False
        elif kind is not str and isinstance(node, dict | list | tuple | float):  # a subclass
            return _floats_as_written(_plain(node)) and _floats_as_written(stack)
    return True


def _float_as_written(number: float) -> bool:
    if not math.isfinite(number):
        return False
    return orjson.dumps(number) == es_number_to_string(number).encode()


def _plain(node: Any) -> Any:
    """A subclass of dict, list, tuple or float as its base type's value."""
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list | tuple):
        return list(node)
    return float(node)


# ---------------------------------------------------------------------------------------
# The response, and gzip


def encode_response(content_type: str, rejected_count: int, message: str) -> bytes:
    """The ``ExportTraceServiceResponse`` body in the request's encoding: empty when all
    was accepted, with ``partial_success`` (the spans rejected, and why) otherwise, or
    when `message` carries a warning."""
    kind = media_type(content_type)
    response = ExportTraceServiceResponse()
    if rejected_count or message:
        response.partial_success.rejected_spans = rejected_count
        response.partial_success.error_message = message
    if kind == PROTOBUF:
        return response.SerializeToString()
    if not (rejected_count or message):
        return b"{}"
    partial: dict[str, Any] = {}
    if rejected_count:
        partial["rejectedSpans"] = str(rejected_count)  # an int64: a string in OTLP/JSON
    if message:
        partial["errorMessage"] = message
    return json.dumps({"partialSuccess": partial}, ensure_ascii=False).encode("utf-8")


_GZIP_MAGIC = b"\x1f\x8b"
#: gzip members one body may hold (an exporter writes one; each costs a new inflater)
MAX_GZIP_MEMBERS = 64
#: the input fed to the inflater at a time (what it copies of the input after a member's end
#: is at most this much, however long the body)
_GZIP_CHUNK = 1 << 16


def gunzip_bounded(data: bytes, max_bytes: int) -> bytes:
    """The bytes a gzip body inflates to, refusing more than `max_bytes` without ever
    inflating past `max_bytes` + 1 (BODY_TOO_LARGE: a gzip bomb costs no more memory than
    its limit), and a body that is not gzip, is corrupt or truncated, or has anything after
    its last member but another member (BAD_GZIP). Several members in a row are one body
    (RFC 1952), up to MAX_GZIP_MEMBERS."""
    if not data:
        raise OtlpError(BAD_GZIP, "the gzip body is empty")
    view = memoryview(data)
    pieces: list[bytes] = []
    total = pos = members = 0
    while pos < len(data):
        if view[pos : pos + 2] != _GZIP_MAGIC:
            raise OtlpError(
                BAD_GZIP, "bytes after the gzip data" if pos else "the body is not gzip"
            )
        members += 1
        if members > MAX_GZIP_MEMBERS:
            raise OtlpError(BAD_GZIP, f"more than {MAX_GZIP_MEMBERS} gzip members")
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while not inflater.eof:
            if pos >= len(data):
                raise OtlpError(BAD_GZIP, "the gzip body is truncated")
            chunk = view[pos : pos + _GZIP_CHUNK]
            try:
                piece = inflater.decompress(chunk, max_bytes - total + 1)
            except zlib.error as exc:
                raise OtlpError(BAD_GZIP, f"the gzip body is corrupt: {exc}") from None
            total += len(piece)
            if total > max_bytes:
                raise OtlpError(
                    BODY_TOO_LARGE, f"the gzip body inflates to more than {max_bytes} bytes"
                )
            pieces.append(piece)
            # short of its output limit, it read the whole chunk, or up to the member's end
            pos += len(chunk) - len(inflater.unused_data) - len(inflater.unconsumed_tail)
    return b"".join(pieces)
