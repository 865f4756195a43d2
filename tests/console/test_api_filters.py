"""Every documented filter of `GET /api/traces/`, through the API, under its documented name.

`format` in particular: DRF used to read `?format=` as its own renderer switch and answer 404.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.console.factories import snapshot_row, trace_row

pytestmark = pytest.mark.django_db

NOW = timezone.now()
ONE = "sha256:" + "1" * 64


@pytest.fixture
def rows():
    """Four traces that each filter tells apart."""
    snapshot_row(ONE)
    return {
        "old_paxman": trace_row(
            format="paxman", status="ok", job_id="job-old", created_at=NOW - timedelta(days=10)
        ),
        "diverged": trace_row(
            status="diverged",
            job_id="job-diverged",
            created_at=NOW - timedelta(days=5),
            required_snapshot_ids=[{"kind": "selfrep", "snapshot_id": ONE}],
        ),
        "missing": trace_row(
            status="ok",
            job_id="job-missing",
            created_at=NOW - timedelta(days=1),
            missing_outputs=["out-1"],
        ),
        "new": trace_row(status="new", job_id="job-new", created_at=NOW),
    }


def _day(days_ago: int) -> str:
    return (NOW - timedelta(days=days_ago)).date().isoformat()


# (query string, the rows it must list, in order); every parameter the schema documents
FILTERS = {
    "format": ("format=replay-trace", ["new", "missing", "diverged"]),
    "format_other": ("format=paxman", ["old_paxman"]),
    "verdict": ("verdict=diverged", ["diverged"]),
    "verdict_new": ("verdict=new", ["new"]),
    # the list shows "new" as "not replayed": that spelling is the same filter
    "verdict_not_replayed": ("verdict=not_replayed", ["new"]),
    "replayable": ("replayable=true", ["new", "diverged", "old_paxman"]),
    "not_replayable": ("replayable=false", ["missing"]),
    "date_from": (f"date_from={_day(5)}", ["new", "missing", "diverged"]),
    "date_to": (f"date_to={_day(5)}", ["diverged", "old_paxman"]),
    "q_job": ("q=job-missing", ["missing"]),
    "limit": ("limit=2", ["new", "missing"]),
    "sort": ("sort=job", ["diverged", "missing", "new", "old_paxman"]),
    "sort_descending": ("sort=-created_at", ["new", "missing", "diverged", "old_paxman"]),
    "combined": ("format=replay-trace&verdict=ok&date_from=" + _day(3), ["missing"]),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_it_filters_by_every_documented_parameter(as_persona, rows, name):
    query, expected = FILTERS[name]
    response = as_persona("vera").get(f"/api/traces/?{query}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    listed = [t["trace_id"] for t in response.json()["results"]]
    assert listed == [rows[key].trace_id for key in expected]


def test_it_finds_a_trace_by_its_trace_id(as_persona, rows):
    trace_id = rows["diverged"].trace_id
    response = as_persona("vera").get(f"/api/traces/?q={trace_id}")
    assert [t["trace_id"] for t in response.json()["results"]] == [trace_id]


def test_the_cursor_pages_on_with_the_filters_kept(as_persona, rows):
    client = as_persona("vera")
    first = client.get("/api/traces/?format=replay-trace&limit=2").json()
    assert "format=replay-trace" in first["next"]
    second = client.get(first["next"]).json()
    assert [t["trace_id"] for t in second["results"]] == [rows["diverged"].trace_id]
    assert second["next"] is None


def test_a_format_it_does_not_know_lists_nothing_rather_than_404(as_persona, rows):
    response = as_persona("vera").get("/api/traces/?format=json")
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_every_parameter_the_schema_documents_is_covered_here(as_persona):
    schema = as_persona("vera").get("/api/schema/?format=json").json()
    documented = {p["name"] for p in schema["paths"]["/api/traces/"]["get"]["parameters"]}
    covered = {query.split("=")[0] for query, _ in FILTERS.values()} | {"q", "cursor"}
    assert documented == covered
