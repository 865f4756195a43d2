"""The sealed OpenTelemetry GenAI trace record: sealing (order, content, digest, bytes) and
the strict parse back, each refusal naming its JSON pointer."""

from __future__ import annotations

import copy
import json

import pytest

from core import errors
from core.canonical import jcs, sha256_prefixed
from core.errors import ReplayError
from core.formats.otel import record as rec
from tests.otel.spans import (
    SEALED_AT,
    TRACE_ID,
    agent_run,
    fixture_record,
    fixture_sets,
    manifest,
    sealed,
    span,
)

#: the seal digest of agent_run(), written down once from a run of the code (and checked
#: against the rfc8785 package's JCS bytes when the record gained its span-level fields)
AGENT_RUN_DIGEST = "sha256:8b71eaa7c407f75f8c2dacea2445e0c629cf56adfa4982959f40f5d8a1310314"


def test_seal_orders_the_spans_and_its_digest_is_over_the_record_without_the_seal():
    document, data, digest = rec.seal(TRACE_ID, agent_run(), sealed_at=SEALED_AT, reason="quiet")
    assert digest == AGENT_RUN_DIGEST
    assert [s["span_id"] for s in document["spans"]] == [
        "00000000000000a1",
        "00000000000000b2",
        "00000000000000d4",
        "00000000000000c3",
    ]
    assert document["seal"] == {
        "profile": "jcs",
        "digest": digest,
        "sealed_at": SEALED_AT,
        "reason": "quiet",
    }
    body = {k: v for k, v in document.items() if k != "seal"}
    assert digest == sha256_prefixed(jcs(body))
    assert data == jcs(document)
    assert data.startswith(b'{"conflicts":[],"content":"full","otel_genai":1,"previous":null,')
    assert (document["version"], document["previous"], document["content"]) == (1, None, "full")


def test_the_same_spans_in_any_order_seal_to_the_same_bytes():
    spans = agent_run()
    _, first, _ = rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
    _, again, _ = rec.seal(TRACE_ID, spans[::-1], sealed_at=SEALED_AT, reason="quiet")
    assert first == again


def test_the_seal_holds_when_the_record_is_parsed_back():
    record = sealed()
    assert record.digest == record.seal["digest"] == AGENT_RUN_DIGEST
    assert record.trace_id == TRACE_ID
    assert record.data is not None
    assert rec.jcs(record.document) == record.data
    assert record.source == "record"


def test_sealed_at_and_the_reason_are_not_in_the_digest():
    _, _, quiet = rec.seal(TRACE_ID, agent_run(), sealed_at=SEALED_AT, reason="quiet")
    _, _, manual = rec.seal(
        TRACE_ID, agent_run(), sealed_at="2030-01-01T00:00:00Z", reason="manual"
    )
    assert quiet == manual


def test_spans_with_one_start_time_are_ordered_by_span_id():
    spans = agent_run()
    for s in spans[1:]:
        s["start_time_unix_nano"] = spans[0]["start_time_unix_nano"]
    document, _, _ = rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
    ids = [s["span_id"] for s in document["spans"]]
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    ("stripped", "content"), [((), "full"), ((0,), "partial"), ((1,), "partial"), ((0, 1), "none")]
)
def test_content_says_whether_the_model_calls_carry_messages(stripped, content):
    spans = agent_run()
    calls = [s for s in spans if s["operation"] == "chat"]
    for n in stripped:
        calls[n]["input_messages"] = calls[n]["output_messages"] = None
    document, _, _ = rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
    assert document["content"] == content


def test_a_model_call_with_only_output_messages_carries_content():
    spans = agent_run()
    for s in spans:
        s["input_messages"] = None
    document, _, _ = rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
    assert document["content"] == "full"


def test_an_openinference_llm_span_is_a_model_call():
    llm = span(
        "00000000000000e5",
        "ChatCompletion",
        dialect="openinference",
        attributes=[{"key": "openinference.span.kind", "value": {"stringValue": "LLM"}}],
    )
    assert rec.is_model_call(llm)
    document, _, _ = rec.seal(TRACE_ID, [llm], sealed_at=SEALED_AT, reason="quiet")
    assert document["content"] == "none"
    tool = span(
        "00000000000000e6",
        "get_weather",
        dialect="openinference",
        attributes=[{"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}}],
    )
    assert rec.is_tool_call(tool)
    assert not rec.is_model_call(tool)


def test_a_later_version_names_the_previous_digest_and_conflicts_are_sorted():
    conflicts = [
        {
            "span_id": "00000000000000d4",
            "kept": "sha256:" + "b" * 64,
            "other": "sha256:" + "c" * 64,
        },
        {
            "span_id": "00000000000000b2",
            "kept": "sha256:" + "d" * 64,
            "other": "sha256:" + "e" * 64,
        },
    ]
    document, data, _ = rec.seal(
        TRACE_ID,
        agent_run(),
        version=2,
        previous=AGENT_RUN_DIGEST,
        conflicts=conflicts,
        sealed_at=SEALED_AT,
        reason="manual",
    )
    assert [c["span_id"] for c in document["conflicts"]] == [
        "00000000000000b2",
        "00000000000000d4",
    ]
    parsed = rec.parse(data)
    assert parsed.document["previous"] == AGENT_RUN_DIGEST
    assert parsed.document["version"] == 2


def test_seal_refuses_a_span_it_could_not_parse_back():
    spans = agent_run()
    spans[2]["kind"] = "sideways"
    with pytest.raises(ReplayError) as refused:
        rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
    assert refused.value.code == errors.MALFORMED_TRACE
    assert refused.value.message == (
        "otel record at /spans/1/kind: expected one of internal, server, client, producer, "
        'consumer, unspecified; got a string ("sideways")'
    )


def test_seal_refuses_an_empty_trace_and_a_bad_reason():
    with pytest.raises(ReplayError, match=r"at /spans: a trace record holds at least one span"):
        rec.seal(TRACE_ID, [], sealed_at=SEALED_AT, reason="quiet")
    with pytest.raises(ReplayError, match=r"at /seal/reason: expected one of quiet, manual"):
        rec.seal(TRACE_ID, agent_run(), sealed_at=SEALED_AT, reason="later")
    with pytest.raises(ReplayError, match=r"at /seal/sealed_at: expected an ISO-8601 UTC time"):
        rec.seal(TRACE_ID, agent_run(), sealed_at="2025-06-01 12:00", reason="quiet")


# --- parse: refusals by pointer ---------------------------------------------------------------


def _document() -> dict:
    return copy.deepcopy(sealed().document)


def _refusal(document, *, raw: bytes | None = None) -> ReplayError:
    with pytest.raises(ReplayError) as refused:
        rec.parse(raw if raw is not None else json.dumps(document).encode())
    return refused.value


def test_a_newer_schema_version_is_unsupported():
    doc = _document()
    doc["otel_genai"] = 2
    refused = _refusal(doc)
    assert refused.code == errors.UNSUPPORTED_SCHEMA_VERSION
    assert (
        refused.message == "otel record: otel_genai 2 is newer than this console reads (it reads 1)"
    )
    assert (refused.expected, refused.observed, refused.broke_at) == ("1", "2", "/otel_genai")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.pop("otel_genai"),
            "otel record at /otel_genai: required: an OpenTelemetry GenAI trace record has its "
            "schema version here",
        ),
        (
            lambda d: d.update(otel_genai="1"),
            'otel record at /otel_genai: expected a positive integer, got a string ("1")',
        ),
        (
            lambda d: d.update(otel_genai=True),
            "otel record at /otel_genai: expected a positive integer, got a boolean (true)",
        ),
        (
            lambda d: d.pop("content"),
            "otel record at /content: required: a field of a trace record",
        ),
        (
            lambda d: d.update(extra=1),
            "otel record at /extra: not a field of a trace record",
        ),
        (
            lambda d: d.update(trace_id="4BF92F3577B34DA6A3CE929D0E0E4736"),
            "otel record at /trace_id: expected a trace id: 32 lower-case hex digits, got a "
            'string ("4BF92F3577B34DA6A3CE929D0E0E4736")',
        ),
        (
            lambda d: d.update(trace_id="0" * 32),
            "otel record at /trace_id: an all-zero id is not a valid OpenTelemetry id",
        ),
        (
            lambda d: d.update(previous="sha256:" + "a" * 64),
            "otel record at /previous: version 1 has no previous version: expected null",
        ),
        (
            lambda d: d.update(version=2),
            "otel record at /previous: version 2 names its previous version's digest",
        ),
        (
            lambda d: d["spans"][2].update(span_id="d4"),
            "otel record at /spans/2/span_id: expected a span id: 16 lower-case hex, got a "
            'string ("d4")',
        ),
        (
            lambda d: d["spans"][1].update(start_time_unix_nano=12),
            "otel record at /spans/1/start_time_unix_nano: expected a time in nanoseconds since "
            "the epoch as a decimal string (an unsigned 64-bit integer), got a number (12)",
        ),
        (
            lambda d: d["spans"][1].update(start_time_unix_nano="18446744073709551616"),
            "otel record at /spans/1/start_time_unix_nano: expected a time in nanoseconds since "
            "the epoch as a decimal string (an unsigned 64-bit integer), got a string "
            '("18446744073709551616")',
        ),
        (
            lambda d: d["spans"][1]["status"].update(code="STATUS_CODE_OK"),
            "otel record at /spans/1/status/code: expected one of unset, ok, error; got a "
            'string ("STATUS_CODE_OK")',
        ),
        (
            lambda d: d["spans"][1].pop("usage"),
            "otel record at /spans/1/usage: required: a field of a span record",
        ),
        (
            lambda d: d["spans"][1]["usage"].update(input_tokens=-1),
            "otel record at /spans/1/usage/input_tokens: expected a count (an integer >= 0) or "
            "null, got a number (-1)",
        ),
        (
            lambda d: d["spans"][1].update(input_messages={"role": "user"}),
            "otel record at /spans/1/input_messages: expected an array, got an object "
            '({"role": "user"})',
        ),
        (
            lambda d: d["spans"][2]["tool"].pop("result"),
            "otel record at /spans/2/tool/result: required: a field of a tool execution",
        ),
        (
            lambda d: d["spans"][0]["resource_attributes"][0].update(value={"stringValue": 1}),
            "otel record at /spans/0/resource_attributes/0/value/stringValue: expected a "
            "string, got a number (1)",
        ),
        (
            lambda d: d["spans"][0]["resource_attributes"][0].update(
                value={"stringValue": "a", "intValue": "1"}
            ),
            "otel record at /spans/0/resource_attributes/0/value: expected an OTLP AnyValue: "
            "exactly one of stringValue, boolValue, intValue, doubleValue, bytesValue, "
            "arrayValue, kvlistValue; got the keys intValue, stringValue",
        ),
        (
            lambda d: d["spans"][0]["attributes"].append(
                {"key": "n", "value": {"arrayValue": {"values": [{"intValue": 5}]}}}
            ),
            "otel record at /spans/0/attributes/0/value/arrayValue/values/0/intValue: expected "
            "a signed 64-bit integer as a decimal string, got a number (5)",
        ),
        (
            lambda d: d["conflicts"].append({"span_id": "00000000000000a1", "kept": "x"}),
            "otel record at /conflicts/0/other: required: a field of a conflict",
        ),
        (
            lambda d: d["seal"].update(profile="mace-v1"),
            'otel record at /seal/profile: expected one of jcs; got a string ("mace-v1")',
        ),
        (
            lambda d: d.update(spans={}),
            "otel record at /spans: expected an array, got an object ({})",
        ),
    ],
)
def test_a_malformed_field_is_refused_by_its_pointer(change, message):
    doc = _document()
    change(doc)
    refused = _refusal(doc)
    assert refused.code == errors.MALFORMED_TRACE
    assert refused.message == message


def test_an_any_value_of_every_kind_parses():
    doc = _document()
    doc["spans"][0]["attributes"] = [
        {"key": "s", "value": {"stringValue": "x"}},
        {"key": "b", "value": {"boolValue": False}},
        {"key": "i", "value": {"intValue": "-9223372036854775808"}},
        {"key": "d", "value": {"doubleValue": 0.5}},
        {"key": "nan", "value": {"doubleValue": "NaN"}},
        {"key": "bytes", "value": {"bytesValue": "AAEC"}},
        {"key": "empty", "value": {}},
        {"key": "a", "value": {"arrayValue": {"values": [{"stringValue": "y"}]}}},
        {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}}},
    ]
    rec.parse(json.dumps(doc).encode())  # no seal check here: the audit's


def test_strict_json_is_required():
    duplicate = b'{"otel_genai":1,"otel_genai":1}'
    refused = _refusal(None, raw=duplicate)
    assert refused.code == errors.MALFORMED_TRACE
    assert "duplicate key 'otel_genai'" in refused.message
    assert _refusal(None, raw=b"[1]").message == (
        "otel record at /: expected a JSON object, got an array ([1])"
    )
    bom = _refusal(None, raw=b"\xef\xbb\xbf" + sealed().data)
    assert "byte-order mark" in bom.message
    deep = b'{"otel_genai":1,"x":' + b"[" * 200 + b"]" * 200 + b"}"
    assert "nesting deeper than 160 levels" in _refusal(None, raw=deep).message


def test_a_record_too_large_is_refused_before_it_is_read():
    refused = _refusal(None, raw=b" " * (rec.MAX_RECORD_BYTES + 1))
    assert refused.message == f"otel record: larger than {rec.MAX_RECORD_BYTES} bytes"


def test_an_integer_jcs_cannot_write_is_malformed():
    doc = _document()
    doc["spans"][0]["request_parameters"] = {"seed": 2**60}
    refused = _refusal(doc)
    assert refused.code == errors.MALFORMED_TRACE
    assert refused.message.startswith("otel record: not canonicalisable (RFC 8785): ")


def test_utc_iso_and_nanos_iso():
    import datetime

    when = datetime.datetime(
        2025, 6, 1, 14, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
    )
    assert rec.utc_iso(when) == "2025-06-01T12:00:00.000Z"
    with pytest.raises(ValueError, match="naive"):
        rec.utc_iso(datetime.datetime(2025, 6, 1))
    assert rec.nanos_iso("1748772000000000000") == "2025-06-01T10:00:00.000000Z"
    assert rec.nanos_iso("1748772000123456999") == "2025-06-01T10:00:00.123456Z"
    assert rec.nanos_iso(str(2**64 - 1)) == "2554-07-21T23:34:33.709551Z"


# --- the real instrumentations' captured exports ------------------------------------------------


def _both_encodings() -> list[str]:
    sets = manifest()["sets"]
    return [
        name
        for name in fixture_sets()
        if {f.rsplit(".", 1)[1] for f in sets[name]["files"]} >= {"bin", "json"}
    ]


@pytest.mark.parametrize("name", _both_encodings())
def test_a_protobuf_and_a_json_export_of_one_run_seal_to_the_same_bytes(name):
    proto, as_json = fixture_record(name, "proto"), fixture_record(name, "json")
    assert proto.data == as_json.data
    assert proto.digest == proto.seal["digest"]


@pytest.mark.parametrize("name", fixture_sets())
def test_a_captured_run_seals_in_time_order_with_its_content(name):
    record = fixture_record(name)
    spans = record.spans
    assert [rec.span_order(s) for s in spans] == sorted(rec.span_order(s) for s in spans)
    assert record.trace_id == manifest()["sets"][name]["trace_id"]
    expected = "none" if "nocontent" in name else "full"
    assert record.content == expected
    # the record is exactly its JCS bytes
    assert jcs(record.document) == record.data


def test_spans_exported_one_by_one_seal_like_spans_exported_together():
    one_by_one = fixture_record("openai-v2-onebyone")
    assert len(one_by_one.spans) == 4
    assert [s["name"] for s in one_by_one.spans] == [
        "invoke_agent weather-agent",
        "chat gpt-4o-mini",
        "execute_tool get_weather",
        "chat gpt-4o-mini",
    ]


def test_seal_refuses_what_parse_would_refuse_for_its_size_or_depth(monkeypatch):
    monkeypatch.setattr(rec, "MAX_RECORD_BYTES", 1000)
    with pytest.raises(ReplayError) as refused:
        rec.seal(TRACE_ID, agent_run(), sealed_at=SEALED_AT, reason="quiet")
    assert refused.value.message.startswith("otel record: ")
    assert refused.value.message.endswith(" bytes sealed, more than a record may hold (1000 bytes)")
    monkeypatch.undo()
    spans = agent_run()
    deep: list = []
    for _ in range(200):
        deep = [deep]
    spans[0]["request_parameters"] = {"deep": deep}
    with pytest.raises(ReplayError, match="nesting deeper than 160 levels"):
        rec.seal(TRACE_ID, spans, sealed_at=SEALED_AT, reason="quiet")
