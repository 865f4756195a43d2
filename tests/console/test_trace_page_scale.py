"""The trace page of a large trace stays cheap: its overview's bars are written in Python (the
exact markup the template loop wrote) and the trace's index is read once per request."""

from __future__ import annotations

import re

from django.template import Context, Template

from console import charts

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
