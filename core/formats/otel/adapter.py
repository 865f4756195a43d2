"""An OpenTelemetry GenAI trace behind the one format interface (:mod:`core.formats.protocol`):
a sealed trace record (:mod:`core.formats.otel.record`), or an OTLP JSON export file
(``{"resourceSpans": [...]}``, one request a line for JSON Lines) that is assembled and sealed
when it is read (reason ``upload``). Verify and replay both run the audit
(:func:`core.formats.otel.audit.audit`): nothing is re-executed. Compare is field by field over
the conversation: the model calls' messages and the tools' arguments and results, in order.

Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from core import errors
from core.errors import ReplayError
from core.formats.common import differences, top_level_keys
from core.formats.otel import record as rec
from core.formats.otel.audit import audit
from core.formats.otel.page import page as trace_page
from core.formats.otel.page import records as trace_records
from core.formats.otel.record import Record
from core.formats.protocol import (
    CompanionRule,
    Difference,
    FormatRegistry,
    NativeCode,
    StoredFacts,
    VerifyContext,
)
from core.replay.recordview import ViewRecord
from core.replay.report import Check, ReplayReport

#: the record's own key, and an OTLP export request's
OTEL_KEYS = frozenset({"otel_genai", "resourceSpans"})
#: names of OTLP JSON export files (the OTLP file exporter's, the collector's ``file``)
_EXPORT_NAME = re.compile(r"\.otlp\.jsonl?\Z", re.IGNORECASE)
#: the head of an OTLP JSON export request: a definite claim (no other format has the key)
_EXPORT_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"resourceSpans"\s*:')
#: the head of a record's JCS bytes: its keys sorted, ``otel_genai`` after these two
_RECORD_HEAD = ("conflicts", "content", "otel_genai")
#: the first bytes read to tell a record from an export
_HEAD_BYTES = 1 << 16
#: a model call's fields that compare meaningfully across two runs (ids, times and the
#: verbatim attributes differ in any two runs)
_CALL_FIELDS = (
    "name",
    "operation",
    "provider",
    "request_model",
    "response_model",
    "request_parameters",
    "system_instructions",
    "tool_definitions",
    "input_messages",
    "output_messages",
    "finish_reasons",
    "usage",
)


class OtelFormat:
    name = rec.FORMAT
    label = "an OpenTelemetry GenAI trace"
    keys = OTEL_KEYS
    companions: tuple[CompanionRule, ...] = ()
    #: every code a report of it can carry besides the console's own (protocol.CONSOLE_CODES)
    codes = frozenset(
        {
            errors.MALFORMED_TRACE,
            errors.UNSUPPORTED_SCHEMA_VERSION,
            errors.INTEGRITY_FAILURE,
            errors.INCOMPLETE_TRACE,
            errors.REPLAY_DIVERGENCE,
        }
    )
    unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION})
    replay_note = (
        "re-runs the audit (nothing is re-executed): the seal's digest, the span tree, the "
        "messages against the GenAI conventions' schemas, each tool call's round trip, the "
        "conversation from call to call and the token usage"
    )
    #: its own section of the trace page (``page_template``, drawn from :meth:`page`): the
    #: span waterfall and the conversation; the run report is the console's shared one
    templates: str | None = str(Path(__file__).parent / "templates")
    report_template: str | None = None
    page_template = "page.html"
    #: what ``event_count`` and ``step_count`` count, in words (the trace page's contents)
    counts = ("span", "model or tool call")

    def sniff(self, head: bytes, filename: str) -> bool:
        """An OTLP export by its name (``*.otlp.json``, ``*.otlp.jsonl``) or its first key
        (``resourceSpans``); a record by the head of its JCS bytes."""
        if _EXPORT_NAME.search(filename) or _EXPORT_HEAD.match(head):
            return True
        if not head.startswith(b'{"conflicts":['):
            return False
        return tuple(_first_keys(head, len(_RECORD_HEAD))) == _RECORD_HEAD

    def storable(self, report: ReplayReport) -> bool:
        """Refused only for the file's own faults: messages that do not follow the GenAI
        conventions' schemas (MALFORMED_TRACE at ``messages_schema``) are a verdict on a
        well-formed, sealed record, which is stored with it."""
        if report.error_code not in self.unstorable_codes:
            return True
        return bool(report.checks) and report.checks[-1].name == "messages_schema"

    def parse(self, source: IO[bytes], filename: str, ctx: VerifyContext) -> Record:
        data = source.read(rec.MAX_RECORD_BYTES + 1)
        if len(data) > rec.MAX_RECORD_BYTES:
            raise ReplayError(
                errors.MALFORMED_TRACE, f"{filename}: larger than {rec.MAX_RECORD_BYTES} bytes"
            )
        if _is_export(data[:_HEAD_BYTES], filename):
            return rec.seal_export(data, sealed_at=_sealed_at(ctx))
        return rec.parse(data)

    def refused(self, exc: ReplayError, filename: str, ctx: VerifyContext) -> ReplayReport:
        report = ReplayReport(trace_id=None, format=self.name, mode=ctx.mode)
        report.checks.append(Check("format", False, exc.message))
        return report.fail(
            exc.code,
            exc.message,
            broke_at=exc.broke_at,
            expected=exc.expected,
            observed=exc.observed,
        )

    def verify(self, parsed: Record, filename: str, ctx: VerifyContext) -> ReplayReport:
        return audit(parsed, mode=ctx.mode, ctx=ctx)

    replay = verify

    def facts(self, parsed: Record, report: ReplayReport, ctx: VerifyContext) -> StoredFacts:
        spans = parsed.spans
        root = _root(parsed)
        calls = [s for s in spans if rec.is_model_call(s)]
        tools = [s for s in spans if rec.is_tool_call(s)]
        instrumented = calls[0] if calls else root
        scope = instrumented["scope"]
        return StoredFacts(
            trace_id=parsed.trace_id,
            schema_version=parsed.document["otel_genai"],
            job_id=job_id(parsed)[:255],
            runtime_name="otel",
            runtime_version=" ".join(p for p in (scope["name"], scope["version"]) if p)[:64],
            started_at=rec.nanos_iso(root["start_time_unix_nano"]),
            event_count=len(spans),
            step_count=len(calls) + len(tools),
        )

    def native_code(self, report: Mapping[str, Any]) -> NativeCode | None:
        return None  # its reports carry the console's codes only

    def panel(self, parsed: Record) -> dict[str, str]:
        spans = parsed.spans
        root = _root(parsed)
        calls = [s for s in spans if rec.is_model_call(s)]
        tools = [s for s in spans if rec.is_tool_call(s)]
        doc = parsed.document
        seal = parsed.seal
        models = _distinct(s["response_model"] or s["request_model"] for s in calls)
        facts = {
            "service": root["service"] or "(none recorded)",
            "root span": root["name"],
            "spans": str(len(spans)),
            "model calls": str(len(calls)),
            "tool calls": str(len(tools)),
            "models": models or "none recorded",
            "providers": _distinct(s["provider"] for s in spans) or "none recorded",
            "conversation id": _distinct(s["conversation_id"] for s in spans) or "none",
            "content captured": _CONTENT_WORDS[parsed.content] if calls else "no model calls",
            "version": str(doc["version"])
            + (f" (after {doc['previous']})" if doc["previous"] else ""),
            "sealed at": (
                "on upload, from an OTLP JSON export (sealed again whenever it is read)"
                if parsed.source == "otlp-export"
                else f"{seal['sealed_at']} ({seal['reason']})"
            ),
            "digest": seal["digest"],
        }
        if doc["conflicts"]:
            facts["conflicts"] = (
                f"{len(doc['conflicts'])} span id(s) received again with other content: "
                + ", ".join(c["span_id"] for c in doc["conflicts"])
            )
        return facts

    def page(self, parsed: Record) -> dict[str, Any]:
        """What its section of the trace page shows (:func:`page.page`)."""
        return trace_page(parsed)

    def index_facts(self, parsed: Record) -> dict[str, str]:
        """The panel's facts a page of a large trace shows without parsing it (kept in the
        page's index): all but the conversation ids, which a privacy path rule may name
        personal."""
        facts = self.panel(parsed)
        facts.pop("conversation id", None)
        return facts

    def records(self, parsed: Record) -> Iterator[ViewRecord]:
        """Its spans as the page's records, in the waterfall's tree order
        (:func:`page.records`)."""
        return trace_records(parsed)

    def compare(self, a: Record, b: Record) -> list[Difference]:
        """Two runs, field by field over their conversations (:func:`conversation`): the
        model calls (``/calls/N/...``) and the tool executions (``/tools/N/...``), in time
        order."""
        return differences(conversation(a), conversation(b))


_CONTENT_WORDS = {
    "full": "full: every model call carries its messages",
    "partial": "partial: some model calls carry their messages, some do not",
    "none": "none: captured without message content (the instrumentations' default)",
}


def _first_keys(head: bytes, n: int) -> list[str]:
    keys = []
    for key in top_level_keys(head):
        keys.append(key)
        if len(keys) == n:
            break
    return keys


def _is_export(head: bytes, filename: str) -> bool:
    """An OTLP export rather than a sealed record: by its name, or ``resourceSpans`` among
    the first keys where ``otel_genai`` is not."""
    if _EXPORT_NAME.search(filename) or _EXPORT_HEAD.match(head):
        return True
    keys = _first_keys(head, 16)
    return "resourceSpans" in keys and "otel_genai" not in keys


def _sealed_at(ctx: VerifyContext) -> str:
    """When an export read now is sealed: the request's time (``ctx.at``), else the epoch
    (a stored export is sealed again whenever it is read: its digest never depends on it)."""
    at = ctx.at
    if at is not None and getattr(at, "tzinfo", None) is not None:
        return rec.utc_iso(at)
    return "1970-01-01T00:00:00.000Z"


def _root(parsed: Record) -> dict[str, Any]:
    i = rec.root_index(parsed)
    return parsed.spans[0 if i is None else i]


def _distinct(values: Any) -> str:
    return ", ".join(dict.fromkeys(v for v in values if v))


def job_id(parsed: Record) -> str:
    """What two runs of one agent share: the root span's service and name (``service/name``;
    the name alone when no service is recorded)."""
    root = _root(parsed)
    return f"{root['service']}/{root['name']}" if root["service"] else root["name"]


def conversation(parsed: Record) -> dict[str, Any]:
    """What two runs of one agent are compared by: each model call's messages, model and
    usage (``calls``), and each tool execution's name, arguments and result (``tools``), in
    time order; the call ids inside the messages are left out, as are span ids and times,
    which differ in any two runs."""
    calls = []
    tools = []
    for span in parsed.spans:
        if rec.is_model_call(span):
            calls.append({name: _no_ids(span[name]) for name in _CALL_FIELDS})
        elif rec.is_tool_call(span):
            tool = span["tool"] or {}
            tools.append(
                {
                    "name": tool.get("name", span["name"]),
                    "arguments": tool.get("arguments"),
                    "result": tool.get("result"),
                    "status": span["status"]["code"],
                }
            )
    return {"calls": calls, "tools": tools}


def _no_ids(value: Any) -> Any:
    """Messages without their tool call ids (``tool_call`` and ``tool_call_response``
    parts' ``id``)."""
    if isinstance(value, list):
        return [_no_ids(v) for v in value]
    if isinstance(value, dict):
        if value.get("type") in ("tool_call", "tool_call_response"):
            return {k: _no_ids(v) for k, v in value.items() if k != "id"}
        return {k: _no_ids(v) for k, v in value.items()}
    return value


def register(registry: FormatRegistry) -> None:
    registry.register(OtelFormat())
