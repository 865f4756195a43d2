"""The operations page's "not replayable" rows are written in Python (console.tables), not by
a template loop whose ``truncatechars`` and ``{% url %}`` were most of the page's rendering
(issue 23): the markup is the loop's, byte for byte."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.template import Context, Template
from django.utils import translation

from console.tables import _truncatechars, not_replayable_rows_html

#: the loop the operations page's template used (kept to compare)
LOOP = """{% for t, missing in not_replayable %}
      <tr><td><a href="{% url 'trace-detail' t.blob.sha256 %}"><code>{{ t.trace_id|truncatechars:20 }}</code></a></td><td>{{ t.job_id }}</td>
        <td><ul>{% for m in missing %}<li><code>{{ m }}</code></li>{% endfor %}</ul></td></tr>
    {% empty %}
      <tr><td colspan="3" class="empty">Every stored trace is replayable.</td></tr>
    {% endfor %}"""  # noqa: E501

TRACE_IDS = [
    "0123456789abcdef0123456789abcdef",  # 32: cut
    "short",
    "a" * 20,  # exactly the length: kept
    "a" * 21,  # one more: cut
    "<b>&'\"" * 5,  # escaped after cutting
    "e\u0301" * 15,  # combining accents: NFC, and they do not count
    "日本語のトレースIDはとても長いのですよ本当に",
    "",
]


def _trace(n: int, trace_id: str, job_id: str | None) -> SimpleNamespace:
    return SimpleNamespace(
        trace_id=trace_id, job_id=job_id, blob=SimpleNamespace(sha256=f"{n:02x}" * 32)
    )


ROWS = [
    (_trace(n, tid, [None, "", "job <1>", "brief-7"][n % 4]), missing)
    for n, (tid, missing) in enumerate(
        zip(TRACE_IDS, [[], ["selfrep"], ["a", "<b>"], ["sha256:" + "f" * 64]] * 2, strict=True)
    )
]


@pytest.mark.parametrize("language", ["en-gb", "de"])
def test_the_rows_are_the_markup_the_template_loop_wrote(language):
    with translation.override(language):
        old = Template(LOOP).render(Context({"not_replayable": ROWS}))
        written = not_replayable_rows_html(ROWS)
    assert old == written
    assert "<code>0123456789abcdef012…</code>" in written
    assert f"<code>{'a' * 20}</code>" in written
    assert "&lt;b&gt;&amp;&#x27;&quot;" in written


@pytest.mark.parametrize("text", [*TRACE_IDS, 12345, None])
def test_truncating_is_truncatechars(text):
    expected = Template("{{ v|truncatechars:20 }}").render(Context({"v": text}, autoescape=False))
    assert _truncatechars(text, 20) == expected
