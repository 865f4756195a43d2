"""An OpenTelemetry trace's facts (the services, models, operations, conversation ids and agent
names the trace list filters by, and its counts): computed from its record
(``core.formats.otel.facts``), written with it whatever stored it (a seal, an OTLP export
uploaded on the page or with ``manage.py ingest``), kept append-only, withheld where privacy
rules say a field is personal, and filled for traces stored before with ``otel refacts``."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from core.formats.otel import facts
from core.formats.otel import record as rec
from otel.models import OtelFactValue, OtelTraceFacts, OtelTraceValue
from otel.services import otel_seal
from replay.models import AppendOnlyError, Blob, Trace
from replay.services import trace_ingest
from replay.signals import trace_stored
from tests.console.conftest import ingest, trace_key  # noqa: F401 - fixtures, by name
from tests.otel.helpers import FIXTURES, only_trace_id
from tests.otel.sealed import otel_trace

EXPORT = FIXTURES / "openai-v2-json.json"
#: what the openai-v2 export's record holds (its agent span, two chat calls and a tool)
EXPORT_FACTS = {
    "service_names": ["otel-test-client"],
    "model_names": ["gpt-4o-mini", "gpt-4o-mini-2024-07-18"],
    "operation_names": ["invoke_agent", "chat", "execute_tool"],
    "conversation_ids": ["conv-4768be1a9daf48a6"],
    "agent_names": ["weather-agent"],
    "provider_names": ["openai"],
    "span_count": 4,
    "model_call_count": 2,
    "tool_call_count": 1,
    "input_tokens": 157,  # 61 + 96: the calls', not the agent span's sum of them again
    "output_tokens": 29,
}


def facts_row(trace: Trace) -> dict:
    row = OtelTraceFacts.objects.get(trace=trace)
    return {name: getattr(row, name) for name in EXPORT_FACTS}


def values_of(trace: Trace) -> set[tuple[str, str]]:
    return set(
        OtelTraceValue.objects.filter(trace=trace).values_list("value__kind", "value__value")
    )


# --- pure: from a record ---------------------------------------------------------------------


def _record(**span_changes) -> rec.Record:
    assembled = rec.assemble_export(EXPORT.read_bytes())
    spans = [{**s, **span_changes} for s in assembled.spans]
    document, _data, digest = rec.seal(
        assembled.trace_id, spans, sealed_at="2026-01-01T00:00:00.000Z", reason="upload"
    )
    return rec.Record(document, digest)


def test_the_facts_of_a_real_export_in_span_order():
    found = facts.facts_of(rec.seal_export(EXPORT.read_bytes(), sealed_at="2026-01-01T00:00:00Z"))
    assert found == facts.Facts(
        services=("otel-test-client",),
        models=("gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
        operations=("invoke_agent", "chat", "execute_tool"),
        conversations=("conv-4768be1a9daf48a6",),
        agents=("weather-agent",),
        providers=("openai",),
        span_count=4,
        model_call_count=2,
        tool_call_count=1,
        input_tokens=157,
        output_tokens=29,
    )
    assert list(found.values()) == [
        ("service", "otel-test-client"),
        ("model", "gpt-4o-mini"),
        ("model", "gpt-4o-mini-2024-07-18"),
        ("operation", "invoke_agent"),
        ("operation", "chat"),
        ("operation", "execute_tool"),
        ("conversation", "conv-4768be1a9daf48a6"),
        ("agent", "weather-agent"),
    ]


def test_values_a_filter_cannot_name_are_left_out_and_long_ones_cut():
    found = facts.facts_of(_record(service="  svc\u00a0one  ", agent_name="bad\x00name"))
    assert found.services == ("svc\u00a0one",)  # trimmed; a no-break space is printable
    assert found.agents == ()  # a NUL: not a value anyone can type, nor PostgreSQL store
    long = facts.facts_of(_record(service="s" * 300))
    assert long.services == ("s" * facts.MAX_VALUE,)
    assert facts.facts_of(_record(service=None)).services == ()


def test_usage_unrecorded_is_none_not_zero():
    found = facts.facts_of(_record(usage=None))
    assert (found.input_tokens, found.output_tokens) == (None, None)


INVISIBLE = "a value holds no control or invisible character (it holds {} at {})"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("gpt-4o", None),
        ("Wetter-Agent ü 天気", None),
        ("x" * 255, None),
        ("x" * 256, "at most 255 characters (it has 256)"),
        ("a\x01b", INVISIBLE.format("U+0001", 2)),
        ("tab\there", INVISIBLE.format("U+0009", 4)),
        ("zero\u200bwidth", INVISIBLE.format("U+200B", 5)),
        ("rtl\u202eoverride", INVISIBLE.format("U+202E", 4)),
        ("line\u2028sep", INVISIBLE.format("U+2028", 5)),
    ],
)
def test_what_a_filter_value_may_hold(value, problem):
    assert facts.problem(value) == problem


@pytest.mark.parametrize(
    ("pointers", "withheld"),
    [
        ([], set()),
        (["/spans/*/conversation_id"], {"conversation_id"}),
        (["/spans/3/agent_name", "/spans/*/service"], {"agent_name", "service"}),
        (["/spans/*/input_messages/*/parts/*/content"], set()),  # message text: no fact
        (["/spans/*/tool/name"], set()),
        (["/spans"], facts.FACT_FIELDS),
        (["/spans/*"], facts.FACT_FIELDS),
        (["/spans/*/*"], facts.FACT_FIELDS),
        (["/*/*/request_model"], {"request_model"}),
        (["/spans/x/service", "/trace_id", "no pointer"], set()),
    ],
)
def test_privacy_rules_withhold_the_fields_they_name(pointers, withheld):
    assert facts.withheld_by(pointers) == withheld


def test_a_withheld_field_leaves_its_values_out():
    found = facts.facts_of(_record(), withheld={"conversation_id", "response_model"})
    assert found.conversations == ()
    assert found.models == ("gpt-4o-mini",)


# --- written with the trace, whatever stored it ----------------------------------------------

needs_db = pytest.mark.django_db


@needs_db
def test_a_sealed_trace_gets_its_facts_in_the_transaction_that_stores_it(send):
    send("openai-v2-json.json")
    trace = otel_seal(trace_id=only_trace_id())
    assert facts_row(trace) == EXPORT_FACTS
    assert values_of(trace) == {
        ("service", "otel-test-client"),
        ("model", "gpt-4o-mini"),
        ("model", "gpt-4o-mini-2024-07-18"),
        ("operation", "invoke_agent"),
        ("operation", "chat"),
        ("operation", "execute_tool"),
        ("conversation", "conv-4768be1a9daf48a6"),
        ("agent", "weather-agent"),
    }


@needs_db
def test_an_otlp_export_uploaded_on_the_page_gets_its_facts(as_persona):
    response = as_persona("alice").post(
        "/traces/upload/", {"files": [SimpleUploadedFile("run.otlp.json", EXPORT.read_bytes())]}
    )
    assert response.status_code == 200
    assert response.content.decode().count('class="upload-outcome accepted"') == 1
    (trace,) = Trace.objects.all()
    assert (trace.format, trace.filename) == ("otel-genai", "run.otlp.json")
    assert facts_row(trace) == EXPORT_FACTS


@needs_db
def test_an_otlp_export_ingested_by_the_command_gets_its_facts(tmp_path):
    path = tmp_path / "run.otlp.json"
    path.write_bytes(EXPORT.read_bytes())
    call_command("ingest", str(path), stdout=io.StringIO())
    (trace,) = Trace.objects.all()
    assert facts_row(trace) == EXPORT_FACTS


@needs_db
def test_another_format_gets_no_facts(ingest):  # noqa: F811 - the fixture
    ingest("ok")
    assert not OtelTraceFacts.objects.exists()
    assert not OtelFactValue.objects.exists()


@needs_db
def test_traces_sharing_a_value_share_its_one_row():
    a = otel_trace(service="svc-a", conversation="c-1")
    b = otel_trace(service="svc-a", conversation="c-2")
    assert list(OtelFactValue.objects.filter(kind="service").values_list("value", flat=True)) == [
        "svc-a"
    ]
    assert {v for k, v in values_of(a) if k == "conversation"} == {"c-1"}
    assert {v for k, v in values_of(b) if k == "conversation"} == {"c-2"}


@needs_db
def test_a_field_privacy_names_personal_is_not_kept_in_plain(settings):
    settings.PRIVACY_PATH_RULES = {"otel-genai": {"personal": ["/spans/*/conversation_id"]}}
    trace = otel_trace(conversation="conv-of-a-person")
    row = OtelTraceFacts.objects.get(trace=trace)
    assert row.conversation_ids == []
    assert not OtelFactValue.objects.filter(kind="conversation").exists()
    assert row.agent_names == ["weather-agent"]


@needs_db
def test_the_facts_are_append_only_in_the_orm_and_in_the_database():
    trace = otel_trace()
    row = OtelTraceFacts.objects.get(trace=trace)
    with pytest.raises(AppendOnlyError):
        row.save()
    with pytest.raises(AppendOnlyError):
        row.delete()
    for table in ("otel_oteltracefacts", "otel_otelfactvalue", "otel_oteltracevalue"):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cur,
        ):
            cur.execute(f"DELETE FROM {table}")  # noqa: S608 - the test's own table names


# --- otel refacts: the traces stored before the facts were kept -------------------------------


@pytest.fixture
def stored_without_facts(db):
    """Two OTel traces stored as before the facts existed (the receiver not connected)."""
    trace_stored.disconnect(dispatch_uid="otel.facts")
    try:
        old = trace_ingest(source=io.BytesIO(EXPORT.read_bytes()), filename="old.otlp.json").trace
        expired = otel_trace(service="gone")
    finally:
        from otel.facts import on_trace_stored

        trace_stored.connect(on_trace_stored, dispatch_uid="otel.facts")
    Blob.objects.filter(pk=expired.blob_id).update(expired_at=timezone.now())
    Trace.objects.filter(pk=expired.pk).update(expired_at=timezone.now())
    assert not OtelTraceFacts.objects.exists()
    return old, expired


@needs_db
def test_refacts_fills_the_facts_of_traces_stored_before_them(stored_without_facts):
    old, _expired = stored_without_facts
    out = io.StringIO()
    call_command("otel", "refacts", stdout=out)
    assert out.getvalue() == (
        "filled the facts of 1 traces; 1 expired by retention have no file to read\n"
    )
    assert facts_row(old) == EXPORT_FACTS
    assert list(OtelTraceFacts.objects.values_list("trace_id", flat=True)) == [old.pk]
    out = io.StringIO()
    call_command("otel", "refacts", stdout=out)  # again: nothing left to fill
    assert out.getvalue() == (
        "filled the facts of 0 traces; 1 expired by retention have no file to read\n"
    )


@needs_db
def test_refacts_names_a_file_it_cannot_read_and_exits_1(stored_without_facts, monkeypatch):
    old, _expired = stored_without_facts

    def unreadable(name):
        raise OSError(f"no such blob {name}")

    monkeypatch.setattr("otel.facts.blob_open", unreadable)
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 traces not read") as exited:
        call_command("otel", "refacts", stdout=io.StringIO(), stderr=err)
    assert exited.value.returncode == 1
    assert err.getvalue() == (
        f"{old.trace_id} (old.otlp.json): no such blob {old.blob.storage_name}\n"
    )
    assert not OtelTraceFacts.objects.exists()
