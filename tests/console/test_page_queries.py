"""What a page costs in queries does not grow with what it shows (issue 23): a trace page opens
its stored file once, so the personal values are reassembled once
(``privacy.ingest.reassemble`` reads ``privacy_sealedblob`` once per opening), whether the
trace has 11 events or 100,000; the trace list's queries do not grow with its rows; the run
report reads the file once too. The bounds are today's counts: a new query per page is a
choice to make here, not a drift."""

from __future__ import annotations

import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.formats import native

pytestmark = pytest.mark.django_db


def _openings(queries: CaptureQueriesContext) -> int:
    """How many times the request opened a stored file (each opening asks whether the file
    is sealed, ``privacy.ingest.reassemble``)."""
    return sum('FROM "privacy_sealedblob"' in q["sql"] for q in queries.captured_queries)


def _get(client, url: str, max_queries: int, django_assert_max_num_queries) -> tuple[int, int]:
    with (
        django_assert_max_num_queries(max_queries),
        CaptureQueriesContext(connection) as queries,
    ):
        response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return len(queries.captured_queries), _openings(queries)


#: a trace page's queries: the session and user, roles, the trace, its runs, its sealed blob and
#: personal values (one reassembly), its snapshots (once: the outline's and the missing box's),
#: the active halts (one query with their clears), its index, the other copies and other runs
#: of its job (the compare-with form), its production requests and its auditors' notes
TRACE_PAGE = 14


def _snapshot_lookups(queries: CaptureQueriesContext) -> int:
    return sum('FROM "replay_snapshot"' in q["sql"] for q in queries.captured_queries)


def test_a_small_trace_page_opens_its_file_once(as_persona, ingest, django_assert_max_num_queries):
    from privacy.models import PersonalValue

    trace = ingest("ok")
    assert PersonalValue.objects.filter(trace=trace).exists()  # it is reassembled on reading
    client = as_persona("vera")
    client.get(f"/traces/{trace.blob.sha256}/")  # its index stored

    count, openings = _get(
        client, f"/traces/{trace.blob.sha256}/", TRACE_PAGE, django_assert_max_num_queries
    )
    assert (count, openings) == (TRACE_PAGE, 1)
    steps = f"/traces/{trace.blob.sha256}/?steps_after=2&after=3"
    assert _get(client, steps, TRACE_PAGE, django_assert_max_num_queries) == (TRACE_PAGE, 1)


def test_a_trace_page_asks_for_its_snapshots_once(as_persona, ingest):
    """The outline's snapshot lines and the "missing for production replay" box read one
    answer: which of the header's and the required snapshots are stored."""
    trace = ingest("ok")
    client = as_persona("vera")
    client.get(f"/traces/{trace.blob.sha256}/")

    with CaptureQueriesContext(connection) as queries:
        body = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert _snapshot_lookups(queries) == 1
    assert "This trace is replayable." in body


def test_an_event_page_opens_its_file_once(as_persona, ingest, django_assert_max_num_queries):
    trace = ingest("ok")
    client = as_persona("vera")
    client.get(f"/traces/{trace.blob.sha256}/")

    _count, openings = _get(
        client, f"/traces/{trace.blob.sha256}/events/3/", 10, django_assert_max_num_queries
    )
    assert openings == 1


def test_a_window_deep_in_a_100k_event_trace_costs_what_a_small_page_costs(
    as_persona, trace_key, django_assert_max_num_queries, django_capture_on_commit_callbacks
):
    from replay.services import trace_ingest
    from tests.console.test_trace_paging import _recorded

    data = b"".join(native.iter_jsonl(_recorded(100_000)))
    with django_capture_on_commit_callbacks(execute=True):  # its index built at ingest
        trace = trace_ingest(source=io.BytesIO(data), filename="large.trace.jsonl").trace
    assert trace.event_count > 100_000
    client = as_persona("vera")

    url = f"/traces/{trace.blob.sha256}/?seq=100000"
    # the first view in a process reads the index's JSON (one query more); later views ask
    # only whether its row is there (console.selectors.opened._stored_index)
    _count, openings = _get(client, url, TRACE_PAGE + 1, django_assert_max_num_queries)
    assert openings == 1
    _count, openings = _get(client, url, TRACE_PAGE, django_assert_max_num_queries)
    assert openings == 1
    body = client.get(url).content.decode()
    assert ">seq 100000: " in body


def test_a_stored_index_is_parsed_once_per_process_and_row(ingest, django_assert_num_queries):
    from console.selectors import opened
    from replay.models import TraceIndex

    trace = ingest("ok")
    assert opened._stored_index(trace.blob_id) is None  # a small trace's: built when first asked
    built = opened.trace_index(trace)
    opened._INDEXES.clear()  # as in a process that has not read it yet
    with django_assert_num_queries(2):  # is the row there; its JSON
        first = opened._stored_index(trace.blob_id)
    row = TraceIndex.objects.get(blob_id=trace.blob_id)
    assert first == row.index == built
    with django_assert_num_queries(1):  # is the row there: its parsed JSON is kept
        assert opened._stored_index(trace.blob_id) is first
    # kept under the row's creation time too: another row for the same blob id (a database
    # that reused the id after a rollback) is read afresh
    key = next(k for k in opened._INDEXES if k[1] == trace.blob_id)
    assert key[2] == row.created_at
    assert opened._stored_index(trace.blob_id + 10_000) is None


#: the trace list's queries: the session and user, roles, the page of traces, their
#: snapshots, the trace ids they share, the OpenTelemetry traces still open, the OpenTelemetry
#: filters' known values (one query for the five); and the page's OpenTelemetry traces' facts
#: when it shows any
TRACE_LIST = 8


def test_the_trace_list_queries_do_not_grow_with_its_rows(
    as_persona, ingest, django_assert_max_num_queries
):
    client = as_persona("vera")
    ingest("ok")
    few, _ = _get(client, "/traces/", TRACE_LIST, django_assert_max_num_queries)
    for name in ("diverged", "broken_chain", "ok", "diverged"):
        ingest(name)
    many, openings = _get(client, "/traces/", TRACE_LIST, django_assert_max_num_queries)
    assert many == few == TRACE_LIST
    assert openings == 0  # the list opens no stored file


def test_the_trace_list_reads_its_otel_rows_facts_in_one_query(
    as_persona, django_assert_max_num_queries
):
    from tests.otel.sealed import otel_trace

    client = as_persona("vera")
    otel_trace()
    few, _ = _get(client, "/traces/", TRACE_LIST + 1, django_assert_max_num_queries)
    for _ in range(3):
        otel_trace()
    many, openings = _get(client, "/traces/", TRACE_LIST + 1, django_assert_max_num_queries)
    assert many == few  # (no snapshot query: OTel traces name no snapshot)
    assert openings == 0


def test_the_run_report_opens_its_file_once(as_persona, replayed, django_assert_max_num_queries):
    run = replayed("diverged")
    client = as_persona("vera")

    _count, openings = _get(client, f"/runs/{run.id}/", 9, django_assert_max_num_queries)
    assert openings == 1


#: the comparison of two traces: the session and user, roles, the two traces, each one's sealed
#: blob and personal values (one reassembly each)
COMPARE_PAGE = 9


def test_a_comparison_opens_each_file_once(as_persona, ingest, django_assert_max_num_queries):
    ok, diverged = ingest("ok"), ingest("diverged")
    client = as_persona("vera")
    url = f"/traces/{ok.blob.sha256}/compare/{diverged.blob.sha256}/"
    client.get(url)

    count, openings = _get(client, url, COMPARE_PAGE, django_assert_max_num_queries)
    assert openings == 2  # the comparison and the privacy policy read the same openings
    assert count == COMPARE_PAGE


def test_the_personal_values_are_found_through_the_blobs_index_not_a_join_of_every_trace(
    as_persona, ingest
):
    """The reassembly's and the erased fields' queries find the file's trace by its blob
    (a subquery on the blob's unique index): joined to every trace, PostgreSQL scanned the
    100,000 traces of the bench (580 ms a page) while the personal-value table was small."""
    trace = ingest("ok")
    client = as_persona("vera")
    client.get(f"/traces/{trace.blob.sha256}/")
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/traces/{trace.blob.sha256}/events/1/").status_code == 200
    found = [
        q["sql"] for q in queries.captured_queries if 'FROM "privacy_personalvalue"' in q["sql"]
    ]
    assert found
    for sql in found:
        assert 'JOIN "replay_trace"' not in sql
        assert '"privacy_personalvalue"."trace_id" IN (SELECT' in sql


def test_the_trace_tables_htmx_partial_skips_the_forms_otel_choices(
    as_persona, django_assert_max_num_queries
):
    """The table alone (an htmx request: the form is not redrawn) does not read the OTel
    filters' known values."""
    from tests.otel.sealed import otel_trace

    client = as_persona("vera")
    otel_trace()
    page, _ = _get(client, "/traces/", TRACE_LIST + 1, django_assert_max_num_queries)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/traces/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert 'id="otel-filters"' not in response.content.decode()
    assert len(queries.captured_queries) == page - 1
    assert not any("otel_otelfactvalue" in q["sql"] for q in queries.captured_queries)
