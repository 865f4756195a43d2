"""The comparison of two native traces is written in Python (console.tables), not by nested
template loops (issue 23: the compare page's costliest part): the markup is the loops', byte
for byte."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from console.diffview import CompareRow, CompareSection, Side
from console.tables import compare_sections_html

#: the loop the compare page's template used (kept to compare)
SECTIONS_LOOP = """{% for s in sections %}
  <section class="compare-section compare-{{ s.kind }}" id="compare-{{ forloop.counter }}">
    <h3>{{ s.title|capfirst }} <code>{{ s.path }}</code></h3>
    <table>
      <thead><tr><th>Field (JSON pointer)</th><th>Change</th><th>{{ trace.filename }}</th><th>{{ other.filename }}</th></tr></thead>
      <tbody>
      {% for r in s.rows %}
        <tr><td class="path"><code>{{ r.path }}</code></td><td>{{ r.kind }}</td><td>{% if r.before.present %}<pre class="value">{{ r.before.text }}</pre>{% else %}—{% endif %}</td><td>{% if r.after.present %}<pre class="value">{{ r.after.text }}</pre>{% else %}—{% endif %}</td></tr>
      {% endfor %}
      </tbody>
    </table>
  </section>
  {% endfor %}"""  # noqa: E501

SECTIONS = [
    CompareSection("header", "/", "the header", [
        CompareRow("/job/job_seed", "changed", Side(True, '"a"'), Side(True, '"b"')),
    ]),
    CompareSection("event", "/events/7", "event 7 <tool.call> & \"x\"", [
        CompareRow("/events/7/payload/q", "changed", Side(True, '"<script>"'), Side(True, "'y'")),
        CompareRow("/events/7/payload/new", "added", Side(False), Side(True, "[1, 2]")),
        CompareRow("/events/7/payload/old", "removed", Side(True, "{\n  \"k\": 1\n}"), Side(False)),
    ]),
    CompareSection("step", "/steps/3", "", []),
    CompareSection("seal", "/seal", "ßeal", [
        CompareRow("/", "changed", Side(True, "x" * 30 + "…", truncated=True), Side(True, "")),
    ]),
]  # fmt: skip


@pytest.mark.parametrize("names", [("a.trace.json", "b.trace.json"), ("<a>&.json", '"b".json')])
def test_the_sections_are_the_markup_the_template_loop_wrote(names):
    before, after = names
    context = {
        "sections": SECTIONS,
        "trace": {"filename": before},
        "other": {"filename": after},
    }
    expected = Template(SECTIONS_LOOP).render(Context(context))

    written = compare_sections_html(SECTIONS, before=before, after=after)
    assert written == expected
    assert (
        "<h3>Event 7 &lt;tool.call&gt; &amp; &quot;x&quot; <code>/events/7</code></h3>" in written
    )
    assert "<td>added</td><td>—</td><td>" in written
    assert 'id="compare-4"' in written


def test_no_sections_write_nothing():
    assert compare_sections_html([], before="a", after="b") == ""
