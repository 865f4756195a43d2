"""The sealed OpenTelemetry GenAI trace record: the spans of one trace, normalised
(``mapping.span_record``), ordered and sealed; its canonical bytes and digest; the strict
parse back.

A record is one JSON object (its schema version ``otel_genai``, 1)::

    {"otel_genai": 1, "trace_id": "<32 hex>", "version": n, "previous": null | "sha256:..",
     "spans": [span record, ...], "conflicts": [{"span_id", "kept", "other"}],
     "content": "full" | "partial" | "none",
     "seal": {"profile": "jcs", "digest": "sha256:..", "sealed_at": "<ISO-8601 UTC>",
              "reason": "quiet" | "manual" | "orphan" | "upload"}}

``seal.digest`` is ``sha256:`` over the RFC 8785 (JCS) bytes of the record without its
``seal``; the file is the JCS bytes of the whole record. JCS sorts an object's members, so the
file's first key is ``conflicts``, not ``otel_genai``: detection goes by the keys (``otel_genai``
is the first key only this format has).

:func:`seal` builds a record (and checks it as :func:`parse` would, so a sealed record always
parses back); :func:`parse` reads one strictly, every field's type and shape, and refuses with
``MALFORMED_TRACE`` naming the JSON pointer (``UNSUPPORTED_SCHEMA_VERSION`` for a newer
``otel_genai``); :func:`assemble_export` reads an uploaded OTLP JSON export (the OTLP file
exporter's or the collector's ``file`` exporter's output) into the spans of its one trace.

Pure: no Django.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import errors
from core.canonical import CanonicalError, jcs, sha256_prefixed
from core.errors import ReplayError
from core.formats.jsonstrict import check_shape, loads_document
from core.formats.protocol import json_words
from core.replay.diff import pointer_join

FORMAT = "otel-genai"
SCHEMA_VERSION = 1
PROFILE = "jcs"
#: the largest record file (and OTLP export file) read: a sealed agent run of 50,000 spans as
#: the instrumentations record them without content is about 97 MB (about 1,900 bytes, 50
#: keys and 40 objects and arrays a span), so its keys and containers are bounded above the
#: JSON reader's defaults too (a record of 128 MiB parses in about 1.6 GB: docs/otel.md)
MAX_RECORD_BYTES = 128 * 1024**2
MAX_RECORD_KEYS = 6_000_000
MAX_RECORD_CONTAINERS = 3_000_000
#: nesting: a span's attributes hold OTLP AnyValues nested up to ``otlp.Limits.max_depth``
#: (32) levels of four JSON levels each, under the record's own six
MAX_DEPTH = 160
MAX_STRING = 16 * 1024**2

#: why a version was sealed: quiet (its root arrived, then nothing for REPLAY_OTEL_SEAL_AFTER_S),
#: manual (`otel seal`, the page's button), orphan (no root after REPLAY_OTEL_SEAL_ORPHAN_AFTER_S),
#: upload (an OTLP export file uploaded whole)
REASONS = ("quiet", "manual", "orphan", "upload")
CONTENT = ("full", "partial", "none")
KINDS = ("internal", "server", "client", "producer", "consumer", "unspecified")
STATUS_CODES = ("unset", "ok", "error")
DIALECTS = ("gen_ai", "openinference", "openllmetry")
#: the operations of a model call (``gen_ai.operation.name``)
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION = "execute_tool"
AGENT_OPERATION = "invoke_agent"

#: a record's fields, in the order :func:`seal` writes them (JCS sorts them in the file)
RECORD_FIELDS = (
    "otel_genai",
    "trace_id",
    "version",
    "previous",
    "spans",
    "conflicts",
    "content",
    "seal",
)
SEAL_FIELDS = ("profile", "digest", "sealed_at", "reason")
CONFLICT_FIELDS = ("span_id", "kept", "other")
#: a normalised span record's fields (``mapping.span_record``)
SPAN_FIELDS = (
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "status",
    "service",
    "scope",
    "schema_url",
    "trace_state",
    "flags",
    "dialect",
    "operation",
    "provider",
    "request_model",
    "response_model",
    "response_id",
    "request_parameters",
    "conversation_id",
    "agent_name",
    "input_messages",
    "output_messages",
    "system_instructions",
    "tool_definitions",
    "tool",
    "usage",
    "finish_reasons",
    "attributes",
    "events",
    "links",
    "dropped",
    "resource_attributes",
)
TOOL_FIELDS = ("name", "call_id", "arguments", "result")
USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens")
DROPPED_FIELDS = ("attributes", "events", "links")
EVENT_FIELDS = ("time_unix_nano", "name", "attributes", "dropped_attributes_count")
LINK_FIELDS = (
    "trace_id",
    "span_id",
    "trace_state",
    "attributes",
    "dropped_attributes_count",
    "flags",
)
#: the one key of an OTLP AnyValue ({} is the empty value)
ANY_VALUE_KEYS = (
    "stringValue",
    "boolValue",
    "intValue",
    "doubleValue",
    "bytesValue",
    "arrayValue",
    "kvlistValue",
)

_TRACE_ID = re.compile(r"[0-9a-f]{32}\Z")
_SPAN_ID = re.compile(r"[0-9a-f]{16}\Z")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")
_UNSIGNED = re.compile(r"(?:0|[1-9][0-9]{0,19})\Z")
_SIGNED = re.compile(r"-?(?:0|[1-9][0-9]{0,18})\Z")
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z")
_SEALED_AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z\Z")
_U64 = 2**64
_I64 = 2**63
_DOUBLE_WORDS = ("NaN", "Infinity", "-Infinity")


@dataclass(frozen=True)
class Record:
    """A parsed (or just sealed) trace record.

    ``document``: the record as read; ``digest``: ``sha256:`` over the JCS bytes of the
    record without its ``seal``, recomputed when it was read (the audit's ``seal`` check
    compares it with ``seal.digest``); ``data``: the bytes it was read from, None for one
    sealed here; ``source``: ``"record"`` for a sealed record file, ``"otlp-export"`` for an
    OTLP JSON export sealed when it was read (``reason`` ``upload``).
    """

    document: dict[str, Any]
    digest: str
    data: bytes | None = None
    source: str = "record"
    #: the span records by index, for lookups (built once)
    _by_id: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def trace_id(self) -> str:
        return self.document["trace_id"]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return self.document["spans"]

    @property
    def content(self) -> str:
        return self.document["content"]

    @property
    def seal(self) -> dict[str, Any]:
        return self.document["seal"]

    def index_of(self, span_id: str) -> int | None:
        """The index of the (first) span with this id, or None."""
        if not self._by_id:
            for i, span in enumerate(self.spans):
                self._by_id.setdefault(span["span_id"], i)
        return self._by_id.get(span_id)


# --- what a span is --------------------------------------------------------------------------


def attribute(span: Mapping[str, Any], key: str) -> Any:
    """The plain value of a span's attribute ``key`` (a string, bool, int, float, or the
    AnyValue itself for an array, a key-value list or bytes), None when it has none."""
    for kv in span.get("attributes") or ():
        if kv.get("key") == key:
            value = kv.get("value") or {}
            if "stringValue" in value:
                return value["stringValue"]
            if "boolValue" in value:
                return value["boolValue"]
            if "intValue" in value:
                return int(value["intValue"])
            if "doubleValue" in value:
                return value["doubleValue"]
            return value or None
    return None


def _openinference_kind(span: Mapping[str, Any]) -> str | None:
    if span.get("dialect") != "openinference":
        return None
    kind = attribute(span, "openinference.span.kind")
    return kind.upper() if isinstance(kind, str) else None


def is_model_call(span: Mapping[str, Any]) -> bool:
    """A span of one call to a model: operation chat, text_completion or generate_content,
    or an OpenInference LLM span."""
    return span.get("operation") in MODEL_OPERATIONS or _openinference_kind(span) == "LLM"


def is_tool_call(span: Mapping[str, Any]) -> bool:
    """A span of one tool's execution: operation execute_tool, or an OpenInference TOOL
    span."""
    return span.get("operation") == TOOL_OPERATION or _openinference_kind(span) == "TOOL"


def is_agent(span: Mapping[str, Any]) -> bool:
    """A span of one agent's run: operation invoke_agent, or an OpenInference AGENT span."""
    return span.get("operation") == AGENT_OPERATION or _openinference_kind(span) == "AGENT"


def has_content(span: Mapping[str, Any]) -> bool:
    """Whether a span carries message content (input or output messages)."""
    return span.get("input_messages") is not None or span.get("output_messages") is not None


def content_of(spans: Iterable[Mapping[str, Any]]) -> str:
    """``"full"`` when every model-call span carries messages (or there is none), ``"none"``
    when none does, else ``"partial"``."""
    carried = [has_content(s) for s in spans if is_model_call(s)]
    if all(carried):
        return "full"
    return "none" if not any(carried) else "partial"


def span_order(span: Mapping[str, Any]) -> tuple[int, str]:
    """A record's span order: start time (as an integer), then span id."""
    return int(span["start_time_unix_nano"]), span["span_id"]


def root_index(record: Record) -> int | None:
    """The index of the (first) root span, or None."""
    for i, span in enumerate(record.spans):
        if span["parent_span_id"] is None:
            return i
    return None


def utc_iso(when: datetime.datetime) -> str:
    """An aware datetime as a seal's ``sealed_at``: ISO-8601 UTC, milliseconds, ``Z``."""
    if when.tzinfo is None:
        raise ValueError("sealed_at: a naive datetime has no time zone")
    text = when.astimezone(datetime.UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def nanos_iso(nanos: str | int) -> str | None:
    """A ``*_unix_nano`` time as ISO-8601 UTC (microseconds), None when out of range."""
    seconds, rest = divmod(int(nanos), 10**9)
    try:
        when = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    when += datetime.timedelta(microseconds=rest // 1000)
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


# --- seal ------------------------------------------------------------------------------------


def digest_of(body: Mapping[str, Any]) -> str:
    """``sha256:`` over the JCS bytes of a record without its seal. A value JCS cannot
    write (an integer beyond 2^53, a lone surrogate) is ``MALFORMED_TRACE``."""
    try:
        return sha256_prefixed(jcs({k: v for k, v in body.items() if k != "seal"}))
    except CanonicalError as exc:
        raise ReplayError(
            errors.MALFORMED_TRACE, f"otel record: not canonicalisable (RFC 8785): {exc}"
        ) from None


def seal(
    trace_id: str,
    spans: Sequence[Mapping[str, Any]],
    *,
    version: int = 1,
    previous: str | None = None,
    conflicts: Iterable[Mapping[str, Any]] = (),
    sealed_at: str,
    reason: str,
) -> tuple[dict[str, Any], bytes, str]:
    """Seal the span records of one trace: ``(record, its JCS bytes, its seal digest)``.

    The spans are ordered by :func:`span_order`, the conflicts by span id; ``content`` says
    whether the model-call spans carry messages (:func:`content_of`). The record is checked
    as :func:`parse` checks one, its limits included (``MALFORMED_TRACE`` naming the
    pointer), so what is sealed always parses back."""
    ordered = sorted((dict(s) for s in spans), key=_safe_order)
    record: dict[str, Any] = {
        "otel_genai": SCHEMA_VERSION,
        "trace_id": trace_id,
        "version": version,
        "previous": previous,
        "spans": ordered,
        "conflicts": sorted(
            (dict(c) for c in conflicts),
            key=lambda c: (str(c.get("span_id")), str(c.get("kept")), str(c.get("other"))),
        ),
        "content": content_of(s for s in ordered if isinstance(s, Mapping)),
        "seal": {"profile": PROFILE, "digest": "", "sealed_at": sealed_at, "reason": reason},
    }
    digest = digest_of(record)
    record["seal"]["digest"] = digest
    check_record(record)
    check_shape(record, where="otel record", max_depth=MAX_DEPTH, max_string=MAX_STRING)
    data = jcs(record)
    if len(data) > MAX_RECORD_BYTES:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"otel record: {len(data)} bytes sealed, more than a record may hold "
            f"({MAX_RECORD_BYTES} bytes)",
        )
    return record, data, digest


def _safe_order(span: Mapping[str, Any]) -> tuple[int, str]:
    """:func:`span_order`, for spans not yet checked (a bad time sorts first; the check
    that follows names it)."""
    start = span.get("start_time_unix_nano")
    number = int(start) if isinstance(start, str) and _UNSIGNED.match(start) else -1
    return number, str(span.get("span_id"))


# --- parse -----------------------------------------------------------------------------------


def parse(data: bytes, *, where: str = "otel record") -> Record:
    """A sealed record from its bytes: strict JSON (duplicate keys, depth and size bounded),
    every field checked. Raises ``ReplayError``: ``UNSUPPORTED_SCHEMA_VERSION`` for an
    ``otel_genai`` newer than this console reads, else ``MALFORMED_TRACE`` naming the JSON
    pointer of the first bad field."""
    if len(data) > MAX_RECORD_BYTES:
        raise ReplayError(errors.MALFORMED_TRACE, f"{where}: larger than {MAX_RECORD_BYTES} bytes")
    doc, bounded = loads_document(
        data,
        where=where,
        max_depth=MAX_DEPTH,
        max_string=MAX_STRING,
        max_keys=MAX_RECORD_KEYS,
        max_containers=MAX_RECORD_CONTAINERS,
    )
    if not bounded:
        check_shape(doc, where=where, max_depth=MAX_DEPTH, max_string=MAX_STRING)
    check_record(doc, where=where)
    return Record(doc, digest_of(doc), data)


def check_record(doc: Any, *, where: str = "otel record") -> None:
    """Every field of a record, in order; the first bad one is refused, by its pointer."""
    c = _Checker(where)
    if not isinstance(doc, dict):
        raise c.bad("", f"expected a JSON object, got {json_words(doc)}")
    version = doc.get("otel_genai")
    if "otel_genai" not in doc:
        raise c.bad(
            "/otel_genai",
            "required: an OpenTelemetry GenAI trace record has its schema version here",
        )
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise c.bad("/otel_genai", f"expected a positive integer, got {json_words(version)}")
    if version > SCHEMA_VERSION:
        raise ReplayError(
            errors.UNSUPPORTED_SCHEMA_VERSION,
            f"{where}: otel_genai {version} is newer than this console reads "
            f"(it reads {SCHEMA_VERSION})",
            broke_at="/otel_genai",
            expected=str(SCHEMA_VERSION),
            observed=str(version),
        )
    c.fields(doc, "", RECORD_FIELDS, "a trace record")
    c.hex_id(doc["trace_id"], "/trace_id", _TRACE_ID, "a trace id: 32 lower-case hex digits")
    if not _is_int(doc["version"]) or doc["version"] < 1:
        raise c.bad("/version", f"expected an integer >= 1, got {json_words(doc['version'])}")
    previous = doc["previous"]
    if previous is not None and not (isinstance(previous, str) and _DIGEST.match(previous)):
        raise c.bad("/previous", f"expected null or sha256:<64 hex>, got {json_words(previous)}")
    if doc["version"] == 1 and previous is not None:
        raise c.bad("/previous", "version 1 has no previous version: expected null")
    if doc["version"] > 1 and previous is None:
        raise c.bad("/previous", f"version {doc['version']} names its previous version's digest")
    spans = c.array(doc["spans"], "/spans")
    if not spans:
        raise c.bad("/spans", "a trace record holds at least one span")
    for i, span in enumerate(spans):
        c.span(span, f"/spans/{i}")
    for i, conflict in enumerate(c.array(doc["conflicts"], "/conflicts")):
        at = f"/conflicts/{i}"
        c.fields(conflict, at, CONFLICT_FIELDS, "a conflict")
        c.hex_id(conflict["span_id"], f"{at}/span_id", _SPAN_ID, "a span id: 16 lower-case hex")
        c.digest(conflict["kept"], f"{at}/kept")
        c.digest(conflict["other"], f"{at}/other")
    c.choice(doc["content"], "/content", CONTENT)
    c.fields(doc["seal"], "/seal", SEAL_FIELDS, "a seal")
    seal_doc = doc["seal"]
    c.choice(seal_doc["profile"], "/seal/profile", (PROFILE,))
    c.digest(seal_doc["digest"], "/seal/digest")
    sealed_at = seal_doc["sealed_at"]
    if not (isinstance(sealed_at, str) and _SEALED_AT.match(sealed_at)):
        raise c.bad(
            "/seal/sealed_at",
            f"expected an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.fff]Z), got "
            f"{json_words(sealed_at)}",
        )
    c.choice(seal_doc["reason"], "/seal/reason", REASONS)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    """The field checks of :func:`check_record`, each refusal naming its pointer."""

    def __init__(self, where: str) -> None:
        self.where = where

    def bad(self, pointer: str, what: str) -> ReplayError:
        return ReplayError(
            errors.MALFORMED_TRACE,
            f"{self.where} at {pointer or '/'}: {what}",
            broke_at=pointer or "/",
        )

    def fields(self, value: Any, at: str, names: tuple[str, ...], noun: str) -> None:
        if not isinstance(value, dict):
            raise self.bad(at, f"expected {noun} (a JSON object), got {json_words(value)}")
        for name in names:
            if name not in value:
                raise self.bad(f"{at}/{name}", f"required: a field of {noun}")
        for name in value:
            if name not in names:
                raise self.bad(at + pointer_join([name]), f"not a field of {noun}")

    def array(self, value: Any, at: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.bad(at, f"expected an array, got {json_words(value)}")
        return value

    def string(self, value: Any, at: str, *, nullable: bool = False) -> None:
        if isinstance(value, str) or (nullable and value is None):
            return
        expected = "a string or null" if nullable else "a string"
        raise self.bad(at, f"expected {expected}, got {json_words(value)}")

    def count(self, value: Any, at: str, *, nullable: bool = False) -> None:
        if (nullable and value is None) or (_is_int(value) and 0 <= value <= 2**53):
            return
        expected = "a count (an integer >= 0)" + (" or null" if nullable else "")
        raise self.bad(at, f"expected {expected}, got {json_words(value)}")

    def choice(self, value: Any, at: str, allowed: tuple[str, ...], *, nullable=False) -> None:
        if (value in allowed and isinstance(value, str)) or (nullable and value is None):
            return
        words = ", ".join(allowed) + (", or null" if nullable else "")
        raise self.bad(at, f"expected one of {words}; got {json_words(value)}")

    def hex_id(self, value: Any, at: str, pattern: re.Pattern[str], what: str) -> None:
        if not (isinstance(value, str) and pattern.match(value)):
            raise self.bad(at, f"expected {what}, got {json_words(value)}")
        if not value.strip("0"):
            raise self.bad(at, "an all-zero id is not a valid OpenTelemetry id")

    def digest(self, value: Any, at: str) -> None:
        if not (isinstance(value, str) and _DIGEST.match(value)):
            raise self.bad(at, f"expected sha256:<64 lower-case hex>, got {json_words(value)}")

    def nanos(self, value: Any, at: str) -> None:
        if not (isinstance(value, str) and _UNSIGNED.match(value) and int(value) < _U64):
            raise self.bad(
                at,
                "expected a time in nanoseconds since the epoch as a decimal string (an "
                f"unsigned 64-bit integer), got {json_words(value)}",
            )

    def span(self, span: Any, at: str) -> None:
        c = self
        c.fields(span, at, SPAN_FIELDS, "a span record")
        c.hex_id(span["span_id"], f"{at}/span_id", _SPAN_ID, "a span id: 16 lower-case hex")
        if span["parent_span_id"] is not None:
            c.hex_id(
                span["parent_span_id"],
                f"{at}/parent_span_id",
                _SPAN_ID,
                "null (a root) or a span id: 16 lower-case hex",
            )
        c.string(span["name"], f"{at}/name")
        c.choice(span["kind"], f"{at}/kind", KINDS)
        c.nanos(span["start_time_unix_nano"], f"{at}/start_time_unix_nano")
        c.nanos(span["end_time_unix_nano"], f"{at}/end_time_unix_nano")
        c.fields(span["status"], f"{at}/status", ("code", "message"), "a span status")
        c.choice(span["status"]["code"], f"{at}/status/code", STATUS_CODES)
        c.string(span["status"]["message"], f"{at}/status/message")
        c.string(span["service"], f"{at}/service", nullable=True)
        c.fields(
            span["scope"],
            f"{at}/scope",
            ("name", "version", "attributes"),
            "an instrumentation scope",
        )
        c.string(span["scope"]["name"], f"{at}/scope/name")
        c.string(span["scope"]["version"], f"{at}/scope/version")
        c.attributes(span["scope"]["attributes"], f"{at}/scope/attributes")
        c.string(span["schema_url"], f"{at}/schema_url")
        c.string(span["trace_state"], f"{at}/trace_state")
        c.count(span["flags"], f"{at}/flags")
        c.choice(span["dialect"], f"{at}/dialect", DIALECTS, nullable=True)
        for name in (
            "operation",
            "provider",
            "request_model",
            "response_model",
            "response_id",
            "conversation_id",
            "agent_name",
        ):
            c.string(span[name], f"{at}/{name}", nullable=True)
        params = span["request_parameters"]
        if not isinstance(params, dict):
            raise c.bad(
                f"{at}/request_parameters",
                f"expected a JSON object of parameter names to values, got {json_words(params)}",
            )
        for name in ("input_messages", "output_messages", "system_instructions"):
            value = span[name]
            if value is not None:
                c.array(value, f"{at}/{name}")  # their content: the audit's messages_schema
        definitions = span["tool_definitions"]
        if definitions is not None:
            for j, definition in enumerate(c.array(definitions, f"{at}/tool_definitions")):
                if not isinstance(definition, dict):
                    raise c.bad(
                        f"{at}/tool_definitions/{j}",
                        f"expected a tool definition (a JSON object), got {json_words(definition)}",
                    )
        tool = span["tool"]
        if tool is not None:
            c.fields(tool, f"{at}/tool", TOOL_FIELDS, "a tool execution")
            c.string(tool["name"], f"{at}/tool/name", nullable=True)
            c.string(tool["call_id"], f"{at}/tool/call_id", nullable=True)
        usage = span["usage"]
        if usage is not None:
            c.fields(usage, f"{at}/usage", USAGE_FIELDS, "a token usage")
            for name in USAGE_FIELDS:
                c.count(usage[name], f"{at}/usage/{name}", nullable=True)
        reasons = span["finish_reasons"]
        if reasons is not None:
            for j, reason in enumerate(c.array(reasons, f"{at}/finish_reasons")):
                c.string(reason, f"{at}/finish_reasons/{j}")
        c.attributes(span["attributes"], f"{at}/attributes")
        for j, event in enumerate(c.array(span["events"], f"{at}/events")):
            e = f"{at}/events/{j}"
            c.fields(event, e, EVENT_FIELDS, "a span event")
            c.nanos(event["time_unix_nano"], f"{e}/time_unix_nano")
            c.string(event["name"], f"{e}/name")
            c.attributes(event["attributes"], f"{e}/attributes")
            c.count(event["dropped_attributes_count"], f"{e}/dropped_attributes_count")
        for j, link in enumerate(c.array(span["links"], f"{at}/links")):
            e = f"{at}/links/{j}"
            c.fields(link, e, LINK_FIELDS, "a span link")
            c.hex_id(link["trace_id"], f"{e}/trace_id", _TRACE_ID, "a trace id: 32 lower hex")
            c.hex_id(link["span_id"], f"{e}/span_id", _SPAN_ID, "a span id: 16 lower hex")
            c.string(link["trace_state"], f"{e}/trace_state")
            c.attributes(link["attributes"], f"{e}/attributes")
            c.count(link["dropped_attributes_count"], f"{e}/dropped_attributes_count")
            c.count(link["flags"], f"{e}/flags")
        c.fields(span["dropped"], f"{at}/dropped", DROPPED_FIELDS, "the dropped counts")
        for name in DROPPED_FIELDS:
            c.count(span["dropped"][name], f"{at}/dropped/{name}")
        c.attributes(span["resource_attributes"], f"{at}/resource_attributes")

    def attributes(self, value: Any, at: str) -> None:
        for j, kv in enumerate(self.array(value, at)):
            self.key_value(kv, f"{at}/{j}")

    def key_value(self, kv: Any, at: str) -> None:
        self.fields(kv, at, ("key", "value"), "an attribute (key and value)")
        self.string(kv["key"], f"{at}/key")
        self.any_value(kv["value"], f"{at}/value")

    def any_value(self, value: Any, at: str) -> None:
        """An OTLP AnyValue: exactly one of its keys, or ``{}`` (the empty value)."""
        if not isinstance(value, dict):
            raise self.bad(
                at, f"expected an OTLP AnyValue (a JSON object), got {json_words(value)}"
            )
        if not value:
            return
        if len(value) != 1 or next(iter(value)) not in ANY_VALUE_KEYS:
            raise self.bad(
                at,
                f"expected an OTLP AnyValue: exactly one of {', '.join(ANY_VALUE_KEYS)}; got "
                f"the keys {', '.join(sorted(value))}",
            )
        ((key, inner),) = value.items()
        here = f"{at}/{key}"
        if key == "stringValue":
            self.string(inner, here)
        elif key == "boolValue":
            if not isinstance(inner, bool):
                raise self.bad(here, f"expected a boolean, got {json_words(inner)}")
        elif key == "intValue":
            if not (isinstance(inner, str) and _SIGNED.match(inner) and -_I64 <= int(inner) < _I64):
                raise self.bad(
                    here,
                    f"expected a signed 64-bit integer as a decimal string, got "
                    f"{json_words(inner)}",
                )
        elif key == "doubleValue":
            if not (
                (isinstance(inner, int | float) and not isinstance(inner, bool))
                or inner in _DOUBLE_WORDS
            ):
                raise self.bad(
                    here,
                    f'expected a number, "NaN", "Infinity" or "-Infinity", got {json_words(inner)}',
                )
        elif key == "bytesValue":
            if not (isinstance(inner, str) and _BASE64.match(inner)):
                raise self.bad(here, f"expected base64, got {json_words(inner)}")
        elif key == "arrayValue":
            self.fields(inner, here, ("values",), "an OTLP array value")
            for j, item in enumerate(self.array(inner["values"], f"{here}/values")):
                self.any_value(item, f"{here}/values/{j}")
        else:
            self.fields(inner, here, ("values",), "an OTLP key-value list")
            for j, kv in enumerate(self.array(inner["values"], f"{here}/values")):
                self.key_value(kv, f"{here}/values/{j}")


# --- an uploaded OTLP JSON export --------------------------------------------------------------


@dataclass(frozen=True)
class Assembled:
    """The spans of the one trace an OTLP export holds, mapped to span records (one per
    span id: a span id seen again with other content is a conflict, the first kept)."""

    trace_id: str
    spans: list[dict[str, Any]]
    conflicts: list[dict[str, str]]


def _export_bodies(body: bytes) -> list[tuple[str, bytes]]:
    """The OTLP JSON requests of an export file, each with where it is: the whole file, or
    one per line (JSON Lines: the OTLP file exporter writes one request a line)."""
    lines = [(n, line) for n, line in enumerate(body.split(b"\n"), 1) if line.strip()]
    if not lines:
        raise ReplayError(errors.MALFORMED_TRACE, "OTLP export: the file is empty")
    first = lines[0][1].strip()
    if len(lines) > 1 and first.startswith(b"{") and first.endswith(b"}"):
        return [(f"OTLP export line {n}", line) for n, line in lines]
    return [("OTLP export", body)]


def assemble_export(body: bytes) -> Assembled:
    """The spans of an OTLP JSON export file (``{"resourceSpans": [...]}``, or JSON Lines of
    them), decoded by ``otlp.decode`` and mapped by ``mapping.span_record``: one file, one
    trace (a file holding spans of several traces is ``MALFORMED_TRACE``, saying how many).

    The hook between the OTLP decoder and the record: the upload path of an export file."""
    from core.formats.otel import mapping, otlp

    if len(body) > MAX_RECORD_BYTES:
        raise ReplayError(
            errors.MALFORMED_TRACE, f"OTLP export: larger than {MAX_RECORD_BYTES} bytes"
        )
    plain: list[dict[str, Any]] = []
    for where, text in _export_bodies(body):
        try:
            decoded = otlp.decode(text, otlp.JSON, limits=otlp.Limits())
        except (otlp.OtlpError, ReplayError) as exc:
            raise ReplayError(
                errors.MALFORMED_TRACE, f"{where}: {exc.code}: {exc.message}"
            ) from None
        if decoded.rejected:
            first = decoded.rejected[0]
            raise ReplayError(
                errors.MALFORMED_TRACE,
                f"{where}: span {first.position} (span id {first.span_id or 'empty'})"
                f" cannot stand: {first.reason}"
                + (f"; {len(decoded.rejected) - 1} more" if len(decoded.rejected) > 1 else ""),
            )
        plain.extend(decoded.spans)
    trace_ids = list(dict.fromkeys(s["trace_id"] for s in plain))
    if not trace_ids:
        raise ReplayError(errors.MALFORMED_TRACE, "OTLP export: the file holds no spans")
    if len(trace_ids) > 1:
        shown = ", ".join(trace_ids[:5]) + (", ..." if len(trace_ids) > 5 else "")
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"OTLP export: the file holds spans of {len(trace_ids)} traces ({shown}); "
            "upload one trace per file",
        )
    kept: dict[str, tuple[dict[str, Any], str]] = {}
    conflicts: list[dict[str, str]] = []
    for span in plain:
        record = mapping.span_record(span)
        digest = _span_digest(record)
        seen = kept.get(record["span_id"])
        if seen is None:
            kept[record["span_id"]] = (record, digest)
        elif seen[1] != digest and all(
            not (c["span_id"] == record["span_id"] and c["other"] == digest) for c in conflicts
        ):
            conflicts.append({"span_id": record["span_id"], "kept": seen[1], "other": digest})
    return Assembled(trace_ids[0], [r for r, _ in kept.values()], conflicts)


def _span_digest(record: Mapping[str, Any]) -> str:
    try:
        return sha256_prefixed(jcs(record))
    except CanonicalError as exc:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"OTLP export: span {record.get('span_id')} is not canonicalisable: {exc}",
        ) from None


def seal_export(body: bytes, *, sealed_at: str) -> Record:
    """An OTLP JSON export, assembled (:func:`assemble_export`) and sealed with reason
    ``upload``: the record it is read as."""
    assembled = assemble_export(body)
    document, _data, digest = seal(
        assembled.trace_id,
        assembled.spans,
        conflicts=assembled.conflicts,
        sealed_at=sealed_at,
        reason="upload",
    )
    return Record(document, digest, None, source="otlp-export")
