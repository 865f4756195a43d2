"""The background reader (``otel.services.otlp_read``): a stored body's spans into rows, on
SQLite (the ORM's insert, the embedded default) and on PostgreSQL (one COPY): every column as
the ORM writes it, a span sent again skipped, a span id sent again with other content kept
beside the first and counted as a conflict, the traces' rows brought up to date and the body
marked read in the same transaction, the rows still append-only; the sweep passing over a
body another runner is reading.

Run on PostgreSQL with ``DATABASE_URL=postgres://...`` (CI's second suite); the tests marked
``postgres`` need it."""

from __future__ import annotations

import hashlib
import threading

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2 as c
from opentelemetry.proto.resource.v1 import resource_pb2 as r
from opentelemetry.proto.trace.v1 import trace_pb2 as t

from core.canonical import jcs
from core.formats.otel import mapping, otlp
from otel import services, tasks
from otel.models import OtelSpan, OtelTrace, OtlpBody, OtlpBodyDone
from tests.console.personas import persona

pytestmark = pytest.mark.django_db

TRACE_A = bytes(range(1, 17))
TRACE_B = bytes(range(17, 33))
ROOT = (1).to_bytes(8, "big")
#: doubles written otherwise by RFC 8785, orjson and Python (1e+16: 10000000000000000, ...)
DOUBLES = (1e21, 1e16, 1e-7, 1e-05, 0.2, 123.456, -0.0, 5e-324, 2.0**60)
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="COPY is PostgreSQL's: DATABASE_URL=postgres://..."
)


def kv(key: str, **value) -> c.KeyValue:
    return c.KeyValue(key=key, value=c.AnyValue(**value))


def span(trace: bytes, number: int, *, name: str = "chat gpt-4o", root: bool = False, **attrs):
    return t.Span(
        trace_id=trace,
        span_id=number.to_bytes(8, "big"),
        parent_span_id=b"" if root else ROOT,
        name=name,
        kind=t.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_000 + number,
        end_time_unix_nano=1_700_000_000_000_000_000 + 1000 + number,
        attributes=[kv(k, **v) for k, v in attrs.items()],
    )


def body_of(*spans: t.Span) -> bytes:
    return ExportTraceServiceRequest(
        resource_spans=[
            t.ResourceSpans(
                resource=r.Resource(attributes=[kv("service.name", string_value="weather")]),
                scope_spans=[t.ScopeSpans(spans=list(spans))],
            )
        ]
    ).SerializeToString()


def read(data: bytes) -> OtlpBodyDone:
    """Store a body as the request path does, then read it as the worker does."""
    received = services.otlp_receive(
        body=data, content_type=otlp.PROTOBUF, user=persona("alice"), enqueue=False
    )
    done = services.otlp_read(body_pk=OtlpBody.objects.get(sha256=received.sha256).pk)
    assert done is not None
    return done


def counts(done: OtlpBodyDone) -> tuple[int, int, int]:
    return (done.new_spans, done.duplicate_spans, done.conflicting_spans)


def test_it_writes_every_column_as_the_orm_would(settings):
    spans = [
        span(TRACE_A, 1, name="invoke_agent weather", root=True),
        span(
            TRACE_A,
            2,
            **{"gen_ai.request.temperature": {"double_value": 1.0}},
            **{f"d{n}": {"double_value": x} for n, x in enumerate(DOUBLES)},
        ),
        span(TRACE_A, 3, name="x" * 300, **{"n": {"int_value": 2**62}, "é✓😀": {"bool_value": 1}}),
        span(TRACE_B, 4, name="tab\there\nnewline \\ backslash", root=True),
    ]
    data = body_of(*spans)
    done = read(data)
    assert counts(done) == (4, 0, 0)
    plains = otlp.decode(data, otlp.PROTOBUF).spans
    expected = [mapping.span_record(plain) for plain in plains]
    rows = list(OtelSpan.objects.order_by("pk"))
    assert [row.span_id for row in rows] == [e["span_id"] for e in expected]
    # the records as the ORM stores them (PostgreSQL's jsonb reads 1e+21 back as an integer)
    by_orm = OtelSpan.objects.bulk_create(
        [
            OtelSpan(
                trace_id="f" * 32,
                span_id=row.span_id,
                digest=row.digest,
                name=row.name,
                start_ns=0,
                end_ns=0,
                record=record,
                body_id=done.body_id,
            )
            for row, record in zip(rows, expected, strict=True)
        ]
    )
    stored = dict(
        OtelSpan.objects.filter(pk__in=[r.pk for r in by_orm]).values_list("span_id", "record")
    )
    for row, record, plain in zip(rows, expected, plains, strict=True):
        assert row.record == stored[row.span_id]
        assert row.digest == "sha256:" + hashlib.sha256(jcs(record)).hexdigest()
        assert row.trace_id == plain["trace_id"]
        assert row.parent_span_id == (record["parent_span_id"] or "")
        assert row.name == record["name"][:255]
        assert (row.start_ns, row.end_ns) == (
            int(record["start_time_unix_nano"]),
            int(record["end_time_unix_nano"]),
        )
        assert row.body_id == done.body_id
        assert row.received_at is not None
    # a float the ORM keeps a float stays one (1.0, not 1 as RFC 8785 writes it)
    doubles = {a["key"]: a["value"]["doubleValue"] for a in rows[1].record["attributes"]}
    for key in ("gen_ai.request.temperature", "d2", "d3", "d4", "d5", "d6", "d7"):
        assert type(doubles[key]) is float, key
    assert rows[2].record["attributes"][0]["value"] == {"intValue": str(2**62)}
    a = OtelTrace.objects.get(trace_id=TRACE_A.hex())
    assert (a.span_count, a.root_ended, a.root_name, a.service, a.open) == (
        3,
        True,
        "invoke_agent weather",
        "weather",
        True,
    )
    assert OtelTrace.objects.get(trace_id=TRACE_B.hex()).span_count == 1


def test_a_body_sent_again_with_one_new_span_stores_only_that_span():
    read(body_of(span(TRACE_A, 2), span(TRACE_A, 3)))
    done = read(body_of(span(TRACE_A, 2), span(TRACE_A, 3), span(TRACE_A, 1, root=True)))
    assert counts(done) == (1, 2, 0)
    assert OtelSpan.objects.count() == 3
    state = OtelTrace.objects.get()
    assert (state.span_count, state.root_ended) == (3, True)


def test_a_span_id_sent_again_with_other_content_is_kept_beside_the_first():
    read(body_of(span(TRACE_A, 1, root=True), span(TRACE_A, 2, name="first")))
    done = read(body_of(span(TRACE_A, 2, name="second"), span(TRACE_A, 2, name="first")))
    assert counts(done) == (1, 1, 1)
    assert list(
        OtelSpan.objects.filter(span_id=(2).to_bytes(8, "big").hex())
        .order_by("pk")
        .values_list("name", flat=True)
    ) == ["first", "second"]
    sealed = services.otel_seal(trace_id=TRACE_A.hex())
    assert sealed.event_count == 2  # the first copy sealed, the second named a conflict
    # and the same three again change nothing
    done = read(
        body_of(span(TRACE_A, 2, name="second"), span(TRACE_A, 1, root=True))
        + body_of(span(TRACE_A, 2, name="first"))
    )
    assert counts(done) == (0, 3, 0)


def test_one_body_holding_a_span_id_twice_with_other_content():
    done = read(
        body_of(
            span(TRACE_A, 5, name="a"),
            span(TRACE_A, 5, name="b"),
            span(TRACE_A, 5, name="b"),
            span(TRACE_A, 5, name="a"),
        )
    )
    assert counts(done) == (2, 2, 1)
    assert OtelTrace.objects.get().span_count == 2


def test_a_body_read_twice_is_read_once():
    data = body_of(span(TRACE_A, 1, root=True))
    done = read(data)
    again = services.otlp_read(body_pk=done.body_id)
    assert again == done
    assert OtelSpan.objects.count() == 1
    assert services.otlp_read(body_pk=done.body_id + 1000) is None


def test_the_span_rows_stay_append_only():
    read(body_of(span(TRACE_A, 1, root=True)))
    for sql in ("UPDATE otel_otelspan SET name = 'forged'", "DELETE FROM otel_otelspan"):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
    assert OtelSpan.objects.get().name == "chat gpt-4o"


def test_each_vendor_writes_through_its_own_path(monkeypatch):
    used = []
    copy, bulk = services._spans_copy, OtelSpan.objects.bulk_create

    def spy_copy(rows, body):
        used.append("copy")
        return copy(rows, body)

    def spy_bulk(*args, **kwargs):
        used.append("orm")
        return bulk(*args, **kwargs)

    monkeypatch.setattr(services, "_spans_copy", spy_copy)
    monkeypatch.setattr(OtelSpan.objects, "bulk_create", spy_bulk)
    read(body_of(span(TRACE_A, 1, root=True)))
    assert used == (["copy"] if connection.vendor == "postgresql" else ["orm"])


@pytest.mark.postgres
@on_postgresql
def test_a_row_already_stored_makes_the_copy_fall_back_to_the_orm(monkeypatch, caplog):
    read(body_of(span(TRACE_A, 1, root=True), span(TRACE_A, 2)))
    monkeypatch.setattr(services, "_known", lambda by_trace: {})  # as if none were stored
    done = read(body_of(span(TRACE_A, 1, root=True), span(TRACE_A, 2), span(TRACE_A, 3)))
    assert "a span row was already stored" in caplog.text
    assert OtelSpan.objects.count() == 3  # the COPY rolled back, the ORM skipped the two
    assert OtlpBodyDone.objects.filter(body_id=done.body_id).exists()
    assert OtelTrace.objects.get().span_count == 3


def _database_url() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.postgres
@on_postgresql
@pytest.mark.usefixtures("flushable_transactional_db")
def test_the_sweep_and_a_queued_read_pass_over_a_body_another_runner_is_reading():
    received = services.otlp_receive(
        body=body_of(span(TRACE_A, 1, root=True)),
        content_type=otlp.PROTOBUF,
        user=persona("alice"),
        enqueue=False,
    )
    pk = OtlpBody.objects.get(sha256=received.sha256).pk
    locked, release = threading.Event(), threading.Event()

    def other_runner() -> None:  # holds the body's row, as a reading task does
        with psycopg.connect(_database_url()) as other, other.transaction():
            other.execute("SELECT 1 FROM otel_otlpbody WHERE id = %s FOR UPDATE", [pk])
            locked.set()
            release.wait(30)

    runner = threading.Thread(target=other_runner)
    runner.start()
    try:
        assert locked.wait(30)
        assert services.otlp_read_pending() == 0
        assert tasks.otlp_read_body(pk) == 0  # not waiting for the other runner
        assert not OtlpBodyDone.objects.exists()
    finally:
        release.set()
        runner.join()
    assert services.otlp_read_pending() == 1
    assert OtelSpan.objects.count() == 1
