"""A sealed OTel trace on the one trace page every format shares: its spans are records of
the page's index (core.replay.recordview), built at ingest, paged by position, each read in
the record viewer; the page reads no file once the index and the panel are kept."""

from __future__ import annotations

import json
import re

import pytest
from django.test import override_settings

from console.selectors import trace_index
from console.views import traces as trace_views
from core.formats import formats
from otel.models import OtelTrace
from otel.services import otel_seal
from replay.models import TraceIndex
from tests.otel.helpers import only_trace_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def sealed(send, django_capture_on_commit_callbacks):
    def seal(name: str):
        send(name)
        with django_capture_on_commit_callbacks(execute=True):
            return otel_seal(trace_id=only_trace_id())

    return seal


def test_a_small_trace_s_index_is_built_by_its_first_page_and_holds_no_content(sealed, as_persona):
    trace = sealed("openai-v2-proto.bin")
    # not at ingest: that would parse every stored file once more in the process that took it
    assert not TraceIndex.objects.filter(blob=trace.blob).exists()
    as_persona("vera").get(f"/traces/{trace.blob.sha256}/")
    index = TraceIndex.objects.get(blob=trace.blob).index
    assert index["view"] == "records"
    assert index["count"] == 4
    assert index["kinds"] == {"span": 4}
    assert [(r[0], r[1], r[3], r[4]) for r in index["records"]] == [
        ("span", "invoke_agent weather-agent", None, 0),
        ("span", "chat gpt-4o-mini", 0, 1),
        ("span", "execute_tool get_weather", 0, 1),
        ("span", "chat gpt-4o-mini", 0, 1),
    ]
    text = json.dumps(index)
    assert "Paris" not in text  # no message, argument or result reaches the index


def test_the_page_draws_the_window_and_links_each_span_to_its_record(sealed, as_persona):
    trace = sealed("openai-v2-proto.bin")
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert re.search(r'id="records-summary">4 records \(4 spans\); 1 to 4 are drawn above', body)
    links = re.findall(rf'href="/traces/{trace.blob.sha256}/records/(\d+)/"', body)
    assert links == ["0", "1", "2", "3"]
    assert 'class="bucket"' not in body  # one window shows them all: no overview


def test_the_overview_links_each_run_of_records_when_one_window_does_not_show_all(
    sealed, as_persona, monkeypatch
):
    trace = sealed("openai-v2-proto.bin")
    monkeypatch.setattr(trace_views, "RECORDS_WINDOW", 2)
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
    bars = re.findall(r'<a href="\?at=(\d+)#records" class="bucket">', body)
    assert bars == ["0", "1", "2", "3"]
    assert "<title>record 2: span 1</title>" in body


def test_the_record_viewer_shows_one_span_as_stored(sealed, as_persona):
    trace = sealed("openai-v2-proto.bin")
    client = as_persona("vera")
    response = client.get(f"/traces/{trace.blob.sha256}/records/2/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Span 2: execute_tool get_weather" in body
    assert "At <code>/spans/2</code> in the stored file." in body
    assert "&quot;operation&quot;: &quot;execute_tool&quot;" in body
    assert client.get(f"/traces/{trace.blob.sha256}/records/4/").status_code == 404
    # htmx asks for the value alone, into the page's #record-value
    partial = client.get(f"/traces/{trace.blob.sha256}/records/0/", headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<section id="record-value"')


def test_windows_turn_by_position_and_a_bad_position_is_refused(sealed, as_persona, monkeypatch):
    trace = sealed("openai-v2-proto.bin")
    monkeypatch.setattr(trace_views, "RECORDS_WINDOW", 2)
    client = as_persona("vera")
    first = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert re.findall(r'<tr id="span-(\d+)"', first) == ["0", "1"]
    assert 'href="?at=2#records" rel="next"' in first
    second = client.get(f"/traces/{trace.blob.sha256}/?at=2").content.decode()
    assert re.findall(r'<tr id="span-(\d+)"', second) == ["2", "3"]
    assert 'href="?at=0#records" rel="prev"' in second
    assert 'rel="next"' not in second
    bad = client.get(f"/traces/{trace.blob.sha256}/?at=x")
    assert bad.status_code == 400
    assert "at must be a whole number (a record&#x27;s position), not &#x27;x&#x27;." in (
        bad.content.decode()
    )


def test_a_large_trace_s_index_is_built_in_the_background_and_the_page_says_how_far(
    send, as_persona, django_capture_on_commit_callbacks
):
    send("openai-v2-proto.bin")
    with override_settings(REPLAY_INDEX_INLINE_RECORDS=2):
        trace = otel_seal(trace_id=only_trace_id())  # its index queued, not run (no commit)
        body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
        assert "index is being built in the background: 0 of 4 records read" in body
        assert not TraceIndex.objects.filter(blob=trace.blob).exists()
        send("openai-v2-proto-nocontent.bin")  # another trace, whose ingest queues its build
        with django_capture_on_commit_callbacks(execute=True):
            other = otel_seal(trace_id=OtelTrace.objects.get(open=True).trace_id)
    assert TraceIndex.objects.get(blob=other.blob).index["count"] == 4


def test_a_page_seen_again_parses_no_file(sealed, as_persona, monkeypatch):
    trace = sealed("openai-v2-proto.bin")
    client = as_persona("vera")
    assert client.get(f"/traces/{trace.blob.sha256}/").status_code == 200
    fmt = formats().get("otel-genai")
    calls = []
    original = type(fmt).parse

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(fmt), "parse", counting)
    again = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert "execute_tool get_weather" in again
    assert calls == []


@pytest.mark.parametrize(
    ("persona", "status"), [("vera", 200), ("alice", 200), ("lena", 200), ("nora", 403)]
)
def test_the_record_viewer_checks_the_roles_matrix(sealed, as_persona, persona, status):
    trace = sealed("openai-v2-proto.bin")
    response = as_persona(persona).get(f"/traces/{trace.blob.sha256}/records/0/")
    assert response.status_code == status


def test_each_span_s_extent_is_its_bytes_in_the_sealed_record(sealed):
    trace = sealed("openai-v2-proto.bin")
    index = trace_index(trace)
    from tests.otel.helpers import record_of

    stored = record_of(trace)
    from replay.storage import blob_open

    with blob_open(trace.blob.storage_name) as fh:
        data = fh.read()
    for row in index["records"]:
        offset, length = row[6]
        at = int(row[2].rsplit("/", 1)[1])
        assert json.loads(data[offset : offset + length]) == stored["spans"][at]


def test_an_export_sealed_when_read_has_no_extents(as_persona):
    import io

    from replay.services import trace_ingest
    from tests.otel.helpers import FIXTURES

    data = (FIXTURES / "openai-v2-json.json").read_bytes()
    trace = trace_ingest(source=io.BytesIO(data), filename="run.otlp.json").trace
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/records/1/").content.decode()
    assert "Span 1: chat gpt-4o-mini" in body  # read by parsing the (small) file again
    index = TraceIndex.objects.get(blob=trace.blob).index
    assert {row[6] is None for row in index["records"]} == {True}


def test_a_file_too_large_to_parse_in_a_request_is_read_through_its_index(
    sealed, as_persona, monkeypatch
):
    trace = sealed("openai-v2-proto.bin")
    trace_index(trace)  # as ingest builds a large file's in the background
    fmt = formats().get("otel-genai")

    def refuse(*_args, **_kwargs):
        raise AssertionError("a page parsed the whole file")

    monkeypatch.setattr(type(fmt), "parse", refuse)
    client = as_persona("vera")
    with override_settings(REPLAY_PAGE_PARSE_BYTES=100):
        body = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
        record = client.get(f"/traces/{trace.blob.sha256}/records/2/").content.decode()
    assert f"This file is {trace.blob.size} bytes, more than a page parses whole" in body
    # the panel's facts, from the index (no conversation id: a path rule may name it personal)
    assert "<dt>model calls</dt><dd><code>2</code></dd>" in body
    assert "conversation id" not in body
    assert 'id="otel-conversation"' not in body
    # the records table draws the waterfall itself
    assert re.findall(r'<tr id="span-\d+" class="span-(\w+)"', body) == [
        "agent",
        "model",
        "tool",
        "model",
    ]
    assert body.count('<svg class="waterfall-bar"') == 4
    assert "Span 2: execute_tool get_weather" in record
    assert "&quot;operation&quot;: &quot;execute_tool&quot;" in record


def test_a_record_without_extent_in_a_file_too_large_is_refused_with_why(as_persona):
    import io

    from replay.services import trace_ingest
    from tests.otel.helpers import FIXTURES

    data = (FIXTURES / "openai-v2-json.json").read_bytes()
    trace = trace_ingest(source=io.BytesIO(data), filename="run.otlp.json").trace
    with override_settings(REPLAY_PAGE_PARSE_BYTES=100):
        response = as_persona("vera").get(f"/traces/{trace.blob.sha256}/records/1/")
    assert response.status_code == 422
    assert (
        f"the stored file is {trace.blob.size} bytes, more than a page parses whole "
        "(REPLAY_PAGE_PARSE_BYTES, 100 bytes), and its index does not say where this record lies"
    ) in response.content.decode()
