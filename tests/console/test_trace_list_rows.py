"""The trace list's rows are written in Python (console.tables), not by a template loop whose
per-cell cost grew with its columns (issue 23): the markup is the loop's, byte for byte."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.template import Context, Template
from django.utils import timezone

from console.tables import trace_rows_html
from replay.models import Blob, Trace

pytestmark = pytest.mark.django_db

#: the row loop the list's template used (kept to compare)
TEMPLATE_LOOP = """{% for t in page.traces %}
      <tr>
        <td><a href="{% url 'trace-detail' t.blob.sha256 %}"><code>{{ t.trace_id }}</code></a>{% if t.shares_trace_id %}
          <br><span class="trace-twin"><a href="{% url 'trace-detail' t.blob.sha256 %}">{{ t.filename }}</a> · {{ t.blob.size|filesizeformat }} · <code>{{ t.blob.sha256|slice:":12" }}</code> · {% if t.uploaded_by %}uploaded by {{ t.uploaded_by.get_username }}{% elif t.uploaded_label %}loaded by {{ t.uploaded_label }}{% else %}uploaded by nobody on record{% endif %}</span>{% endif %}</td>
        <td>{{ t.format }}</td>
        <td>{{ t.job_id|default:"—" }}{% with f=t.otel %}{% if f.service_names or f.model_names %}<br><span class="otel-facts">{% if f.service_names %}service{{ f.service_names|length|pluralize }} {% for v in f.service_names|slice:":3" %}<a href="{% url 'trace-list' %}?service={{ v|urlencode:'' }}">{{ v }}</a>{% if not forloop.last %}, {% endif %}{% endfor %}{% if f.service_names|length > 3 %} +{{ f.service_names|length|add:"-3" }} more{% endif %}{% endif %}{% if f.service_names and f.model_names %} · {% endif %}{% if f.model_names %}model{{ f.model_names|length|pluralize }} {% for v in f.model_names|slice:":3" %}<a href="{% url 'trace-list' %}?model={{ v|urlencode:'' }}">{{ v }}</a>{% if not forloop.last %}, {% endif %}{% endfor %}{% if f.model_names|length > 3 %} +{{ f.model_names|length|add:"-3" }} more{% endif %}{% endif %}</span>{% endif %}{% endwith %}</td>
        <td><span class="badge verdict-{{ t.last_status }}">{{ t.get_last_status_display }}</span></td>
        <td>{% if t.expired_at %}<span class="badge no" title="expired by retention: {{ t.expiry_rule }}">expired</span>{% elif t.last_status == "tamper_detected" %}<span class="badge not-intact" title="the file failed its integrity check (tamper detected): a replay stops there, whatever is stored, so replayable does not apply">not intact</span>{% elif t.replayable %}<span class="badge yes">replayable</span>{% else %}<span class="badge no">not replayable</span>{% endif %}</td>
        <td><time datetime="{{ t.created_at|date:'c' }}">{{ t.created_at|date:"Y-m-d H:i" }}</time></td>
      </tr>
    {% endfor %}"""  # noqa: E501


def _traces(ingest) -> list[Trace]:
    from tests.console.personas import persona

    base = ingest("ok")
    rows = []
    cases = [
        {"job_id": "", "last_status": "diverged"},
        {"job_id": '<job "x"> & y', "filename": "a&b<c>.trace.json", "shares": True},
        {"expired_at": datetime(2026, 3, 1, 12, 0, tzinfo=UTC), "expiry_rule": 'r"<1>'},
        {"replayable": True, "last_status": "tamper_detected", "uploaded_by": persona("alice")},
        {
            "shares": True,
            "uploaded_by": persona("vera"),
            "created": datetime(2026, 1, 2, 3, 4, 5, 6789, tzinfo=UTC),
        },
        {"last_status": "no-such-status"},
        {"shares": True, "uploaded_label": 'the <demo> & "co"'},
        {"replayable": True, "last_status": "ok"},
        # an OpenTelemetry trace's services and models (OtelTraceFacts), as filter links
        {"otel": (["weather-svc"], ["gpt-4o-mini", "gpt-4o-mini-2024-07-18"])},
        {"otel": (['svc "<a>" & b', "two", "three", "four"], ["m/1?x=&y", "m 2", "m3", "m4"])},
        {"otel": ([], ["only-a-model"])},
        {"otel": (["only-a-service"], [])},
        {"otel": ([], [])},
    ]
    for i, case in enumerate(cases):
        t = copy.copy(base)
        t.pk = t.id = None
        t.trace_id = f"{i:032x}"
        t.blob = Blob.objects.create(
            sha256=f"{i:064x}", size=1000 * 1024 ** min(i, 5), storage_name=f"x/{i}"
        )
        for key in (
            "job_id",
            "filename",
            "last_status",
            "expired_at",
            "expiry_rule",
            "uploaded_by",
            "uploaded_label",
        ):
            if key in case:
                setattr(t, key, case[key])
        t.save()
        if "created" in case:
            Trace.objects.filter(pk=t.pk).update(created_at=case["created"])
            t.refresh_from_db()
        if "otel" in case:
            services, models = case["otel"]
            t.otel = SimpleNamespace(service_names=services, model_names=models)
        t.shares_trace_id = case.get("shares", False)
        t.replayable = case.get("replayable", False)
        rows.append(t)
    return rows


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_the_rows_are_the_markup_the_template_loop_wrote(ingest, zone):
    traces = _traces(ingest)
    with timezone.override(zone):
        expected = Template(TEMPLATE_LOOP).render(Context({"page": {"traces": traces}}))
        written = trace_rows_html(traces)
    assert written == expected
    assert "&lt;job &quot;x&quot;&gt; &amp; y" in written
    assert "<td>—</td>" in written
    assert (
        '<span class="otel-facts">services '
        '<a href="/traces/?service=svc%20%22%3Ca%3E%22%20%26%20b">'
        "svc &quot;&lt;a&gt;&quot; &amp; b</a>, "
        '<a href="/traces/?service=two">two</a>, <a href="/traces/?service=three">three</a> '
        '+1 more · models <a href="/traces/?model=m%2F1%3Fx%3D%26y">m/1?x=&amp;y</a>, '
    ) in written
    assert '<span class="otel-facts">model <a href="/traces/?model=only-a-model">' in written
    assert written.count('class="otel-facts"') == 4  # not for facts without either


def test_the_list_page_shows_them(as_persona, ingest):
    trace = ingest("diverged")
    body = as_persona("vera").get("/traces/").content.decode()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>{trace.trace_id}</code></a>' in body
    assert '<span class="badge verdict-diverged">diverged</span>' in body


def test_an_empty_page_says_no_trace_matches(as_persona):
    body = as_persona("vera").get("/traces/?q=nothing-like-this").content.decode()
    assert '<tr><td colspan="6" class="empty">No traces match.</td></tr>' in body
