"""Every documented filter of `GET /api/traces/`, through the API, under its documented name.

`format` in particular: DRF used to read `?format=` as its own renderer switch and answer 404.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.console.factories import snapshot_row, trace_row
from tests.otel.sealed import three_traces

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
    covered = {
        part.split("=")[0]
        for query, _ in [*FILTERS.values(), *OTEL_FILTERS.values()]
        for part in query.split("&")
    } | {"q", "cursor"}
    assert documented == covered


# --- OpenTelemetry traces: service, model, operation, conversation id, agent ------------------


@pytest.fixture
def otel_rows(db):
    """Three OTel traces (tests.otel.sealed.three_traces) and a native one, newest."""
    return {**three_traces(), "native": trace_row(status="ok", created_at=NOW)}


# (query string, the rows it must list, in order)
OTEL_FILTERS = {
    "service": ("service=weather-svc", ["c", "a"]),  # "Weather-Svc" too: any case
    "service_upper": ("service=WEATHER-SVC", ["c", "a"]),
    "service_other": ("service=billing-svc", ["b"]),
    "model_requested": ("model=gpt-4o-mini", ["a"]),
    "model_answered": ("model=gpt-4o-2024-08-06", ["c"]),
    "model_exact": ("model=GPT-4O-MINI", []),  # a model is matched exactly
    "model_part": ("model=gpt-4o-mini-2024", []),  # and whole
    "operation": ("operation=execute_tool", ["c", "a"]),
    "operation_chat": ("operation=chat", ["c", "b", "a"]),
    "conversation": ("conversation=conv-a", ["c", "a"]),
    "conversation_exact": ("conversation=CONV-A", []),
    "agent": ("agent=billing-agent", ["b"]),  # "Billing-Agent": any case
    "agent_many": ("agent=weather-agent", ["c", "a"]),
    "no_such_value": ("service=nobody", []),
    # with the other filters: every one given must hold
    "with_verdict": ("service=weather-svc&verdict=ok&model=gpt-4o", ["c"]),
    "with_verdict_none": ("agent=billing-agent&verdict=ok", []),
    "with_format": ("format=otel-genai&operation=chat", ["c", "b", "a"]),
    "with_other_format": ("format=replay-trace&service=weather-svc", []),
    "with_date": (f"conversation=conv-a&date_from={_day(1)}", ["c"]),
    "with_search": ("service=weather-svc&q=job-none", []),
    "with_sort": ("sort=created_at&service=weather-svc", ["a", "c"]),
    "with_limit": ("operation=chat&limit=2", ["c", "b"]),
}


@pytest.mark.parametrize("name", sorted(OTEL_FILTERS))
def test_it_filters_otel_traces_by_their_facts(as_persona, otel_rows, name):
    query, expected = OTEL_FILTERS[name]
    response = as_persona("vera").get(f"/api/traces/?{query}")
    assert response.status_code == 200, response.content
    listed = [t["trace_id"] for t in response.json()["results"]]
    assert listed == [otel_rows[key].trace_id for key in expected]


def test_the_cursor_pages_on_with_the_otel_filters_kept(as_persona, otel_rows):
    client = as_persona("vera")
    first = client.get("/api/traces/?service=WEATHER-svc&operation=chat&limit=1").json()
    assert [t["trace_id"] for t in first["results"]] == [otel_rows["c"].trace_id]
    assert "service=WEATHER-svc" in first["next"]
    assert "operation=chat" in first["next"]
    second = client.get(first["next"]).json()
    assert [t["trace_id"] for t in second["results"]] == [otel_rows["a"].trace_id]
    assert second["next"] is None
    back = client.get(second["previous"]).json()
    assert [t["trace_id"] for t in back["results"]] == [otel_rows["c"].trace_id]


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        (
            "service=" + "s" * 256,
            "service",
            "Ensure this field has no more than 255 characters.",
        ),
        (
            "agent=bad%01name",
            "agent",
            "not a value a trace holds: a value holds no control or invisible character "
            "(it holds U+0001 at 4)",
        ),
        (
            "conversation=line%0Abreak",
            "conversation",
            "not a value a trace holds: a value holds no control or invisible character "
            "(it holds U+000A at 5)",
        ),
        ("model=nul%00here", "model", "Null characters are not allowed."),
    ],
)
def test_a_value_no_trace_can_hold_is_a_400_naming_the_field(
    as_persona, otel_rows, query, field, message
):
    response = as_persona("vera").get(f"/api/traces/?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["error_code"] == "INVALID_INPUT"
    assert body["fields"] == {field: [message]}


@pytest.mark.parametrize("name", ["vera", "alice", "oscar", "adam", "cora", "lena", "nora"])
def test_every_role_filters_otel_traces_and_no_role_may_not(as_persona, otel_rows, name):
    response = as_persona(name).get("/api/traces/?agent=billing-agent")
    if name == "nora":
        assert response.status_code == 403
        return
    assert response.status_code == 200
    assert [t["trace_id"] for t in response.json()["results"]] == [otel_rows["b"].trace_id]


def test_the_schema_documents_the_otel_filters(as_persona):
    schema = as_persona("vera").get("/api/schema/?format=json").json()
    params = {p["name"]: p for p in schema["paths"]["/api/traces/"]["get"]["parameters"]}
    for name in ("service", "model", "operation", "conversation", "agent"):
        assert params[name]["in"] == "query"
        assert params[name]["schema"] == {"type": "string", "minLength": 1, "maxLength": 255}
        assert params[name]["description"].startswith("OpenTelemetry traces holding ")
    assert "(any case)" in params["service"]["description"]
    assert "(exact)" in params["model"]["description"]
