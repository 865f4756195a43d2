"""An erasure of a subject whose values are in a sealed OTel trace reaches the receiver's raw
copies: the bodies that carried the trace's spans lose their bytes, its span rows their
records (a tombstone), each the one update the database lets through; nothing else changes,
the ledger still verifies, a second erasure changes nothing, and the pages and ``otel``
commands still answer."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from governance.selectors import ledger_verify
from otel import erasure as otel_erasure
from otel.models import (
    SPAN_TOMBSTONE,
    ErasedBodyBytes,
    OtelSpan,
    OtelTrace,
    OtlpBody,
    OtlpBodyDone,
)
from otel.services import otel_seal
from privacy import erasure, subjects
from privacy.models import PersonalValue
from replay.models import AppendOnlyError
from replay.storage import blob_storage
from tests.console.personas import persona
from tests.otel.helpers import FIXTURES, record_of

pytestmark = pytest.mark.django_db

#: the conversation id stands for the person the trace concerns (a user id, an e-mail)
RULES = {
    "otel-genai": {
        "subject": ["/spans/*/conversation_id"],
        "personal": ["/spans/*/input_messages/*/parts/*/content"],
    }
}
ADA = "openai-v2-proto.bin"  # the trace of the subject erased
GRACE = "openinference-proto.bin"  # another trace, another body: untouched


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def rules(settings):
    settings.PRIVACY_PATH_RULES = RULES


def _trace_id_of(name: str) -> str:
    (trace_id,) = set(
        OtelSpan.objects.filter(body__sha256=_sha(name)).values_list("trace_id", flat=True)
    )
    return trace_id


def _sha(name: str) -> str:
    return hashlib.sha256(_fixture(name)).hexdigest()


@pytest.fixture
def sealed(send, rules):
    """Ada's trace and Grace's, each received in its own body and sealed."""
    send(ADA)
    send(GRACE)
    ada, grace = _trace_id_of(ADA), _trace_id_of(GRACE)
    return {"ada": otel_seal(trace_id=ada), "grace": otel_seal(trace_id=grace)}


def _ref(trace) -> str:
    (ref,) = set(PersonalValue.objects.filter(trace=trace).values_list("subject__ref", flat=True))
    return ref


def _shred(ref, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return erasure.shred([ref])


def _rows(trace_id):
    return list(
        OtelSpan.objects.filter(trace_id=trace_id)
        .order_by("pk")
        .values_list("pk", "trace_id", "span_id", "digest", "parent_span_id", "name", "start_ns")
    )


def test_an_otel_traces_values_are_indexed_by_the_path_rules(sealed):
    ada = sealed["ada"]
    record = record_of(ada)
    (conversation,) = {s["conversation_id"] for s in record["spans"]} - {None}
    assert subjects.lookup(conversation) == _ref(ada)
    paths = set(PersonalValue.objects.filter(trace=ada).values_list("path", flat=True))
    assert any(p.endswith("/conversation_id") for p in paths)
    assert any(p.endswith("/content") for p in paths)


def test_the_plan_names_the_bodies_and_spans_an_erasure_removes(sealed):
    ada = sealed["ada"]
    plan = erasure.plan([_ref(ada)])
    (raw,) = plan.raw_copies
    assert raw["copies"] == "otlp"
    assert raw["trace_ids"] == [ada.trace_id]
    assert raw["bodies"] == [_sha(ADA)]
    assert raw["spans"] == OtelSpan.objects.filter(trace_id=ada.trace_id).count() == 4
    assert raw["other_traces"] == 0
    assert raw["stays"] == list(otel_erasure.STAYS)
    # nothing is removed by planning
    assert not OtelSpan.objects.filter(erased_at__isnull=False).exists()
    assert blob_storage().exists(OtlpBody.objects.get(sha256=_sha(ADA)).storage_name)


def test_it_deletes_the_bodies_and_tombstones_the_spans_of_the_trace_only(
    sealed, django_capture_on_commit_callbacks
):
    ada, grace = sealed["ada"], sealed["grace"]
    before = _rows(ada.trace_id)
    grace_before = list(OtelSpan.objects.filter(trace_id=grace.trace_id).values())
    grace_body = OtlpBody.objects.get(sha256=_sha(GRACE))

    outcome = _shred(_ref(ada), django_capture_on_commit_callbacks)

    (raw,) = outcome.raw_copies
    assert (raw["bodies"], raw["spans"], raw["trace_ids"]) == ([_sha(ADA)], 4, [ada.trace_id])
    body = OtlpBody.objects.get(sha256=_sha(ADA))
    assert body.erased_at is not None
    assert not blob_storage().exists(body.storage_name)
    assert not ErasedBodyBytes.objects.exists()  # nothing left for the sweep
    spans = OtelSpan.objects.filter(trace_id=ada.trace_id)
    assert {s.record == SPAN_TOMBSTONE and s.erased_at == body.erased_at for s in spans} == {True}
    # every other column as it was; the body row, its digest and the read marker stay
    assert _rows(ada.trace_id) == before
    assert (body.size, body.span_count) == (len(_fixture(ADA)), 4)
    assert OtlpBodyDone.objects.filter(body=body).exists()
    # Grace's trace: its body's bytes and its span rows untouched
    assert list(OtelSpan.objects.filter(trace_id=grace.trace_id).values()) == grace_before
    assert blob_storage().exists(grace_body.storage_name)
    assert OtlpBody.objects.get(pk=grace_body.pk).erased_at is None
    assert ledger_verify().ok


def test_a_second_erasure_changes_nothing(sealed, django_capture_on_commit_callbacks):
    ref = _ref(sealed["ada"])
    first = _shred(ref, django_capture_on_commit_callbacks)
    at = list(OtelSpan.objects.values_list("pk", "erased_at").order_by("pk"))

    again = _shred(ref, django_capture_on_commit_callbacks)

    assert again.first_time is False
    assert again.raw_copies == first.raw_copies
    assert list(OtelSpan.objects.values_list("pk", "erased_at").order_by("pk")) == at
    assert erasure.plan([ref]).raw_copies == []
    # the raw copies' own erasure, called again, finds nothing left to remove
    assert otel_erasure.otel_erase([sealed["ada"].pk], timezone.now()) is None


def test_a_blob_store_that_refuses_the_deletion_leaves_the_bytes_to_the_sweep(
    sealed, django_capture_on_commit_callbacks, monkeypatch, caplog
):
    storage = blob_storage()
    name = OtlpBody.objects.get(sha256=_sha(ADA)).storage_name

    def refuse(_name):
        raise OSError("read-only")

    with monkeypatch.context() as patched:
        patched.setattr(type(storage), "delete", lambda self, n: refuse(n))
        _shred(_ref(sealed["ada"]), django_capture_on_commit_callbacks)
    # the erasure stands (rows marked, records gone); the bytes wait for the sweep
    assert OtlpBody.objects.get(sha256=_sha(ADA)).erased_at is not None
    assert storage.exists(name)
    assert "not deleted" in caplog.text
    assert list(ErasedBodyBytes.objects.values_list("storage_name", flat=True)) == [name]

    out = StringIO()
    call_command("otel", "sweep", stdout=out)
    assert (
        out.getvalue() == "read 0 bodies, sealed 0 traces, deleted the bytes of 1 erased bodies\n"
    )
    assert not storage.exists(name)
    assert not ErasedBodyBytes.objects.exists()
    assert otel_erasure.otlp_erased_content_sweep() == 0


def _failing_erasure(ref):
    with transaction.atomic():
        erasure.shred([ref])
        raise RuntimeError("the DSR receipt failed")


def test_an_erasure_rolled_back_deletes_no_bytes(sealed, django_capture_on_commit_callbacks):
    name = OtlpBody.objects.get(sha256=_sha(ADA)).storage_name
    ref = _ref(sealed["ada"])
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
    ):
        _failing_erasure(ref)
    assert callbacks == []
    assert blob_storage().exists(name)
    assert OtlpBody.objects.get(sha256=_sha(ADA)).erased_at is None
    assert not OtelSpan.objects.filter(erased_at__isnull=False).exists()
    assert not ErasedBodyBytes.objects.exists()


def test_the_readers_say_an_erased_body_or_span_is_gone(sealed, django_capture_on_commit_callbacks):
    ada = sealed["ada"]
    _shred(_ref(ada), django_capture_on_commit_callbacks)
    body = OtlpBody.objects.get(sha256=_sha(ADA))
    refusal = otel_erasure.body_refusal(body)
    assert refusal is not None
    assert str(refusal).startswith(f"OTLP body {body.sha256} was erased on ")
    assert otel_erasure.body_refusal(OtlpBody.objects.get(sha256=_sha(GRACE))) is None
    assert not otel_erasure.live_spans(ada.trace_id).exists()
    assert otel_erasure.live_spans(sealed["grace"].trace_id).count() == 4


def test_the_pages_and_the_otel_commands_still_answer(
    sealed, django_capture_on_commit_callbacks, as_persona
):
    ada = sealed["ada"]
    _shred(_ref(ada), django_capture_on_commit_callbacks)
    out = StringIO()
    call_command("otel", "status", stdout=out)
    assert out.getvalue() == "no open OpenTelemetry trace\n"
    out = StringIO()
    call_command("otel", "record", ada.trace_id, stdout=out)
    assert '"otel_genai":1' in out.getvalue()
    client = Client()
    client.force_login(persona("alice"))
    page = client.get(reverse("trace-detail", args=[ada.blob.sha256]))
    assert page.status_code == 200
    sealed_page = client.get(reverse("otel-open-detail", args=[ada.trace_id]))
    assert sealed_page.status_code == 302  # to the sealed trace's page, as before


def test_an_open_trace_page_leaves_out_the_erased_spans_and_says_so(
    sealed, django_capture_on_commit_callbacks
):
    ada = sealed["ada"]
    _shred(_ref(ada), django_capture_on_commit_callbacks)
    # a span arrives after the erasure: the trace opens its next version
    OtelTrace.objects.filter(trace_id=ada.trace_id).update(open=True, version=2)
    client = Client()
    client.force_login(persona("alice"))
    page = client.get(reverse("otel-open-detail", args=[ada.trace_id]))
    assert page.status_code == 200
    assert b'id="otel-spans-erased"' in page.content
    assert b"4 spans received before a personal-data erasure are not shown" in page.content


def test_a_span_after_the_erasure_opens_a_version_without_the_erased_spans(
    sealed, django_capture_on_commit_callbacks
):
    from otel.services import _advance  # the late span, as otlp_read would add it

    ada = sealed["ada"]
    first = OtelTrace.objects.get(trace_id=ada.trace_id).sealed_digest
    _shred(_ref(ada), django_capture_on_commit_callbacks)
    other = OtelSpan.objects.exclude(trace_id=ada.trace_id).first()
    root = OtelSpan.objects.get(trace_id=ada.trace_id, parent_span_id="")
    late = OtelSpan.objects.create(
        trace_id=ada.trace_id,
        span_id="00000000000000ff",
        digest="sha256:" + "0" * 64,
        parent_span_id=root.span_id,
        name="late",
        start_ns=root.start_ns,
        end_ns=root.start_ns,
        record={**other.record, "span_id": "00000000000000ff", "parent_span_id": root.span_id},
        body=other.body,
    )
    _advance(OtelTrace.objects.get(trace_id=ada.trace_id), [late])

    second = otel_seal(trace_id=ada.trace_id)

    record = record_of(second)
    assert (record["version"], record["previous"]) == (2, first)
    assert [s["span_id"] for s in record["spans"]] == ["00000000000000ff"]
    # its parent was erased: the audit says the trace is incomplete
    assert second.ingest_report["error_code"] == "INCOMPLETE_TRACE"


# --- the database lets through the erasure's update and nothing else -----------------------


def _raw(sql, params):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)


@pytest.fixture
def span(send):
    send(ADA)
    return OtelSpan.objects.order_by("pk").first()


def test_the_database_lets_an_erasure_tombstone_a_span_once(span):
    now = timezone.now()
    assert OtelSpan.objects.filter(pk=span.pk).update(record=SPAN_TOMBSTONE, erased_at=now) == 1
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE otel_otelspan SET erased_at = %s WHERE id = %s", [timezone.now(), span.pk])
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE otel_otelspan SET erased_at = NULL WHERE id = %s", [span.pk])
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM otel_otelspan WHERE id = %s", [span.pk])
    with pytest.raises(AppendOnlyError):
        span.delete()


@pytest.mark.parametrize(
    ("assignment", "value"),
    [
        ("record = %s", '{"erased": false}'),
        ("record = %s", '{"span_id": "x"}'),
        ("name = %s", "renamed"),
        ("digest = %s", "sha256:" + "0" * 64),
        ("start_ns = %s", 1),
    ],
)
def test_the_database_refuses_any_other_change_to_a_span(span, assignment, value):
    tombstone = '{"erased": true}'
    sets = f"erased_at = %s, {assignment}"
    params = [timezone.now(), value, span.pk]
    if not assignment.startswith("record"):
        sets += ", record = %s"
        params = [timezone.now(), value, tombstone, span.pk]
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(f"UPDATE otel_otelspan SET {sets} WHERE id = %s", params)  # noqa: S608 - fixed columns
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE otel_otelspan SET record = %s WHERE id = %s", [tombstone, span.pk])
    span.refresh_from_db()
    assert span.erased_at is None
    assert span.record != SPAN_TOMBSTONE


def test_the_database_lets_an_erasure_mark_a_body_once_and_nothing_else(span):
    body = span.body
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(
            "UPDATE otel_otlpbody SET erased_at = %s, size = 1 WHERE id = %s",
            [timezone.now(), body.pk],
        )
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(
            "UPDATE otel_otlpbody SET erased_at = %s, sha256 = %s WHERE id = %s",
            [timezone.now(), "0" * 64, body.pk],
        )
    _raw("UPDATE otel_otlpbody SET erased_at = %s WHERE id = %s", [timezone.now(), body.pk])
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE otel_otlpbody SET erased_at = %s WHERE id = %s", [timezone.now(), body.pk])
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM otel_otlpbody WHERE id = %s", [body.pk])
    body.refresh_from_db()
    assert body.erased_at is not None
    assert body.size == len(_fixture(ADA))
