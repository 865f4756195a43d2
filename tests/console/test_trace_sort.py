"""Sortable columns on the trace list: ``?sort=`` on the page, the API and the export, kept
with the filters and across the cursor pages; an unknown key or another sort's cursor is a
400 with a precise message; the headers are links with ``aria-sort``."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.selectors import (
    SORT_UNKNOWN_MESSAGE,
    CursorError,
    SortError,
    TraceFilters,
    trace_page,
)
from tests.console.factories import trace_row

pytestmark = pytest.mark.django_db

UNKNOWN = (
    "unknown sort 'size': sort by one of created_at, -created_at, trace_id, -trace_id, "
    "format, -format, job, -job, verdict, -verdict"
)

UNKNOWN_HTML = UNKNOWN.replace("'", "&#x27;")


@pytest.fixture
def rows():
    """Five traces whose columns disagree on the order (two share a format and a verdict)."""
    now = timezone.now()
    return [
        trace_row(format="paxman", status="ok", job_id="job-c", created_at=now - timedelta(1)),
        trace_row(format="mace", status="diverged", job_id="job-a", created_at=now),
        trace_row(format="paxman", status="new", job_id="job-e", created_at=now - timedelta(3)),
        trace_row(format="verist", status="ok", job_id="job-b", created_at=now - timedelta(2)),
        trace_row(format="ahd", status="refused", job_id="job-d", created_at=now - timedelta(4)),
    ]


def ids(page):
    return [t.trace_id for t in page.traces]


def expected(rows, key, reverse=False):
    return [t.trace_id for t in sorted(rows, key=lambda t: (key(t), t.pk), reverse=reverse)]


KEYS = {
    "created_at": lambda t: t.created_at,
    "trace_id": lambda t: t.trace_id,
    "format": lambda t: t.format,
    "job": lambda t: t.job_id,
    "verdict": lambda t: t.last_status,
}


class TestTheSelector:
    @pytest.mark.parametrize("name", sorted(KEYS))
    @pytest.mark.parametrize("descending", [False, True])
    def test_each_key_both_ways_pages_without_gap_or_overlap(self, rows, name, descending):
        sort = f"-{name}" if descending else name
        want = expected(rows, KEYS[name], reverse=descending)
        first = trace_page(filters=TraceFilters(), limit=2, sort=sort)
        second = trace_page(filters=TraceFilters(), cursor=first.next_cursor, limit=2, sort=sort)
        third = trace_page(filters=TraceFilters(), cursor=second.next_cursor, limit=2, sort=sort)
        assert ids(first) + ids(second) + ids(third) == want
        assert third.next_cursor is None
        back = trace_page(filters=TraceFilters(), cursor=second.prev_cursor, limit=2, sort=sort)
        assert ids(back) == ids(first)

    def test_the_default_is_newest_first(self, rows):
        assert ids(trace_page(filters=TraceFilters())) == expected(
            rows, KEYS["created_at"], reverse=True
        )

    def test_an_unknown_key_is_refused(self, rows):
        with pytest.raises(SortError) as caught:
            trace_page(filters=TraceFilters(), sort="size")
        assert str(caught.value) == UNKNOWN == SORT_UNKNOWN_MESSAGE.format(sort="size")
        with pytest.raises(SortError):
            trace_page(filters=TraceFilters(), sort="--format")

    def test_a_cursor_from_another_sort_is_refused(self, rows):
        first = trace_page(filters=TraceFilters(), limit=2, sort="format")
        with pytest.raises(CursorError):
            trace_page(filters=TraceFilters(), cursor=first.next_cursor, sort="-format")
        with pytest.raises(CursorError):
            trace_page(filters=TraceFilters(), cursor=first.next_cursor)


class TestThePage:
    def test_the_headers_are_links_with_aria_sort(self, as_persona, rows):
        body = as_persona("vera").get("/traces/?format=paxman&sort=job").content.decode()
        assert (
            '<th aria-sort="ascending"><a class="sort-link" href="?format=paxman&amp;sort=-job">'
            'Job <span aria-hidden="true">▲</span></a></th>'
        ) in body
        assert (
            '<th aria-sort="none"><a class="sort-link" href="?format=paxman&amp;sort=-created_at">'
            "Uploaded</a></th>"
        ) in body
        assert (
            '<th aria-sort="none"><a class="sort-link" href="?format=paxman&amp;sort=format">'
            in (body)
        )
        assert '<input type="hidden" name="sort" value="job">' in body
        paxman = [t for t in rows if t.format == "paxman"]
        order = [body.index(t.trace_id) for t in sorted(paxman, key=lambda t: t.job_id)]
        assert order == sorted(order)

    def test_by_default_uploaded_is_descending(self, as_persona, rows):
        body = as_persona("vera").get("/traces/").content.decode()
        assert (
            '<th aria-sort="descending"><a class="sort-link" href="?sort=created_at">'
            'Uploaded <span aria-hidden="true">▼</span></a></th>'
        ) in body
        assert 'name="sort"' not in body

    def test_the_next_page_keeps_the_sort_and_the_filters(self, as_persona, rows, monkeypatch):
        from console.selectors import listing

        monkeypatch.setattr(listing, "PAGE_SIZE", 2)
        client = as_persona("vera")
        body = client.get("/traces/?date_from=2000-01-01&sort=-trace_id").content.decode()
        link = re.search(r'<a href="(\?[^"]+)"[^>]*rel="next"', body)
        assert link is not None
        assert "date_from=2000-01-01&amp;sort=-trace_id&amp;cursor=" in link[1]
        second = client.get("/traces/" + link[1].replace("&amp;", "&")).content.decode()
        want = expected(rows, KEYS["trace_id"], reverse=True)
        assert [w for w in want if w in second] == want[2:4]
        assert [w for w in want if w in body] == want[:2]

    def test_an_unknown_sort_is_a_400_saying_which(self, as_persona, rows):
        response = as_persona("vera").get("/traces/?sort=size")
        assert response.status_code == 400
        assert "<p>sort: " + UNKNOWN_HTML + "</p>" in response.content.decode()

    def test_a_cursor_of_another_sort_is_no_longer_valid(self, as_persona, rows):
        cursor = trace_page(filters=TraceFilters(), limit=2, sort="job").next_cursor
        response = as_persona("vera").get(f"/traces/?sort=format&cursor={cursor}")
        assert response.status_code == 400
        assert "This page link is no longer valid; start from the newest." in (
            response.content.decode()
        )


class TestTheExport:
    def test_the_csv_follows_the_sort(self, as_persona, rows):
        response = as_persona("vera").get("/traces/export.csv?sort=-format")
        text = b"".join(response.streaming_content).decode()
        listed = [r["trace_id"] for r in csv.DictReader(io.StringIO(text))]
        assert listed == expected(rows, KEYS["format"], reverse=True)

    def test_the_json_follows_the_sort(self, as_persona, rows):
        import json

        response = as_persona("vera").get("/traces/export.json?sort=verdict")
        listed = [r["trace_id"] for r in json.loads(b"".join(response.streaming_content))]
        assert listed == expected(rows, KEYS["verdict"])

    def test_an_unknown_sort_refuses_the_export(self, as_persona, rows):
        response = as_persona("vera").get("/traces/export.csv?sort=size")
        assert response.status_code == 400
        assert "sort: " + UNKNOWN_HTML in response.content.decode()


class TestTheApi:
    def test_it_sorts_and_its_next_link_keeps_the_sort(self, as_persona, rows):
        client = as_persona("vera")
        first = client.get("/api/traces/?sort=job&limit=3").json()
        want = expected(rows, KEYS["job"])
        assert [t["trace_id"] for t in first["results"]] == want[:3]
        assert "sort=job" in first["next"]
        second = client.get(first["next"]).json()
        assert [t["trace_id"] for t in second["results"]] == want[3:]

    def test_an_unknown_sort_is_a_400_saying_which(self, as_persona, rows):
        response = as_persona("vera").get("/api/traces/?sort=size")
        assert response.status_code == 400
        body = response.json()
        assert body["error_code"] == "INVALID_INPUT"
        assert body["fields"] == {"sort": [UNKNOWN]}

    def test_a_cursor_of_another_sort_is_refused(self, as_persona, rows):
        cursor = trace_page(filters=TraceFilters(), limit=2, sort="job").next_cursor
        response = as_persona("vera").get(f"/api/traces/?sort=-job&cursor={cursor}")
        assert (response.status_code, response.json()["error_code"]) == (400, "INVALID_INPUT")
