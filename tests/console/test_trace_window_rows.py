"""The trace page's windows of events and steps are written in Python (console.tables), not by
template loops with two ``{% url %}`` reversals and a dozen lookups a row (issue 23: most of
a trace page's rendering): the markup is the loops', byte for byte."""

from __future__ import annotations

import re

import pytest
from django.template import Context, Template
from django.test import override_settings

from console.tables import trace_event_items_html, trace_step_rows_html

#: the loops the trace page's template used (kept to compare)
EVENTS_LOOP = (
    '{% for e in events.records %}<li{% if e.seq == timeline.broke_at %} class="diverged"'
    '{% endif %}><a href="{% url \'trace-event\' trace.blob.sha256 e.seq %}" hx-get="'
    '{% url \'trace-event\' trace.blob.sha256 e.seq %}" hx-target="#event-payload" '
    'hx-swap="outerHTML">seq {{ e.seq }}: {{ e.type }}</a></li>{% empty %}<li class="empty">'
    "No events here.</li>{% endfor %}"
)
STEPS_LOOP = """{% for st in steps.records %}
      <tr{% if st.seq == report.broke_at and report.error_code == 'REPLAY_DIVERGENCE' %} class="diverged"{% endif %}>
        <td>{{ st.seq }}</td><td><code>{{ st.step_id }}</code></td><td>{{ st.kind }}</td><td><code>{{ st.fn }}</code></td><td>{% if st.output_ref %}<code>{{ st.output_ref }}</code>{% endif %}</td>
      </tr>
    {% empty %}
      <tr><td colspan="5" class="empty">No steps.</td></tr>
    {% endfor %}"""  # noqa: E501

SHA = "ab" * 32

EVENTS = [
    {"seq": 0, "type": "run.start"},
    {"seq": 7, "type": "<script>\"x\"</script> & 'y'"},
    {"seq": 1234567, "type": "tool.call"},
    {"seq": 8, "type": ""},
    {"seq": 9},  # no type
    {"seq": 10, "type": 12.5},
    {"seq": 11, "type": None},
]

STEPS = [
    {"seq": 0, "step_id": "s-0", "kind": "llm", "fn": "plan", "output_ref": "out:0"},
    {"seq": 3, "step_id": "<b>", "kind": "tool & co", "fn": '"q"', "output_ref": ""},
    {"seq": 4567, "step_id": 42, "kind": None, "fn": "", "output_ref": None},
    {"seq": 5, "step_id": ["a", "b"], "kind": "x", "fn": "f", "output_ref": "<ref>"},
    {"seq": 6, "step_id": True, "kind": 1.25, "fn": "g"},
]

REPORTS = [
    None,
    {},
    {"broke_at": 3, "error_code": "REPLAY_DIVERGENCE"},
    {"broke_at": 3, "error_code": "TAMPER_DETECTED"},
    {"broke_at": 99, "error_code": "REPLAY_DIVERGENCE"},
]


def _events_loop(records, broke_at) -> str:
    context = {
        "events": {"records": records},
        "timeline": {"broke_at": broke_at},
        "trace": {"blob": {"sha256": SHA}},
    }
    return Template(EVENTS_LOOP).render(Context(context))


@pytest.mark.parametrize("thousands", [False, True])
@pytest.mark.parametrize("broke_at", [None, 7, 1234567, 500])
def test_the_event_items_are_the_markup_the_template_loop_wrote(thousands, broke_at):
    with override_settings(USE_THOUSAND_SEPARATOR=thousands):
        written = trace_event_items_html(EVENTS, sha256=SHA, broke_at=broke_at)
        assert written == _events_loop(EVENTS, broke_at)
    assert "seq 7: &lt;script&gt;&quot;x&quot;&lt;/script&gt; &amp; &#x27;y&#x27;" in written
    assert f'href="/traces/{SHA}/events/1234567/"' in written
    assert ("seq 1,234,567: tool.call" in written) is thousands
    marked = re.findall(r'<li class="diverged"><a href="[^"]+/events/(\d+)/"', written)
    assert marked == ([] if broke_at in (None, 500) else [str(broke_at)])


def test_an_empty_window_of_events_says_so():
    assert trace_event_items_html([], sha256=SHA, broke_at=None) == _events_loop([], None)
    assert trace_event_items_html([], sha256=SHA, broke_at=3) == (
        '<li class="empty">No events here.</li>'
    )


@pytest.mark.parametrize("thousands", [False, True])
@pytest.mark.parametrize("report", REPORTS)
def test_the_step_rows_are_the_markup_the_template_loop_wrote(thousands, report):
    for records in (STEPS, []):
        context = Context({"steps": {"records": records}, "report": report})
        with override_settings(USE_THOUSAND_SEPARATOR=thousands):
            written = trace_step_rows_html(records, report)
            assert written == Template(STEPS_LOOP).render(context)
    written = trace_step_rows_html(STEPS, report)
    assert "<td><code>&lt;b&gt;</code></td><td>tool &amp; co</td>" in written
    assert "<td><code>&lt;ref&gt;</code></td>" in written
    diverged = bool(report) and report["error_code"] == "REPLAY_DIVERGENCE" and report["broke_at"]
    assert written.count('<tr class="diverged">') == (1 if diverged == 3 else 0)


@pytest.mark.django_db
def test_a_broken_chains_page_marks_the_event_it_broke_at(as_persona, ingest):
    trace = ingest("broken_chain")
    broke_at = trace.ingest_report["broke_at"]
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()

    link = f"/traces/{trace.blob.sha256}/events/{broke_at}/"
    assert f'<li class="diverged"><a href="{link}" hx-get="{link}"' in body
    assert body.count('<li class="diverged">') == 1


@pytest.mark.django_db
def test_a_diverged_replays_page_marks_the_step_it_diverged_at(as_persona, replayed):
    run = replayed("diverged")
    assert run.error_code == "REPLAY_DIVERGENCE"
    body = as_persona("vera").get(f"/traces/{run.trace.blob.sha256}/").content.decode()

    row = f'<tr class="diverged">\n        <td>{run.report["broke_at"]}</td>'
    assert row in body
    assert body.count('<tr class="diverged">') == 1
