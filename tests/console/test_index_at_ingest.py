"""A large trace's index is built at ingest, in the background (the project's one runner,
``replay.background``), never inside a page request (issue 23): until it is there the page
says how far the build is and answers at once; a build whose worker stopped is queued again."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.formats import native
from core.replay import traceindex
from replay.models import TraceIndex, TraceIndexBuild

pytestmark = pytest.mark.django_db


@pytest.fixture
def large_bytes():
    from tests.console.test_trace_paging import _recorded

    return b"".join(native.iter_jsonl(_recorded(3000)))


@pytest.fixture(autouse=True)
def _small_inline_limit(settings):
    settings.REPLAY_INDEX_INLINE_RECORDS = 1000  # the 3,040-event trace is "large" here


def _ingest(data: bytes):
    from replay.services import trace_ingest

    return trace_ingest(source=io.BytesIO(data), filename="large.trace.jsonl").trace


def _index_writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if 'INSERT INTO "replay_traceindex"' in q["sql"]
    ]


def test_the_index_is_built_when_the_upload_commits(
    as_persona, trace_key, large_bytes, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        trace = _ingest(large_bytes)
    assert len(callbacks) == 1  # the build, handed to the runner on commit
    index = TraceIndex.objects.get(blob=trace.blob).index
    assert index["events"] == trace.event_count == 3040
    assert not TraceIndexBuild.objects.filter(blob=trace.blob).exists()

    with CaptureQueriesContext(connection) as queries:
        body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/?seq=3000").content.decode()
    assert _index_writes(queries) == []
    assert ">seq 3000: " in body
    assert 'id="index-pending"' not in body


def test_until_it_is_built_the_page_says_how_far_and_builds_nothing(
    as_persona, trace_key, large_bytes, django_capture_on_commit_callbacks
):
    from console.tasks import trace_index_build

    trace = _ingest(large_bytes)  # its build queued, not run yet
    TraceIndexBuild.objects.filter(blob=trace.blob).update(events_read=2000)
    client = as_persona("vera")

    with (
        django_capture_on_commit_callbacks() as callbacks,
        CaptureQueriesContext(connection) as queries,
    ):
        response = client.get(f"/traces/{trace.blob.sha256}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert (
        "This trace's index is being built in the background: 2000 of 3040 events read."
    ) in body
    assert '<li class="empty">No events here.</li>' in body
    assert not TraceIndex.objects.filter(blob=trace.blob).exists()
    assert _index_writes(queries) == []
    assert callbacks == []  # not queued twice

    assert trace_index_build(trace.pk) == "built"
    body = client.get(f"/traces/{trace.blob.sha256}/", HTTP_HX_TARGET="events").content.decode()
    assert 'id="index-pending"' not in body
    assert ">seq 0: " in body
    assert not TraceIndexBuild.objects.filter(blob=trace.blob).exists()


def test_a_build_whose_worker_stopped_is_queued_again(
    as_persona, trace_key, large_bytes, django_capture_on_commit_callbacks
):
    trace = _ingest(large_bytes)
    stale = timezone.now() - timedelta(minutes=10)
    TraceIndexBuild.objects.filter(blob=trace.blob).update(events_read=500, updated_at=stale)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert len(callbacks) == 1
    assert "being built in the background: 0 of 3040 events read" in body
    assert TraceIndex.objects.get(blob=trace.blob).index["events"] == 3040


def test_a_small_trace_missing_its_index_is_indexed_by_its_page(as_persona, ingest):
    trace = ingest("ok")  # 11 events: cheaper to index than to say it is pending
    assert not TraceIndex.objects.filter(blob=trace.blob).exists()
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert ">seq 0: " in body
    assert TraceIndex.objects.filter(blob=trace.blob).exists()


def test_the_build_reports_its_progress(monkeypatch, large_bytes):
    monkeypatch.setattr(traceindex, "PROGRESS_EVERY", 1000)
    seen: list[int] = []
    index = traceindex.build_jsonl(io.BytesIO(large_bytes), 1 << 30, seen.append)
    assert seen == [1000, 2000, 3000]
    assert index["events"] == 3040
