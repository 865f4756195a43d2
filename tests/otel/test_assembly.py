"""Real exporters' bodies through the receiver: grouped by trace id in any order, sealed into
one stored ``otel-genai`` trace (its digest in the ledger), audited, a late span opening the
next version, a tampered tool result diverging at its pointer."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from core.canonical import jcs
from core.ledger import codes
from governance.models import GovernanceEvent
from otel.models import OtelSpan, OtelTrace, OtlpBody, OtlpBodyDone
from otel.services import SealError, otel_seal, otel_seal_due
from replay.models import Trace
from replay.storage import blob_open
from tests.otel.helpers import (
    as_parts,
    only_trace_id,
    record_of,
    seen_messages,
    seen_parts,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("instrumentation", ["openai-v2", "openinference", "openllmetry"])
def test_each_instrumentation_lands_as_one_sealed_trace_holding_what_the_server_saw(
    send, instrumentation
):
    send(f"{instrumentation}-proto.bin")
    trace_id = only_trace_id()
    trace = otel_seal(trace_id=trace_id)
    assert (trace.format, trace.trace_id, trace.event_count) == ("otel-genai", trace_id, 4)
    assert trace.uploaded_by.username == "alice"  # whose exporter's token sent its spans
    assert trace.last_status == "ok", trace.ingest_report
    record = record_of(trace)
    calls = [s for s in record["spans"] if s["input_messages"] is not None]
    seen = seen_messages(f"{instrumentation}.seen.json")
    assert len(calls) == len(seen) == 2
    for call, messages in zip(calls, seen, strict=True):
        assert [as_parts(m) for m in call["input_messages"]] == [seen_parts(m) for m in messages]
    (tool,) = [s["tool"] for s in record["spans"] if s["tool"]]
    assert tool["name"] == "get_weather"
    assert tool["arguments"] == {"city": "Paris"}
    # the seal's digest is in the ledger, with the stored file's digest
    event = GovernanceEvent.objects.get(code=codes.code_of(codes.OTEL_TRACE_SEALED))
    assert event.payload["digest"] == record["seal"]["digest"]
    assert event.payload["file_sha256"] == trace.blob.sha256
    assert event.payload["version"] == 1
    state = OtelTrace.objects.get(trace_id=trace_id)
    assert (state.open, state.sealed_trace_id) == (False, trace.pk)


def test_protobuf_and_json_bodies_of_one_run_map_to_the_same_span_records(send):
    send("openai-v2-proto.bin")
    send("openai-v2-json.json")  # the same run, the SDK's JSON exporter beside the protobuf one
    assert OtlpBody.objects.count() == 2  # two bodies, each kept as received
    done = OtlpBodyDone.objects.order_by("body_id").last()
    assert (done.new_spans, done.duplicate_spans, done.conflicting_spans) == (0, 4, 0)
    assert OtelSpan.objects.count() == 4


def test_spans_one_by_one_children_first_assemble_into_one_trace(send):
    for n in (1, 2, 3):
        send(f"openai-v2-proto-onebyone-{n}.bin")
    state = OtelTrace.objects.get()
    assert (state.span_count, state.root_ended) == (3, False)
    # not due: no root yet, and quiet only just now
    assert otel_seal_due(now=timezone.now() + timedelta(seconds=60)) == []
    send("openai-v2-proto-onebyone-4.bin")  # the root, last, as an exporter sends it
    state.refresh_from_db()
    assert (state.span_count, state.root_ended) == (4, True)
    assert otel_seal_due(now=timezone.now()) == []  # not quiet for 30 s yet
    assert otel_seal_due(now=timezone.now() + timedelta(seconds=31)) == [state.trace_id]
    trace = Trace.objects.get(format="otel-genai")
    assert trace.last_status == "ok"
    assert trace.event_count == 4


def test_a_root_that_never_comes_is_sealed_after_the_orphan_delay(send):
    send("openai-v2-proto-onebyone-1.bin")
    now = timezone.now()
    assert otel_seal_due(now=now + timedelta(seconds=3599)) == []
    (trace_id,) = otel_seal_due(now=now + timedelta(seconds=3601))
    trace = Trace.objects.get(trace_id=trace_id)
    report = trace.ingest_report
    assert (report["status"], report["error_code"]) == ("refused", "INCOMPLETE_TRACE")
    assert [c["name"] for c in report["checks"]][-1] == "span_tree"
    assert "the trace is incomplete" in report["message"]
    assert record_of(trace)["seal"]["reason"] == "orphan"


def test_a_span_after_the_seal_opens_version_two_linked_to_the_first(send):
    for n in (1, 2, 3, 4):
        send(f"openai-v2-proto-onebyone-{n}.bin")
    trace_id = only_trace_id()
    first = otel_seal(trace_id=trace_id)
    with pytest.raises(SealError, match="nothing arrived since"):
        otel_seal(trace_id=trace_id)
    send("openai-v2-proto-stream.bin")  # another run: its own trace id
    assert OtelTrace.objects.count() == 2
    # the late span: the same trace id, a span id not seen (from the streaming run's body,
    # rewritten to this trace: a late span as an exporter would send one)
    late = OtelSpan.objects.exclude(trace_id=trace_id).first()
    assert late is not None
    from otel.services import _advance  # the late span, as otlp_read would add it

    row = OtelSpan.objects.create(
        trace_id=trace_id,
        span_id="00000000000000ff",
        digest="sha256:" + "0" * 64,
        parent_span_id=OtelSpan.objects.filter(trace_id=trace_id, parent_span_id="").get().span_id,
        name="late",
        start_ns=late.start_ns,
        end_ns=late.start_ns,
        record={**late.record, "span_id": "00000000000000ff"},
        body=late.body,
    )
    state = OtelTrace.objects.get(trace_id=trace_id)
    _advance(state, [row])
    state.refresh_from_db()
    assert (state.open, state.version) == (True, 2)
    second = otel_seal(trace_id=trace_id)
    assert second.pk != first.pk
    assert second.filename == f"{trace_id}.v2.otel.json"
    record = record_of(second)
    assert record["version"] == 2
    assert record["previous"] == record_of(first)["seal"]["digest"]
    assert len(record["spans"]) == 5


def test_a_tampered_tool_result_diverges_at_the_message_that_received_it(send):
    send("openai-v2-proto-divergent.bin")
    trace = otel_seal(trace_id=only_trace_id())
    report = trace.ingest_report
    assert trace.last_status == "diverged"
    assert report["error_code"] == "REPLAY_DIVERGENCE"
    (first, *_rest) = report["divergences"]
    assert first["path"].endswith("/parts/0/response")
    assert first["path"].startswith("/spans/")


def test_content_free_traces_get_the_structural_audit_and_say_so(send):
    send("openai-v2-proto-nocontent.bin")
    trace = otel_seal(trace_id=only_trace_id())
    assert trace.last_status == "ok"
    record = record_of(trace)
    assert record["content"] == "none"
    words = {c["name"]: c["detail"] for c in trace.ingest_report["checks"]}
    assert "without message content" in words["conversation"]


def test_the_seal_holds_under_a_replay_and_a_changed_byte_is_tamper(send, tmp_path):
    send("openai-v2-proto.bin")
    trace = otel_seal(trace_id=only_trace_id())
    data = record_of(trace)
    data["spans"][0]["name"] = "renamed"
    out = io.StringIO()
    path = tmp_path / "tampered.otel.json"
    path.write_bytes(jcs(data))
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json", stdout=out)
    assert exited.value.code == 1
    report = json.loads(out.getvalue())
    assert (report["status"], report["error_code"]) == ("tamper_detected", "INTEGRITY_FAILURE")


def test_the_command_seals_and_prints_the_record(send):
    send("openllmetry-proto.bin")
    trace_id = only_trace_id()
    out = io.StringIO()
    call_command("otel", "status", stdout=out)
    assert trace_id in out.getvalue()
    out = io.StringIO()
    call_command("otel", "seal", trace_id, stdout=out)
    assert f"{trace_id}\tsealed as {trace_id}.v1.otel.json\t4 spans\tok" in out.getvalue()
    out = io.StringIO()
    call_command("otel", "record", trace_id, stdout=out)
    trace = Trace.objects.get(trace_id=trace_id)
    with blob_open(trace.blob.storage_name) as fh:
        assert out.getvalue() == fh.read().decode() + "\n"
    with pytest.raises(CommandError, match="not an OpenTelemetry trace id"):
        call_command("otel", "record", "nope")
    with pytest.raises(CommandError, match="has no sealed version 7"):
        call_command("otel", "record", trace_id, "--version", "7")


def test_a_seal_refused_says_why_and_waits_for_another_span(send, monkeypatch, as_persona):
    from core.formats.otel import record

    for n in (1, 2, 3, 4):
        send(f"openai-v2-proto-onebyone-{n}.bin")
    trace_id = only_trace_id()
    monkeypatch.setattr(record, "MAX_RECORD_BYTES", 1000)  # a record larger than it reads
    later = timezone.now() + timedelta(seconds=31)
    assert otel_seal_due(now=later) == []
    state = OtelTrace.objects.get()
    assert state.open is True
    assert state.seal_error.startswith("MALFORMED_TRACE: ")
    assert "1000" in state.seal_error
    assert not Trace.objects.filter(format="otel-genai").exists()
    page = as_persona("vera").get(f"/otel/traces/{trace_id}/").content.decode()
    assert f"<code>{state.seal_error}</code>" in page
    out = io.StringIO()
    call_command("otel", "status", stdout=out)
    assert f"seal refused: {state.seal_error}" in out.getvalue()
    # not tried again at every sweep: the same refusal would be computed again for nothing
    calls = []
    monkeypatch.setattr("otel.services.otel_seal", lambda **kw: calls.append(kw))
    assert otel_seal_due(now=later + timedelta(seconds=60)) == []
    assert calls == []
    OtelTrace.objects.filter(pk=state.pk).update(last_span_at=timezone.now())  # a new span
    otel_seal_due(now=later + timedelta(seconds=120))
    assert calls == [{"trace_id": trace_id, "reason": "quiet"}]
