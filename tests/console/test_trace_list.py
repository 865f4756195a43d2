"""The trace list: newest first, filters, keyset pages, the htmx partial, and who may see it."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.selectors import SORTS, TraceFilters, cursor_encode, sort_parse, trace_page
from otel.models import OtelFactValue
from replay.models import Trace
from replay.selectors import trace_is_replayable
from tests.console.factories import snapshot_row, trace_row
from tests.console.personas import EVERYONE
from tests.otel.sealed import otel_trace, three_traces

pytestmark = pytest.mark.django_db

ONE = "sha256:" + "1" * 64
TWO = "sha256:" + "2" * 64


def ids(page):
    return [t.trace_id for t in page.traces]


@pytest.mark.parametrize("name", EVERYONE)
@pytest.mark.parametrize("htmx", [False, True])
def test_every_role_may_browse_and_a_user_without_one_may_not(as_persona, name, htmx):
    trace_row()
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = as_persona(name).get("/traces/", **headers)
    if name == "nora":
        assert response.status_code == 403
        return
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="trace-table"' in body
    assert ("<html" in body) is not htmx
    assert "HX-Request" in response["Vary"]


def test_it_lists_newest_first_with_verdict_and_replayability(as_persona):
    now = timezone.now()
    old = trace_row(status="ok", created_at=now - timedelta(days=2))
    new = trace_row(status="diverged", created_at=now, missing_outputs=["out-1"])
    body = as_persona("vera").get("/traces/").content.decode()
    assert body.index(new.trace_id) < body.index(old.trace_id)
    assert 'class="badge verdict-diverged"' in body
    assert "not replayable" in body


def test_the_not_replayed_verdict_filters_the_page_by_its_label_too(as_persona):
    new = trace_row(status="new")
    done = trace_row(status="ok")
    for value in ("new", "not_replayed"):
        response = as_persona("vera").get(f"/traces/?verdict={value}")
        assert response.status_code == 200
        body = response.content.decode()
        assert new.trace_id in body
        assert done.trace_id not in body
        assert '<option value="new" selected>not replayed</option>' in body


class TestFilters:
    def test_by_format_verdict_and_id(self):
        a = trace_row(format="replay-trace", status="ok", job_id="job-a")
        b = trace_row(format="paxman", status="diverged", job_id="job-b")
        assert ids(trace_page(filters=TraceFilters(format="paxman"))) == [b.trace_id]
        assert ids(trace_page(filters=TraceFilters(verdict="ok"))) == [a.trace_id]
        assert ids(trace_page(filters=TraceFilters(q="job-a"))) == [a.trace_id]
        assert ids(trace_page(filters=TraceFilters(q=b.trace_id.upper()))) == [b.trace_id]

    def test_by_date_range_inclusive_of_whole_days(self):
        now = timezone.now()
        inside = trace_row(created_at=now - timedelta(days=1))
        trace_row(created_at=now - timedelta(days=5))
        day = (now - timedelta(days=1)).date()
        page = trace_page(filters=TraceFilters(date_from=day, date_to=day))
        assert ids(page) == [inside.trace_id]

    def test_by_replayable_needs_every_snapshot_stored_and_no_missing_output(self):
        snapshot_row(ONE)
        complete = trace_row(required_snapshot_ids=[{"kind": "selfrep", "snapshot_id": ONE}])
        lacks_snapshot = trace_row(required_snapshot_ids=[{"kind": "router", "snapshot_id": TWO}])
        unreferenced = trace_row(required_snapshot_ids=[{"kind": "router", "snapshot_id": None}])
        lacks_output = trace_row(missing_outputs=["llm-1"])
        yes = ids(trace_page(filters=TraceFilters(replayable=True)))
        no = ids(trace_page(filters=TraceFilters(replayable=False)))
        assert yes == [complete.trace_id]
        assert sorted(no) == sorted(
            [lacks_snapshot.trace_id, unreferenced.trace_id, lacks_output.trace_id]
        )
        page = trace_page(filters=TraceFilters())
        for trace in page.traces:  # the batched flag says what replay's own selector says
            assert trace.replayable is trace_is_replayable(trace)
        assert {t.trace_id: t.replayable for t in page.traces} == {
            complete.trace_id: True,
            lacks_snapshot.trace_id: False,
            unreferenced.trace_id: False,
            lacks_output.trace_id: False,
        }

    def test_through_the_page_the_form_filters_and_keeps_the_choice(self, as_persona):
        trace_row(status="ok")
        bad = trace_row(status="tamper_detected")
        response = as_persona("alice").get("/traces/?verdict=tamper_detected")
        body = response.content.decode()
        assert re.findall(r'href="/traces/\?cursor', body) == []
        assert body.count("<tr>") == 2  # header + one row
        assert bad.trace_id in body
        assert '<option value="tamper_detected" selected>' in body

    def test_an_invalid_filter_is_a_400_with_the_reason(self, as_persona):
        response = as_persona("alice").get("/traces/?verdict=great")
        assert response.status_code == 400
        assert "Select a valid choice" in response.content.decode()


class TestCursorPages:
    def test_it_walks_older_and_back_newer_without_overlap_even_on_equal_stamps(self):
        stamp = timezone.now()
        rows = [trace_row(created_at=stamp) for _ in range(5)]  # all the same created_at
        expected = [t.trace_id for t in sorted(rows, key=lambda t: -t.pk)]
        first = trace_page(filters=TraceFilters(), limit=2)
        second = trace_page(filters=TraceFilters(), cursor=first.next_cursor, limit=2)
        third = trace_page(filters=TraceFilters(), cursor=second.next_cursor, limit=2)
        assert ids(first) + ids(second) + ids(third) == expected
        assert third.next_cursor is None
        assert first.prev_cursor is None
        back = trace_page(filters=TraceFilters(), cursor=second.prev_cursor, limit=2)
        assert ids(back) == ids(first)

    def test_the_older_link_keeps_the_filters_and_is_also_an_hx_get(self, as_persona, monkeypatch):
        from console.selectors import listing

        monkeypatch.setattr(listing, "PAGE_SIZE", 2)
        for _ in range(3):
            trace_row(status="ok")
        body = as_persona("vera").get("/traces/?verdict=ok").content.decode()
        link = re.search(r'<a href="(\?[^"]+)" hx-get="(\?[^"]+)"[^>]*rel="next"', body)
        assert link
        assert link[1] == link[2]
        assert "verdict=ok" in link[1]
        older = as_persona("vera").get("/traces/" + link[1].replace("&amp;", "&"))
        assert older.content.decode().count("<tr>") == 2

    def test_a_forged_cursor_is_a_400_not_a_500(self, as_persona):
        response = as_persona("vera").get("/traces/?cursor=bm90LWEtY3Vyc29y")
        assert response.status_code == 400
        assert "This page link is no longer valid" in response.content.decode()

    @pytest.mark.parametrize("direction", ["sideways", "older"])
    def test_a_well_formed_cursor_with_bad_fields_is_refused(self, direction):
        import base64
        import json

        from console.selectors import CursorError

        raw = json.dumps([direction, "not a date", 1]).encode()
        with pytest.raises(CursorError):
            trace_page(
                filters=TraceFilters(), cursor=base64.urlsafe_b64encode(raw).decode().rstrip("=")
            )

    def test_a_cursor_round_trips(self):
        from console.selectors import cursor_decode

        stamp = timezone.now()
        assert cursor_decode(cursor_encode(stamp, 7, "older")) == ("older", stamp, 7)


def test_it_tells_apart_traces_that_share_a_trace_id(as_persona):
    from tests.console.personas import persona

    first = trace_row()
    second = trace_row(size=2048)
    alone = trace_row()
    alice = persona("alice")
    second.trace_id = first.trace_id
    second.uploaded_by = alice
    second.filename = "rerun.trace.json"
    second.save()
    body = as_persona("vera").get("/traces/").content.decode()
    assert (
        f'<span class="trace-twin"><a href="/traces/{first.blob.sha256}/">{first.filename}</a> · '
        f"10\xa0bytes · <code>{first.blob.sha256[:12]}</code> · uploaded by nobody on record</span>"
    ) in body
    assert (
        f'<span class="trace-twin"><a href="/traces/{second.blob.sha256}/">rerun.trace.json</a> · '
        f"2.0\xa0KB · <code>{second.blob.sha256[:12]}</code> · uploaded by alice</span>"
    ) in body
    assert body.count('class="trace-twin"') == 2
    assert alone.filename not in body


# --- OpenTelemetry traces: service, model, operation, conversation id, agent ------------------

ROW_ID = re.compile(r'<tr>\s*<td><a href="/traces/[0-9a-f]{64}/"><code>([0-9a-f]+)</code>')


def listed(response) -> list[str]:
    assert response.status_code == 200, response.content[:800]
    return ROW_ID.findall(response.content.decode())


@pytest.fixture
def otel_rows(db):
    """Three OTel traces (tests.otel.sealed.three_traces) and a native one, newest."""
    return {**three_traces(), "native": trace_row(status="ok")}


class TestOtelFilters:
    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("", ["native", "c", "b", "a"]),
            ("service=weather-svc", ["c", "a"]),  # "Weather-Svc" too: any case
            ("service=Weather-Svc", ["c", "a"]),
            ("model=claude-3-5-sonnet", ["b"]),
            ("model=gpt-4o-mini-2024-07-18", ["a"]),
            ("model=Claude-3-5-Sonnet", []),  # exact
            ("operation=execute_tool", ["c", "a"]),
            ("conversation=conv-a", ["c", "a"]),
            ("agent=BILLING-AGENT", ["b"]),
            ("service=weather-svc&model=gpt-4o&verdict=ok", ["c"]),
            ("operation=chat&format=otel-genai&verdict=diverged", ["b"]),
            ("operation=chat&format=replay-trace", []),
            ("sort=created_at&agent=weather-agent", ["a", "c"]),
        ],
    )
    def test_the_page_lists_exactly_the_traces_holding_the_value(
        self, as_persona, otel_rows, query, expected
    ):
        rows = listed(as_persona("vera").get(f"/traces/?{query}"))
        assert rows == [otel_rows[key].trace_id for key in expected]

    def test_the_older_link_pages_on_with_the_filter_kept(self, as_persona, otel_rows, monkeypatch):
        monkeypatch.setattr("console.selectors.listing.PAGE_SIZE", 1)
        client = as_persona("vera")
        response = client.get("/traces/?agent=weather-agent")
        assert listed(response) == [otel_rows["c"].trace_id]
        (older,) = re.findall(r'href="(\?[^"]+)"[^>]*rel="next"', response.content.decode())
        older = older.replace("&amp;", "&")
        assert "agent=weather-agent" in older
        second = client.get(f"/traces/{older}")
        assert listed(second) == [otel_rows["a"].trace_id]
        assert 'rel="next"' not in second.content.decode()

    def test_the_form_offers_the_known_values_and_keeps_the_choice(self, as_persona, otel_rows):
        body = as_persona("vera").get("/traces/?service=billing-svc").content.decode()
        assert 'id="otel-filters"' in body
        service = re.search(r'<select name="service"[^>]*>(.*?)</select>', body, re.S).group(1)
        assert re.findall(r'<option value="([^"]*)"', service) == [
            "",
            "Weather-Svc",
            "billing-svc",
            "weather-svc",
        ]
        assert '<option value="billing-svc" selected>billing-svc</option>' in service
        model = re.search(r'<select name="model"[^>]*>(.*?)</select>', body, re.S).group(1)
        assert re.findall(r'<option value="([^"]*)"', model) == [
            "",
            "claude-3-5-sonnet",
            "gpt-4o",
            "gpt-4o-2024-08-06",
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
        ]
        for label in ("service", "model", "operation", "conversation id", "agent"):
            assert f"<label>OpenTelemetry: {label}" in body

    def test_more_than_fifty_values_are_a_text_field(self, as_persona, otel_rows):
        OtelFactValue.objects.bulk_create(
            [OtelFactValue(kind="conversation", value=f"conv-{n:03}") for n in range(50)]
        )
        body = as_persona("vera").get("/traces/?conversation=conv-b").content.decode()
        assert '<select name="conversation"' not in body
        assert '<input type="search" name="conversation" value="conv-b" maxlength="255"' in body
        assert '<select name="agent"' in body  # the others still few

    def test_without_otel_traces_the_form_has_no_otel_filter_unless_asked(self, as_persona):
        trace_row()
        assert 'id="otel-filters"' not in as_persona("vera").get("/traces/").content.decode()
        response = as_persona("vera").get("/traces/?model=gpt-4o")
        assert listed(response) == []
        body = response.content.decode()
        assert '<input type="search" name="model" value="gpt-4o"' in body

    def test_an_otel_row_shows_its_services_and_models_as_filter_links(self, as_persona, otel_rows):
        body = as_persona("vera").get("/traces/").content.decode()
        c, b = otel_rows["c"], otel_rows["b"]
        assert (
            f'<td>{c.job_id}<br><span class="otel-facts">service '
            '<a href="/traces/?service=weather-svc">weather-svc</a> · models '
            '<a href="/traces/?model=gpt-4o">gpt-4o</a>, '
            '<a href="/traces/?model=gpt-4o-2024-08-06">gpt-4o-2024-08-06</a></span></td>'
        ) in body
        assert (
            f'<td>{b.job_id}<br><span class="otel-facts">service '
            '<a href="/traces/?service=billing-svc">billing-svc</a> · model '
            '<a href="/traces/?model=claude-3-5-sonnet">claude-3-5-sonnet</a></span></td>'
        ) in body
        native = otel_rows["native"]
        assert f"<td>{native.job_id}</td>" in body

    @pytest.mark.parametrize(
        ("query", "message"),
        [
            (
                "service=" + "s" * 256,
                "service: Ensure this value has at most 255 characters (it has 256).",
            ),
            (
                "agent=bad%01name",
                "agent: not a value a trace holds: a value holds no control or invisible "
                "character (it holds U+0001 at 4)",
            ),
            ("model=nul%00here", "model: Null characters are not allowed."),
        ],
    )
    def test_a_value_no_trace_can_hold_is_a_400_with_the_forms_error(
        self, as_persona, otel_rows, query, message
    ):
        response = as_persona("vera").get(f"/traces/?{query}")
        assert response.status_code == 400
        body = response.content.decode()
        assert f"<p>{message}</p>" in body
        assert "<tbody>" not in body  # no rows listed

    @pytest.mark.parametrize("name", EVERYONE)
    def test_every_role_filters_and_a_user_without_one_may_not(self, as_persona, otel_rows, name):
        response = as_persona(name).get("/traces/?conversation=conv-b")
        if name == "nora":
            assert response.status_code == 403
            return
        assert listed(response) == [otel_rows["b"].trace_id]

    @pytest.mark.parametrize("fmt", ["csv", "json"])
    def test_the_export_lists_what_the_filter_lists(self, as_persona, otel_rows, fmt):
        response = as_persona("vera").get(f"/traces/export.{fmt}?service=WEATHER-SVC&verdict=ok")
        assert response.status_code == 200
        text = b"".join(response.streaming_content).decode()
        if fmt == "csv":
            exported = [line.split(",")[0] for line in text.splitlines()[1:]]
        else:
            exported = [row["trace_id"] for row in json.loads(text)]
        assert exported == [otel_rows["c"].trace_id, otel_rows["a"].trace_id]
        page = as_persona("vera").get("/traces/?service=WEATHER-SVC&verdict=ok")
        assert "export.csv?service=WEATHER-SVC&amp;verdict=ok" in page.content.decode()

    def test_a_bad_value_is_refused_by_the_export_as_on_the_page(self, as_persona, otel_rows):
        response = as_persona("vera").get("/traces/export.csv?operation=a%0Ab")
        assert response.status_code == 400
        assert (
            '<code class="code">INVALID_INPUT</code> operation: not a value a trace holds: a '
            "value holds no control or invisible character (it holds U+000A at 2)"
        ) in response.content.decode()


class TestOtelPagesInEveryOrder:
    """A page filtered by an OpenTelemetry value is read one of three ways (console.selectors
    .trace_page): in time order along the value's own index, in another order by sorting a
    value's few traces, else through the sort's index. Each lists what the plain query
    lists, page after page, forward and back, equal upload times included."""

    @pytest.fixture
    def traces(self, db):
        now = timezone.now()
        same = now - timedelta(hours=5)
        made = [
            otel_trace(service="svc-a", created_at=same, status="ok"),
            otel_trace(service="svc-a", created_at=same, status="diverged"),  # the same time
            otel_trace(service="svc-b", created_at=now - timedelta(hours=4), status="ok"),
            otel_trace(service="svc-a", created_at=now - timedelta(hours=3), status="new"),
            otel_trace(service="svc-a", created_at=now - timedelta(hours=2), status="ok"),
            otel_trace(service="svc-a", created_at=now - timedelta(hours=1), tool=False),
        ]
        trace_row(status="ok")  # not an OTel trace
        return made

    @pytest.fixture
    def spelt_twice(self, traces):
        """svc-a spelt another way too: its filter then names two values (no lead)."""
        return [*traces, otel_trace(service="Svc-A", created_at=traces[0].created_at)]

    @staticmethod
    def walk(filters: TraceFilters, sort: str) -> tuple[list[str], list[str]]:
        """Every page of two, forward; then back from the last page."""
        forward, page = [], trace_page(filters=filters, sort=sort, limit=2)
        pages = [page]
        while True:
            forward += ids(page)
            if page.next_cursor is None:
                break
            page = trace_page(filters=filters, sort=sort, limit=2, cursor=page.next_cursor)
            pages.append(page)
        backward = ids(pages[-1])
        while page.prev_cursor is not None:
            page = trace_page(filters=filters, sort=sort, limit=2, cursor=page.prev_cursor)
            backward = ids(page) + backward
        return forward, backward

    @pytest.mark.parametrize(
        "filters",
        [
            TraceFilters(service="SVC-A"),
            TraceFilters(service="svc-a", verdict="ok"),
            TraceFilters(operation="execute_tool", service="svc-a"),
            TraceFilters(operation="chat"),
        ],
        ids=["service", "service+verdict", "two-otel-filters", "every-otel-trace"],
    )
    @pytest.mark.parametrize(
        "path",
        [(10_000, "traces"), (0, "traces"), (10_000, "spelt_twice")],
        ids=["lead-few-sorted", "lead-sort-index", "no-lead"],
    )
    @pytest.mark.parametrize("sort", sorted(SORTS) + [f"-{name}" for name in sorted(SORTS)])
    def test_every_order_lists_what_the_plain_query_lists(
        self, request, monkeypatch, filters, path, sort
    ):
        few, fixture = path
        traces = request.getfixturevalue(fixture)
        monkeypatch.setattr("console.selectors.listing.OTEL_FEW", few)
        column, descending = sort_parse(sort)
        sign = "-" if descending else ""
        holding = {
            "svc-a": {t.pk for t in traces if t.trace_id != traces[2].trace_id},
            "execute_tool": {t.pk for t in traces if t.trace_id != traces[5].trace_id},
        }
        wanted = {t.pk for t in traces}
        if filters.service:
            wanted &= holding["svc-a"]
        if filters.operation == "execute_tool":
            wanted &= holding["execute_tool"]
        plain = Trace.objects.filter(pk__in=wanted)
        if filters.verdict:
            plain = plain.filter(last_status=filters.verdict)
        expected = list(
            plain.order_by(f"{sign}{column}", f"{sign}id").values_list("trace_id", flat=True)
        )
        assert expected  # the case lists something
        forward, backward = self.walk(filters, sort)
        assert forward == expected
        assert backward == expected
