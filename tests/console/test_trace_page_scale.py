"""The trace page of a large trace stays cheap: its overview's bars are written in Python (the
exact markup the template loop wrote) and the trace's index is read once per request."""

from __future__ import annotations

import io
import re

import pytest
from django.template import Context, Template

from console import charts
from core.formats import native

#: the loop the trace page's template used to draw the overview with (kept to compare)
TEMPLATE_LOOP = (
    "{% for b in timeline.buckets %}"
    '<a href="?seq={{ b.first }}#events" class="bucket"><rect class="ev-{{ b.state }}" '
    'x="{{ b.x }}" y="{{ b.y }}" width="{{ b.width }}" height="{{ b.height }}"><title>'
    "{% if b.first == b.last %}seq {{ b.first }}{% else %}seq {{ b.first }}–{{ b.last }} "
    "({{ b.count }} events){% endif %}: {% for t, n in b.types %}{{ t }} {{ n }}"
    "{% if not forloop.last %}, {% endif %}{% endfor %}{% if b.state == 'bad' %} — the chain "
    "broke at seq {{ timeline.broke_at }}{% elif b.state == 'after' %} — not verifiable after "
    "the break{% endif %}</title></rect></a>\n{% endfor %}"
)


def _buckets() -> list[dict]:
    return [
        {"first": 0, "last": 499, "count": 500, "types": {"brain.tick": 163, "observation": 162}},
        {"first": 500, "last": 500, "count": 1, "types": {'<script>"x"&': 1}},
        {"first": 501, "last": 730, "count": 230, "types": {"tool.call": 200, "a": 30}},
        {"first": 731, "last": 999, "count": 269, "types": {}},
    ]


def test_the_bars_are_the_markup_the_template_loop_wrote():
    for broke_at in (None, 600):
        overview = charts.overview(_buckets(), total=1000, broke_at=broke_at)
        expected = Template(TEMPLATE_LOOP).render(Context({"timeline": overview})).strip()

        assert overview.bars_html() == expected
    assert "&lt;script&gt;&quot;x&quot;&amp; 1" in overview.bars_html()
    states = re.findall(r'class="ev-(\w+)"', overview.bars_html())
    assert states == ["ok", "ok", "bad", "after"]


@pytest.mark.django_db
def test_a_large_trace_page_reads_its_index_once(as_persona, trace_key):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from replay.services import trace_ingest
    from tests.console.test_trace_paging import _recorded

    data = b"".join(native.iter_jsonl(_recorded(3000)))
    trace = trace_ingest(source=io.BytesIO(data), filename="large.trace.jsonl").trace
    client = as_persona("vera")
    assert client.get(f"/traces/{trace.blob.sha256}/").status_code == 200  # builds the index

    for url in (f"/traces/{trace.blob.sha256}/", f"/traces/{trace.blob.sha256}/?seq=2001"):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200
        reads = [q["sql"] for q in queries.captured_queries if "replay_traceindex" in q["sql"]]
        assert len(reads) == 1, reads
        assert len(queries.captured_queries) <= 30


@pytest.mark.django_db
def test_a_window_of_a_large_trace_reads_its_header_and_the_window_only(
    as_persona, trace_key, monkeypatch, django_capture_on_commit_callbacks
):
    """The page parses the JSON Lines header line through a small read-ahead (the windows
    are read by offsets): a 1 MiB read-ahead read, spliced and hashed a megabyte per page."""
    from console.selectors import opened
    from replay.services import trace_ingest
    from tests.console.test_trace_paging import _recorded

    data = b"".join(native.iter_jsonl(_recorded(10_000)))
    assert len(data) > 2 << 20
    with django_capture_on_commit_callbacks(execute=True):  # its index built at ingest
        trace = trace_ingest(source=io.BytesIO(data), filename="large.trace.jsonl").trace
    client = as_persona("vera")

    delivered = []

    def counted(name):
        fh = blob_open(name)
        read = fh.read

        def read_counted(n=-1):
            chunk = read(n)
            delivered.append(len(chunk))
            return chunk

        fh.read = read_counted
        return fh

    blob_open = opened.blob_open
    monkeypatch.setattr(opened, "blob_open", counted)
    body = client.get(f"/traces/{trace.blob.sha256}/?seq=5000").content.decode()
    assert ">seq 5000: " in body
    assert 0 < sum(delivered) < 256 * 1024, sum(delivered)
