"""The trace list: newest first, filters, keyset pages, the htmx partial, and who may see it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.selectors import TraceFilters, cursor_encode, trace_page
from replay.selectors import trace_is_replayable
from tests.console.factories import snapshot_row, trace_row
from tests.console.personas import EVERYONE

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
