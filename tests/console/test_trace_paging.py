"""Large traces on their page: keyset paging of events and steps with a jump to a seq, an
overview of the whole trace in buckets that marks a chain break wherever it is, payloads in
place; and the work of a window does not grow with what comes before it."""

from __future__ import annotations

import gzip
import io
import json
import re

import pytest

from console.selectors import trace_index, trace_window
from core.formats import native
from core.replay import traceindex
from replay.models import TraceIndex

pytestmark = pytest.mark.django_db

EVENTS = 3000


def _recorded(filler: int) -> dict:
    from core.formats import default_registry
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256
    from tests.console.conftest import TRACE_KEY_ID, TRACE_SECRET

    return record(
        RecordOptions(seed="paging", iterations=40, filler_events=filler),
        default_registry(),
        signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET),
    )


@pytest.fixture(scope="module")
def document() -> dict:
    return _recorded(EVENTS)


def _store(data: bytes, filename: str):
    from replay.services import trace_ingest

    return trace_ingest(source=io.BytesIO(data), filename=filename).trace


@pytest.fixture
def large(trace_key, document):
    return _store(b"".join(native.iter_jsonl(document)), "large.trace.jsonl")


def _events_section(body: str) -> str:
    return body[body.index('<section class="card" id="events">') : body.index('id="steps"')]


def _seqs(section: str) -> list[int]:
    return [int(s) for s in re.findall(r">seq (\d+): ", section)]


def test_it_draws_the_whole_trace_as_200_buckets_of_events(as_persona, large):
    body = as_persona("vera").get(f"/traces/{large.blob.sha256}/").content.decode()

    svg = body[body.index('<svg class="timeline"') : body.index("</svg>")]
    assert svg.count('<a href="?seq=') == traceindex.BUCKETS
    assert svg.count('class="ev-ok"') == traceindex.BUCKETS
    assert "the first 80 are drawn" not in body
    index = TraceIndex.objects.get(blob=large.blob).index
    assert sum(b["count"] for b in index["buckets"]) == large.event_count
    last = index["buckets"][-1]
    assert f'<a href="?seq={last["first"]}#events" class="bucket">' in svg


def test_it_pages_events_by_seq_with_links_both_ways(as_persona, large):
    client = as_persona("vera")
    first = _events_section(client.get(f"/traces/{large.blob.sha256}/").content.decode())
    assert _seqs(first) == list(range(50))
    assert 'href="?after=49#events"' in first
    assert "Earlier events" not in first

    later = _events_section(client.get(f"/traces/{large.blob.sha256}/?after=49").content.decode())
    assert _seqs(later) == list(range(50, 100))
    assert 'href="?before=50#events"' in later
    assert 'href="?after=99#events"' in later

    back = _events_section(client.get(f"/traces/{large.blob.sha256}/?before=50").content.decode())
    assert _seqs(back) == list(range(50))


def test_a_jump_reaches_an_event_near_the_end_and_the_last_page_has_no_next(as_persona, large):
    last = large.event_count - 1
    body = as_persona("vera").get(f"/traces/{large.blob.sha256}/?seq={last - 10}").content
    section = _events_section(body.decode())
    assert _seqs(section) == list(range(last - 10, last + 1))
    assert "Later events" not in section
    assert f'name="seq" min="0" value="{last - 10}"' in section


def test_a_window_near_the_end_parses_no_more_than_it_shows_and_one_stride(large):
    trace_index(large)  # built once; the property is about the pages after that
    seq = large.event_count - 100

    window = trace_window(large, "event", after=seq - 1, limit=50)

    assert [e["seq"] for e in window.records] == list(range(seq, seq + 50))
    assert window.parsed <= 50 + 1 + traceindex.STRIDE * 2  # events and steps interleave
    first = trace_window(large, "event", after=None, limit=50)
    assert window.parsed <= 3 * first.parsed + traceindex.STRIDE


def test_the_index_is_built_once_and_kept(as_persona, large):
    client = as_persona("vera")
    client.get(f"/traces/{large.blob.sha256}/")
    stored = TraceIndex.objects.get(blob=large.blob)
    client.get(f"/traces/{large.blob.sha256}/?seq=2000")
    assert TraceIndex.objects.get(blob=large.blob).created_at == stored.created_at
    assert stored.index["events"] == large.event_count
    assert stored.index["steps"] == large.step_count


def test_an_htmx_page_of_events_is_the_events_section_alone(as_persona, large, htmx_headers):
    response = as_persona("vera").get(
        f"/traces/{large.blob.sha256}/?after=99", HTTP_HX_TARGET="events", **htmx_headers
    )
    body = response.content.decode()
    assert body.strip().startswith('<section class="card" id="events">')
    assert _seqs(body) == list(range(100, 150))


def test_it_pages_steps_by_seq(as_persona, large, document):
    steps = document["steps"]
    client = as_persona("vera")
    body = client.get(f"/traces/{large.blob.sha256}/").content.decode()
    section = body[body.index('id="steps"') : body.index('id="replay-start"')]
    assert section.count("<tr>") == min(50, len(steps)) + 1
    third = steps[2]["seq"]
    body = client.get(f"/traces/{large.blob.sha256}/?steps_seq={third}").content.decode()
    section = body[body.index('id="steps"') : body.index('id="replay-start"')]
    assert f"<code>{steps[2]['step_id']}</code>" in section
    assert f"<code>{steps[1]['step_id']}</code>" not in section
    assert f'href="?steps_before={third}#steps"' in section


def test_an_event_far_in_shows_its_payload_in_place(as_persona, large, document):
    seq = large.event_count - 5
    response = as_persona("vera").get(
        f"/traces/{large.blob.sha256}/events/{seq}/", HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.strip().startswith('<section id="event-payload" class="card">')
    event = next(e for e in document["events"] if e["seq"] == seq)
    assert f"<h2>Event {seq}: <code>{event['type']}</code></h2>" in body


def test_it_refuses_a_seq_that_is_not_a_number(as_persona, large):
    response = as_persona("vera").get(f"/traces/{large.blob.sha256}/?seq=abc")
    assert response.status_code == 400
    assert (
        '<p class="error" role="alert" id="events-error">seq must be a whole number (a seq), '
        "not &#x27;abc&#x27;.</p>"
    ) in response.content.decode()


def test_a_chain_break_deep_in_a_gzipped_trace_is_marked_in_its_bucket(
    as_persona, trace_key, document
):
    broken = json.loads(json.dumps(document))
    bad = 2500
    broken["events"][bad]["payload"] = {"forged": True}
    data = gzip.compress(b"".join(native.iter_jsonl(broken)))
    trace = _store(data, "broken.trace.jsonl.gz")
    assert trace.ingest_report["broke_at"] == bad

    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()

    svg = body[body.index('<svg class="timeline"') : body.index("</svg>")]
    assert svg.count('class="ev-bad"') == 1
    index = TraceIndex.objects.get(blob=trace.blob).index
    hit = next(b for b in index["buckets"] if b["first"] <= bad <= b["last"])
    position = index["buckets"].index(hit)
    assert svg.count('class="ev-ok"') == position
    assert svg.count('class="ev-after"') == len(index["buckets"]) - position - 1
    assert f"the chain broke at seq {bad}</title>" in svg
    assert f'<a href="?seq={bad}#events">Show the events there</a>' in body
    there = as_persona("vera").get(f"/traces/{trace.blob.sha256}/?seq={bad}").content.decode()
    assert _seqs(_events_section(there))[0] == bad
