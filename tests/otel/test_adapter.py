"""The OpenTelemetry GenAI format behind the one format interface: registration and
detection (no other format's changes), parse and refusal, verify and replay, what is stored
(facts, storable), the panel and the comparison of two runs; an OTLP JSON export sealed at
upload, from the real instrumentations' captured exports."""

from __future__ import annotations

import copy
import datetime
import io
import json
from pathlib import Path

import pytest

from core import errors
from core.errors import ReplayError
from core.formats import detect_format, formats, native
from core.formats.otel import record as rec
from core.formats.otel.adapter import OtelFormat, conversation, job_id
from core.formats.protocol import Difference, VerifyContext
from core.replay.report import DIVERGED, OK, REFUSED
from tests.otel.spans import TRACE_ID, agent_run, resealed, sealed

FIXTURES = Path(__file__).with_name("fixtures")
FMT = OtelFormat()


def _parse(data: bytes, filename: str = "trace.otel.json", **ctx) -> rec.Record:
    return FMT.parse(io.BytesIO(data), filename, VerifyContext(**ctx))


def test_it_is_registered_before_the_native_format_with_its_codes():
    names = formats().names()
    assert names.index("otel-genai") < names.index(native.FORMAT)
    fmt = formats().get("otel-genai")
    assert (fmt.name, fmt.label) == ("otel-genai", "an OpenTelemetry GenAI trace")
    assert fmt.keys == {"otel_genai", "resourceSpans"}
    assert fmt.codes == {
        errors.MALFORMED_TRACE,
        errors.UNSUPPORTED_SCHEMA_VERSION,
        errors.INTEGRITY_FAILURE,
        errors.INCOMPLETE_TRACE,
        errors.REPLAY_DIVERGENCE,
    }
    assert fmt.unstorable_codes == {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION}
    assert fmt.native_code({"error_code": "INTEGRITY_FAILURE"}) is None
    # its own section of the trace page (the waterfall, the conversation), in its package
    assert fmt.templates is not None
    assert (Path(fmt.templates) / fmt.page_template).is_file()
    assert (fmt.report_template, fmt.companions, fmt.counts) == (
        None,
        (),
        ("span", "model or tool call"),
    )


def test_a_sealed_record_is_detected_by_its_head_whatever_its_name():
    data = sealed().data
    assert FMT.sniff(data[:1024], "anything.json")
    assert detect_format(data, "anything.json") == "otel-genai"
    # by its keys too, when the head is not JCS (a pretty-printed record)
    pretty = json.dumps(json.loads(data), indent=2).encode()
    assert not FMT.sniff(pretty, "x.json")
    assert detect_format(pretty, "x.json") == "otel-genai"


def test_an_otlp_export_is_detected_by_its_key_or_its_name():
    body = b'{"resourceSpans": []}'
    assert detect_format(body, "export.json") == "otel-genai"
    assert detect_format(b'\n  {"resourceSpans":[]}\n{"resourceSpans":[]}', "traces.jsonl") == (
        "otel-genai"
    )
    assert detect_format(b"", "run.otlp.json") == "otel-genai"
    assert detect_format(b"", "RUN.OTLP.JSONL") == "otel-genai"


@pytest.mark.parametrize(
    ("head", "filename", "expected"),
    [
        (b'{"format": "replay-trace", "trace_id": "x"}', "a.json", native.FORMAT),
        (b'{"trace_id": "x", "job": {}}', "a.json", native.FORMAT),
        (b"{}", "a.trace.jsonl", native.FORMAT),
        (b'{"otel": 1}', "a.jsonl", native.FORMAT),
        (b'{"conflicts": [], "job": 1}', "a.json", native.FORMAT),
        (b'{"contract_id": "c"}', "a.json", "paxman-artifact"),
        (b'{"invoke": {}}', "a.json", "contextos-trace"),
        (b'{"format": "verist-baseline@1"}', "a.json", "verist-snapshot"),
        (b"{}", "a.replay.json", "ahd-replay"),
    ],
)
def test_no_other_format_s_detection_changes(head, filename, expected):
    assert detect_format(head, filename) == expected


def test_parse_reads_a_record_and_refused_reports_what_did_not_parse():
    record = _parse(sealed().data)
    assert record.trace_id == TRACE_ID
    assert record.source == "record"
    doc = copy.deepcopy(record.document)
    doc["otel_genai"] = 2
    with pytest.raises(ReplayError) as refused:
        _parse(json.dumps(doc).encode())
    report = FMT.refused(refused.value, "x.json", VerifyContext())
    assert (report.status, report.error_code, report.authoritative) == (
        REFUSED,
        errors.UNSUPPORTED_SCHEMA_VERSION,
        False,
    )
    assert [(c.name, c.ok) for c in report.checks] == [("format", False)]
    assert (report.expected, report.observed, report.broke_at) == ("1", "2", "/otel_genai")
    assert not FMT.storable(report)


def test_verify_and_replay_run_the_audit():
    record = sealed()
    ctx = VerifyContext(mode="sandbox")
    report = FMT.verify(record, "x.json", ctx)
    assert (report.status, report.mode) == (OK, "sandbox")
    assert FMT.replay(record, "x.json", ctx).to_json() == report.to_json()
    assert FMT.storable(report)


def test_a_schema_verdict_is_stored_a_file_that_does_not_parse_is_not():
    doc = copy.deepcopy(sealed().document)
    del doc["spans"][3]["output_messages"][0]["finish_reason"]
    report = FMT.verify(resealed(doc), "x.json", VerifyContext())
    assert report.error_code == errors.MALFORMED_TRACE
    assert FMT.storable(report)
    refused = FMT.refused(ReplayError(errors.MALFORMED_TRACE, "bad"), "x.json", VerifyContext())
    assert not FMT.storable(refused)
    doc = copy.deepcopy(sealed().document)
    doc["spans"][3]["input_messages"][2]["parts"][0]["response"] = "tampered"
    diverged = FMT.verify(resealed(doc), "x.json", VerifyContext())
    assert diverged.status == DIVERGED
    assert FMT.storable(diverged)


def test_facts():
    record = sealed()
    facts = FMT.facts(record, FMT.verify(record, "x.json", VerifyContext()), VerifyContext())
    assert facts.trace_id == TRACE_ID
    assert facts.schema_version == 1
    assert facts.job_id == "weather-service/invoke_agent weather-agent" == job_id(record)
    assert (facts.runtime_name, facts.runtime_version) == (
        "otel",
        "opentelemetry.instrumentation.openai_v2 2.4b0",
    )
    assert facts.started_at == "2025-06-01T10:00:00.000000Z"
    assert (facts.event_count, facts.step_count) == (4, 3)


def test_the_panel():
    assert FMT.panel(sealed()) == {
        "service": "weather-service",
        "root span": "invoke_agent weather-agent",
        "spans": "4",
        "model calls": "2",
        "tool calls": "1",
        "models": "gpt-4o-mini-2024-07-18",
        "providers": "openai",
        "conversation id": "none",
        "content captured": "full: every model call carries its messages",
        "version": "1",
        "sealed at": "2025-06-01T12:00:00.000Z (quiet)",
        "digest": sealed().digest,
    }


def test_the_panel_of_a_later_version_with_conflicts():
    conflicts = [
        {"span_id": "00000000000000d4", "kept": "sha256:" + "b" * 64, "other": "sha256:" + "c" * 64}
    ]
    record = sealed(version=2, previous="sha256:" + "a" * 64, conflicts=conflicts)
    panel = FMT.panel(record)
    assert panel["version"] == f"2 (after sha256:{'a' * 64})"
    assert panel["conflicts"] == (
        "1 span id(s) received again with other content: 00000000000000d4"
    )


def test_compare_two_runs_of_one_agent_by_the_conversation():
    first = sealed()
    spans = agent_run()
    for s in spans:
        for m in (s["input_messages"] or []) + (s["output_messages"] or []):
            for p in m["parts"]:
                if "id" in p:
                    p["id"] = "call_other"  # call ids differ in any two runs
        if s["tool"]:
            s["tool"]["call_id"] = "call_other"
    assert FMT.compare(first, sealed(spans)) == []
    # the second run asks for Lyon, and it is 19 degrees there (agent_run()'s order:
    # 0 the second chat, 1 the agent, 2 the first chat, 3 the tool)
    spans[2]["output_messages"][0]["parts"][0]["arguments"] = {"city": "Lyon"}
    spans[0]["input_messages"][1]["parts"][0]["arguments"] = {"city": "Lyon"}
    spans[0]["input_messages"][2]["parts"][0]["response"] = {"temperature": 19, "unit": "celsius"}
    spans[3]["tool"]["arguments"] = {"city": "Lyon"}
    spans[3]["tool"]["result"] = {"temperature": 19, "unit": "celsius"}
    second = sealed(spans)
    assert FMT.verify(second, "x.json", VerifyContext()).status == OK
    assert FMT.compare(first, second) == [
        Difference("/calls/0/output_messages/0/parts/0/arguments/city", "changed", "Paris", "Lyon"),
        Difference("/calls/1/input_messages/1/parts/0/arguments/city", "changed", "Paris", "Lyon"),
        Difference("/calls/1/input_messages/2/parts/0/response/temperature", "changed", 22, 19),
        Difference("/tools/0/arguments/city", "changed", "Paris", "Lyon"),
        Difference("/tools/0/result/temperature", "changed", 22, 19),
    ]
    projection = conversation(first)
    assert [c["name"] for c in projection["calls"]] == ["chat gpt-4o-mini"] * 2
    assert projection["tools"] == [
        {
            "name": "get_weather",
            "arguments": {"city": "Paris"},
            "result": {"temperature": 22, "unit": "celsius"},
            "status": "unset",
        }
    ]


# --- OTLP JSON exports: the real instrumentations' captures ------------------------------------


def _manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


def _json_exports() -> list[tuple[str, str, str]]:
    if not (FIXTURES / "manifest.json").exists():
        return []
    return [
        (name, f, entry["trace_id"])
        for name, entry in _manifest()["sets"].items()
        for f in entry["files"]
        if f.endswith(".json")
    ]


@pytest.mark.parametrize(("name", "filename", "trace_id"), _json_exports())
def test_a_real_otlp_json_export_is_sealed_at_upload_and_audits(name, filename, trace_id):
    data = (FIXTURES / filename).read_bytes()
    at = datetime.datetime(2025, 6, 1, 12, 0, tzinfo=datetime.UTC)
    assert detect_format(data[:4096], filename) == "otel-genai"
    record = _parse(data, filename, at=at)
    assert record.source == "otlp-export"
    assert record.trace_id == trace_id
    assert record.seal["reason"] == "upload"
    assert record.seal["sealed_at"] == "2025-06-01T12:00:00.000Z"
    # the same export read again, at another time, has the same digest
    assert _parse(data, filename).digest == record.digest
    # the record it is parses back from its own bytes, seal and all
    again = rec.parse(rec.jcs(record.document))
    assert again.digest == record.digest == record.seal["digest"]
    report = FMT.verify(record, filename, VerifyContext(at=at))
    assert report.status == OK, report.message
    if "nocontent" in filename:
        assert record.content == "none"
    panel = FMT.panel(record)
    assert panel["sealed at"].startswith("on upload")


def test_an_export_of_two_traces_is_refused_saying_how_many(monkeypatch):
    pytest.importorskip("core.formats.otel.mapping")
    exports = [f for _, f, _ in _json_exports()][:2]
    assert len(exports) == 2  # the captured JSON exports (tests/otel/fixtures/)
    lines = b"\n".join(
        json.dumps(json.loads((FIXTURES / f).read_bytes())).encode() for f in exports
    )
    with pytest.raises(ReplayError) as refused:
        _parse(lines, "two.otlp.jsonl")
    assert refused.value.code == errors.MALFORMED_TRACE
    assert refused.value.message.startswith("OTLP export: the file holds spans of 2 traces (")
    assert refused.value.message.endswith("); upload one trace per file")


def test_an_export_that_is_not_otlp_is_refused():
    pytest.importorskip("core.formats.otel.mapping")
    with pytest.raises(ReplayError) as refused:
        _parse(b'{"resourceSpans": 5}', "x.otlp.json")
    assert refused.value.code == errors.MALFORMED_TRACE
    assert refused.value.message.startswith("OTLP export: WRONG_TYPE: ")


def _requests_one_a_line(filename: str) -> list[dict]:
    """A captured JSON export split into one request per resource and scope, as an OTLP
    file exporter writing each batch on its own line would."""
    body = json.loads((FIXTURES / filename).read_bytes())
    return [
        {"resourceSpans": [{**rs, "scopeSpans": [ss]}]}
        for rs in body["resourceSpans"]
        for ss in rs["scopeSpans"]
    ]


def test_a_json_lines_export_seals_like_the_same_spans_in_one_request():
    whole = _parse((FIXTURES / "openai-v2-json.json").read_bytes(), "run.otlp.json")
    requests = _requests_one_a_line("openai-v2-json.json")
    assert len(requests) == 2
    lines = b"\n".join(json.dumps(r).encode() for r in requests) + b"\n"
    assert detect_format(lines, "traces.jsonl") == "otel-genai"
    split = _parse(lines, "traces.jsonl")
    assert split.digest == whole.digest
    assert split.document["conflicts"] == []


def test_a_span_exported_twice_is_kept_once_and_other_content_is_a_conflict():
    requests = _requests_one_a_line("openai-v2-json.json")
    again = copy.deepcopy(requests[0])
    changed = copy.deepcopy(requests[0])
    span = changed["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["name"] = "chat gpt-4o"
    lines = b"\n".join(json.dumps(r).encode() for r in [*requests, again, changed])
    record = _parse(lines, "traces.otlp.jsonl")
    whole = _parse((FIXTURES / "openai-v2-json.json").read_bytes(), "run.otlp.json")
    assert record.spans == whole.spans
    (conflict,) = record.document["conflicts"]
    assert conflict["span_id"] == span["spanId"].lower()
    assert conflict["kept"] != conflict["other"]
    assert FMT.verify(record, "traces.otlp.jsonl", VerifyContext()).status == OK


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"resourceSpans": []}', "OTLP export: the file holds no spans"),
        (b" \n", "OTLP export: the file is empty"),
    ],
)
def test_an_export_without_spans_is_refused(body, message):
    with pytest.raises(ReplayError) as refused:
        _parse(body, "x.otlp.json")
    assert (refused.value.code, refused.value.message) == (errors.MALFORMED_TRACE, message)
