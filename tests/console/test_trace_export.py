"""The trace list exported as CSV or JSON: the page's filters, every row (streamed in chunks,
not one page), formula cells defused, every role per the matrix; and the list's search over
trace id, job id, file name and uploader."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.http import StreamingHttpResponse
from django.utils import timezone

from console.views import exports
from core.ledger import roles
from replay.models import Trace
from tests.console.factories import trace_row
from tests.console.personas import EVERYONE, PERSONAS, persona

pytestmark = pytest.mark.django_db


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def test_csv_lists_every_filtered_row_newest_first_with_the_lists_columns(as_persona):
    now = timezone.now()
    old = trace_row(status="ok", job_id="job-a", created_at=now - timedelta(days=2))
    new = trace_row(status="ok", job_id="job-b", created_at=now)
    trace_row(status="diverged")
    response = as_persona("vera").get("/traces/export.csv?verdict=ok")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="traces-')
    rows = list(csv.reader(io.StringIO(body(response))))
    assert rows[0] == list(exports.COLUMNS)
    assert [r[0] for r in rows[1:]] == [new.trace_id, old.trace_id]
    first = dict(zip(rows[0], rows[1], strict=True))
    assert first == {
        "trace_id": new.trace_id,
        "job_id": "job-b",
        "format": "replay-trace",
        "verdict": "ok",
        "replayable": "True",
        "filename": new.filename,
        "sha256": new.blob.sha256,
        "size": "10",
        "events": "0",
        "steps": "0",
        "uploaded_at": new.created_at.isoformat(),
        "uploaded_by": "",
    }


def test_json_is_one_array_of_the_same_rows(as_persona):
    a = trace_row(status="ok", missing_outputs=["out-1"])
    Trace.objects.filter(pk=a.pk).update(uploaded_by=persona("alice"))
    response = as_persona("vera").get("/traces/export.json")
    assert response["Content-Type"] == "application/json"
    (row,) = json.loads(body(response))
    assert list(row) == list(exports.COLUMNS)
    assert (row["trace_id"], row["replayable"], row["uploaded_by"]) == (a.trace_id, False, "alice")


def test_an_empty_export_is_a_header_or_an_empty_array(as_persona):
    assert body(as_persona("vera").get("/traces/export.csv")) == ",".join(exports.COLUMNS) + "\r\n"
    assert json.loads(body(as_persona("vera").get("/traces/export.json"))) == []


def test_it_streams_past_one_chunk_and_past_the_lists_page(as_persona, monkeypatch):
    monkeypatch.setattr(exports, "CHUNK", 3)
    made = [trace_row() for _ in range(8)]
    rows = json.loads(body(as_persona("vera").get("/traces/export.json")))
    assert sorted(r["trace_id"] for r in rows) == sorted(t.trace_id for t in made)


def test_a_cell_a_spreadsheet_would_run_is_written_as_text(as_persona):
    t = trace_row()
    Trace.objects.filter(pk=t.pk).update(filename='=HYPERLINK("http://x","y")', job_id="-1+2")
    rows = list(csv.reader(io.StringIO(body(as_persona("vera").get("/traces/export.csv")))))
    row = dict(zip(rows[0], rows[1], strict=True))
    assert (row["filename"], row["job_id"]) == ('\'=HYPERLINK("http://x","y")', "'-1+2")
    (raw,) = json.loads(body(as_persona("vera").get("/traces/export.json")))
    assert raw["filename"] == '=HYPERLINK("http://x","y")'  # JSON is data, written as it is


def test_a_bad_filter_is_refused_as_on_the_page(as_persona):
    response = as_persona("vera").get("/traces/export.csv?verdict=maybe")
    assert response.status_code == 400
    assert '<code class="code">INVALID_INPUT</code> verdict: Select a valid choice.' in (
        response.content.decode()
    )


@pytest.mark.parametrize("name", EVERYONE)
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_every_role_that_browses_may_export_and_no_other(as_persona, name, fmt):
    trace_row()
    response = as_persona(name).get(f"/traces/export.{fmt}")
    allowed = bool(set(PERSONAS[name]) & roles.MATRIX[roles.BROWSE])
    assert response.status_code == (200 if allowed else 403)


def test_anonymous_is_sent_to_sign_in(client):
    response = client.get("/traces/export.csv")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_list_links_the_export_with_its_filters(as_persona):
    trace_row(status="ok")
    page = as_persona("vera").get("/traces/?verdict=ok&format=replay-trace").content.decode()
    assert 'href="/traces/export.csv?verdict=ok&amp;format=replay-trace" download>CSV</a>' in page
    assert 'href="/traces/export.json?verdict=ok&amp;format=replay-trace" download>JSON</a>' in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("searched.trace.json", ["by_file"]),  # the whole file name
        ("searched", ["by_file"]),  # a part of it
        ("SEARCHED", ["by_file"]),  # whatever the case
        ("alice", ["by_alice"]),  # an uploader's user name
        ("job-find-me", ["by_job"]),  # an exact job id
        ("job-find", []),  # a job id is not searched by part
    ],
)
def test_the_list_searches_trace_id_job_id_file_name_and_uploader(as_persona, query, expected):
    rows = {
        "by_file": trace_row(),
        "by_alice": trace_row(),
        "by_job": trace_row(job_id="job-find-me"),
        "other": trace_row(),
    }
    Trace.objects.filter(pk=rows["by_file"].pk).update(filename="searched.trace.json")
    Trace.objects.filter(pk=rows["by_alice"].pk).update(uploaded_by=persona("alice"))
    page = as_persona("vera").get(f"/traces/?q={query}").content.decode()
    listed = [k for k, t in rows.items() if t.trace_id in page]
    assert listed == expected
    api = as_persona("vera").get(f"/api/traces/?q={query}").json()["results"]
    assert [t["trace_id"] for t in api] == [rows[k].trace_id for k in expected]
