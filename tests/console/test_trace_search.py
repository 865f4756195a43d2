"""The trace list's search (``?q=``): what it matches, the same on SQLite and PostgreSQL, and on
PostgreSQL that every alternative is answered by an index (the file name's by pg_trgm's,
replay migration 0011), made by a role that is no superuser (docs/deployment.md)."""

from __future__ import annotations

import importlib
import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from console.selectors import (
    FILENAME_PART_MIN,
    TraceFilters,
    search_q,
    trace_page,
)
from otel.models import OtelFactValue
from replay.models import Trace
from tests.console.factories import trace_row
from tests.console.personas import persona
from tests.otel.sealed import three_traces

pytestmark = pytest.mark.django_db

migration = importlib.import_module("replay.migrations.0011_trace_filename_search")


def found(q: str) -> set[str]:
    return {t.filename for t in trace_page(filters=TraceFilters(q=q)).traces}


def named(filename: str, **fields) -> Trace:
    trace = trace_row()
    trace.filename = filename
    for key, value in fields.items():
        setattr(trace, key, value)
    trace.save()
    return trace


@pytest.fixture
def traces():
    return {
        "swiss": named("2026-04-21-Swiss.replay.json", job_id="j7"),
        "under": named("a_b.trace.json"),
        "plain": named("axb.trace.json", trace_id="ab" * 16),
        "alice": named("mine.json", uploaded_by=persona("alice")),
    }


def test_an_exact_trace_id_in_any_case_or_job_id_or_user_name(traces):
    assert found(("ab" * 16).upper()) == {"axb.trace.json"}
    assert found("j7") == {"2026-04-21-Swiss.replay.json"}  # a job id of two characters
    assert found("alice") == {"mine.json"}
    assert found("ALICE") == set()  # a user name is exact
    assert found("ali") == set()  # and whole


def test_a_part_of_a_file_name_in_any_case(traces):
    assert found("swiss.REPLAY") == {"2026-04-21-Swiss.replay.json"}
    assert found(".json") == {t.filename for t in traces.values()}
    assert found("no such part") == set()


def test_like_wildcards_in_a_search_are_plain_characters(traces):
    assert found("a_b") == {"a_b.trace.json"}
    assert found("%.trace") == set()


def test_a_part_shorter_than_three_characters_is_not_looked_for_in_file_names(traces):
    assert FILENAME_PART_MIN == 3
    assert found("xb") == set()  # in axb.trace.json, but no trigram holds it
    assert found("axb") == {"axb.trace.json"}


def test_the_list_says_a_short_search_looked_for_ids_and_names_only(as_persona, traces):
    body = as_persona("vera").get("/traces/?q=xb").content.decode()
    assert "“xb” was looked up as a trace id, a job id and a user name only" in body
    assert "from 3 characters" in body
    body = as_persona("vera").get("/traces/?q=axb").content.decode()
    assert 'id="search-short"' not in body
    assert f'href="/traces/{traces["plain"].blob.sha256}/"' in body


# --- PostgreSQL: the indexes answer it ---------------------------------------------------------


def postgres(test):
    """A test of PostgreSQL's side (runs when DATABASE_URL points at PostgreSQL)."""
    skip = pytest.mark.skipif(
        connection.vendor != "postgresql", reason="pg_trgm and its GIN index are PostgreSQL's"
    )
    return skip(pytest.mark.postgres(test))


def _plan(q: str) -> str:
    qs = Trace.objects.filter(search_q(q)).order_by("-created_at", "-id")[:51]
    sql, params = qs.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cur:
        # the only plan left is one of bitmap index scans: there is one only if each of the
        # search's alternatives has an index that answers it (a tiny table is read whole else)
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_indexscan = off")
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


@postgres
def test_the_file_name_index_is_a_trigram_index_on_what_icontains_compares():
    with connection.cursor() as cur:
        cur.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [migration.INDEX])
        (definition,) = cur.fetchone()
    assert "USING gin (upper((filename)::text)" in definition
    assert "gin_trgm_ops" in definition


@postgres
def test_every_alternative_of_the_search_is_answered_by_an_index(traces):
    plan = _plan("swiss.replay")
    assert "BitmapOr" in plan
    assert "Seq Scan on replay_trace" not in plan
    for index in ("trace_filename_trgm", "trace_id", "job_id", "uploaded_by_id"):
        assert index in plan, plan


def _role(*grants: str) -> str:
    role = f"replay_migrate_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} NOLOGIN NOSUPERUSER")
        cur.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        for grant in grants:
            cur.execute(grant.format(role=role, database=connection.settings_dict["NAME"]))
        # none of it outlives the test's transaction: the extension goes, as if never made
        cur.execute("DROP EXTENSION pg_trgm CASCADE")
    return role


def _forwards_as(role: str) -> None:
    with connection.cursor() as cur:
        cur.execute(f"SET LOCAL ROLE {role}")
    with connection.schema_editor(atomic=False) as editor:
        migration.forwards(None, editor)


@postgres
def test_the_owner_role_makes_the_extension_without_being_a_superuser():
    """As ``replay_owner`` (docs/deployment.md), which is no superuser: it owns the database
    (so it may create a trusted extension), its schema and the table."""
    role = _role(
        'GRANT CREATE ON DATABASE "{database}" TO {role}',
        "GRANT CREATE ON SCHEMA public TO {role}",
        "ALTER TABLE replay_trace OWNER TO {role}",
    )
    _forwards_as(role)
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [migration.INDEX])
        assert cur.fetchone() is not None


@postgres
def test_a_role_that_may_not_make_it_is_told_what_a_superuser_runs_once():
    role = _role("ALTER TABLE replay_trace OWNER TO {role}")
    with pytest.raises(RuntimeError) as caught:
        _forwards_as(role)
    message = str(caught.value)
    assert f"the role {role!r} may not create it" in message
    assert "as a superuser" in message
    assert "CREATE EXTENSION IF NOT EXISTS pg_trgm;" in message


# --- PostgreSQL: the OpenTelemetry filters are index lookups too --------------------------------

OTEL_KINDS = ("service", "model", "operation", "conversation", "agent")


def postgres_plans(test):
    """A test of PostgreSQL's plans (runs when DATABASE_URL points at PostgreSQL)."""
    skip = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
    return skip(pytest.mark.postgres(test))


def _page_queries(**kwargs) -> list[str]:
    """The SQL of every query ``trace_page`` runs, as PostgreSQL received it."""
    with CaptureQueriesContext(connection) as captured:
        trace_page(**kwargs)
    return [q["sql"] for q in captured.captured_queries]


def _explain(sql: str, *disabled: str) -> str:
    """The plan of ``sql`` with sequential scans (and ``disabled``) off: such a plan exists only
    if an index answers each lookup (a tiny table is read whole else)."""
    with transaction.atomic(), connection.cursor() as cur:
        for setting in ("seqscan", *disabled):
            cur.execute(f"SET LOCAL enable_{setting} = off")
        cur.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cur.fetchall())


def _the_page_query(sqls: list[str]) -> str:
    (page,) = [q for q in sqls if 'FROM "replay_trace"' in q and "LIMIT" in q]
    return page


def _page_plan(filters: TraceFilters, sort: str = "-created_at", *disabled: str) -> str:
    return _explain(_the_page_query(_page_queries(filters=filters, sort=sort)), *disabled)


@postgres_plans
@pytest.mark.parametrize(
    ("kind", "index", "condition"),
    [
        ("service", "otel_value_any_case", "(upper((value)::text) = 'X'::text)"),
        ("agent", "otel_value_any_case", "(upper((value)::text) = 'X'::text)"),
        ("model", "otel_value_once", "((value)::text = 'x'::text)"),
        ("operation", "otel_value_once", "((value)::text = 'x'::text)"),
        ("conversation", "otel_value_once", "((value)::text = 'x'::text)"),
    ],
)
def test_a_value_is_found_by_its_kind_and_value_not_its_kind_alone(kind, index, condition):
    """Among many values of a kind, the value's own index entry (a name in any case: the
    ``UPPER(value)`` index), not every value of its kind."""
    OtelFactValue.objects.bulk_create(
        [OtelFactValue(kind=kind, value=f"value {n}") for n in range(3000)]
    )
    with connection.cursor() as cur:
        cur.execute("ANALYZE otel_otelfactvalue")
    (lookup,) = _page_queries(filters=TraceFilters(**{kind: "x"}))  # no such value: no page
    plan = _explain(lookup)
    lines = plan.splitlines()
    (scan,) = [n for n, line in enumerate(lines) if "otel_otelfactvalue" in line]
    assert index in lines[scan], plan
    assert "Index Cond:" in lines[scan + 1], plan
    assert condition in lines[scan + 1], plan


@postgres_plans
@pytest.mark.parametrize("kind", OTEL_KINDS)
def test_a_page_in_time_order_walks_the_values_own_index(kind):
    """No sort: the ``(value, created_at DESC, trace DESC)`` index gives the page's order, so
    the page reads its own rows only, wherever they are in time."""
    three_traces()
    value = {"service": "billing-svc", "model": "gpt-4o", "agent": "weather-agent"}
    value |= {"operation": "chat", "conversation": "conv-a"}
    for sort in ("-created_at", "created_at"):
        filters = TraceFilters(**{kind: value[kind]})
        plan = _page_plan(filters, sort, "sort", "bitmapscan")
        assert "Seq Scan" not in plan, plan
        assert "Sort" not in plan, plan
        assert "Index Scan" in plan, plan
        assert "otel_trace_value_newest" in plan, plan


@postgres_plans
def test_otel_filters_combined_with_the_others_read_no_table_whole():
    three_traces()
    filters = TraceFilters(format="otel-genai", verdict="ok", service="weather-svc", model="gpt-4o")
    plan = _page_plan(filters, "-created_at", "sort", "bitmapscan")
    assert "Seq Scan" not in plan, plan
    assert "Sort" not in plan, plan
    assert "otel_trace_value_newest" in plan, plan  # the lead: the model
    assert "otel_trace_value_once" in plan, plan  # whether each holds the service too


@postgres_plans
@pytest.mark.parametrize("sort", ["job", "-trace_id", "verdict"])
def test_in_another_order_a_few_traces_are_read_by_their_value(sort):
    three_traces()
    plan = _page_plan(TraceFilters(service="weather-svc"), sort)
    assert "Seq Scan" not in plan, plan
    assert "otel_trace_value_once" in plan or "otel_trace_value_newest" in plan, plan
