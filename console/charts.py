"""Inline SVG drawn on the server: the overview of a trace's events and the verdicts chart.

Functions here compute geometry only; the templates draw it (so every label is escaped and
no style attribute is needed: classes come from the stylesheet). One exception: the overview's
bars (up to ``traceindex.BUCKETS``, each with a title of its event types) are written by
:meth:`Overview.bars_html` (event types escaped as the template escaped them): as a template
loop they were most of a large trace's page time (thousands of variable lookups a request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from django.utils.safestring import SafeString, mark_safe

TIMELINE_WIDTH = 1000


@dataclass
class Bucket:
    x: float
    y: float
    width: float
    height: float
    first: int
    last: int
    count: int
    state: str  # "ok" | "bad" (the chain broke in it) | "after"
    types: list[tuple[str, int]]


@dataclass
class Overview:
    width: int
    height: int
    base_y: int
    buckets: list[Bucket]
    broke_at: int | None
    total: int
    #: the buckets are of records by position (``core.replay.recordview``: every format but
    #: the native one): a bar links to ``?at=`` and names positions, not seqs
    records: bool = False

    def bars_html(self) -> SafeString:
        """Every bucket's bar: a link to its first events around a rect titled with its seqs
        and event types (the markup the trace page's template loop used to write)."""
        return mark_safe("\n".join(self._bar_html(b) for b in self.buckets))  # noqa: S308

    def _bar_html(self, b: Bucket) -> str:
        # numbers and the state (one of three words) need no escaping; event types do
        if self.records:
            seqs = f"record {b.first}"
            if b.first != b.last:
                seqs += f"–{b.last} ({b.count} records)"
            return (
                f'<a href="?at={b.first}#records" class="bucket"><rect class="ev-ok" '
                f'x="{b.x}" y="{b.y}" width="{b.width}" height="{b.height}"><title>{seqs}: '
                f"{', '.join(f'{escape(t)} {n}' for t, n in b.types)}</title></rect></a>"
            )
        seqs = f"seq {b.first}"
        if b.first != b.last:
            seqs += f"–{b.last} ({b.count} events)"
        types = ", ".join(f"{escape(t)} {n}" for t, n in b.types)
        if b.state == "bad":
            why = f" — the chain broke at seq {self.broke_at}"
        elif b.state == "after":
            why = " — not verifiable after the break"
        else:
            why = ""
        return (
            f'<a href="?seq={b.first}#events" class="bucket"><rect class="ev-{escape(b.state)}" '
            f'x="{b.x}" y="{b.y}" width="{b.width}" height="{b.height}"><title>{seqs}: '
            f"{types}{why}</title></rect></a>"
        )


def overview(
    buckets: list[dict[str, Any]],
    *,
    total: int,
    broke_at: int | None,
    height: int = 90,
    records: bool = False,
) -> Overview:
    """The whole trace as fixed buckets of consecutive events (``core.replay.traceindex``): one
    bar each, as tall as its share of events, red where the chain broke, grey after it."""
    width, base_y, top = TIMELINE_WIDTH, height - 10, 10
    slot = width / max(1, len(buckets))
    most = max([int(b.get("count", 0)) for b in buckets] + [1])
    bars = []
    for index, bucket in enumerate(buckets):
        first, last, count = int(bucket["first"]), int(bucket["last"]), int(bucket["count"])
        if broke_at is None or last < broke_at:
            state = "ok"
        elif first <= broke_at <= last:
            state = "bad"
        else:
            state = "after"
        h = max(4.0, (base_y - top) * count / most)
        bars.append(
            Bucket(
                x=index * slot,
                y=base_y - h,
                width=max(1.0, slot - (1 if slot > 3 else 0)),
                height=h,
                first=first,
                last=last,
                count=count,
                state=state,
                types=sorted(bucket.get("types", {}).items(), key=lambda kv: (-kv[1], kv[0])),
            )
        )
    return Overview(width, height, base_y, bars, broke_at, total, records)


@dataclass
class Bar:
    x: float
    y: float
    height: float
    status: str
    count: int


@dataclass
class Column:
    label: str
    x: float
    bars: list[Bar]
    total: int
    center: float = 0.0
    top: float = 0.0  # the y of the stack's top, where its count is written
    tick: str = ""  # the day written under the axis ("" for most days, "today" for the last)


@dataclass
class Tick:
    value: int
    y: float


@dataclass
class Chart:
    width: int
    height: int
    base_y: int
    columns: list[Column]
    bar_width: float
    max_total: int
    statuses: tuple[str, ...]
    left: int = 60
    top: int = 20
    right: int = 990
    ticks: list[Tick] = field(default_factory=list)
    legend: list[tuple[str, str, int]] = field(default_factory=list)  # (status, label, total)


CHART_STATUSES = ("ok", "diverged", "tamper_detected", "refused")
#: a day label every this many columns, counted back from today
DAY_LABEL_EVERY = 5


def nice_step(largest: int, *, most: int = 5) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50 ... that needs at most `most` steps to `largest`."""
    magnitude = 1
    while True:
        for base in (1, 2, 5):
            step = base * magnitude
            if step * most >= largest:
                return step
        magnitude *= 10


def verdict_chart(days: list[tuple[str, dict[str, int]]]) -> Chart:
    """Stacked bars, one per day: how many replays ended in each verdict, on a counted y axis
    (0 to a round number), each day's total written over its bar, a day label every few days
    and "today" under the last; the legend carries each verdict's total."""
    width, height, base_y, top, left, right = 1000, 230, 190, 20, 60, 990
    largest = max([sum(c.values()) for _, c in days] + [1])
    step = nice_step(largest)
    scale_top = step * -(-largest // step)
    slot = (right - left - 10) / max(1, len(days))
    bar_width = max(4.0, slot * 0.7)
    columns = []
    for index, (label, counts) in enumerate(days):
        x = left + 10 + index * slot
        y = float(base_y)
        bars = []
        for status in CHART_STATUSES:
            count = counts.get(status, 0)
            if not count:
                continue
            h = (base_y - top) * count / scale_top
            y -= h
            bars.append(Bar(round(x, 2), round(y, 2), round(h, 2), status, count))
        last = index == len(days) - 1
        from_end = len(days) - 1 - index
        tick = "today" if last else (label if from_end % DAY_LABEL_EVERY == 0 else "")
        columns.append(
            Column(
                label,
                round(x, 2),
                bars,
                sum(counts.values()),
                center=round(x + bar_width / 2, 2),
                top=round(y - 4, 2),
                tick=tick,
            )
        )
    ticks = [
        Tick(value, round(base_y - (base_y - top) * value / scale_top, 2))
        for value in range(0, scale_top + 1, step)
    ]
    legend = [
        (status, status.replace("_", " "), sum(c.get(status, 0) for _, c in days))
        for status in CHART_STATUSES
    ]
    return Chart(
        width,
        height,
        base_y,
        columns,
        round(bar_width, 2),
        scale_top,
        CHART_STATUSES,
        left=left,
        top=top,
        right=right,
        ticks=ticks,
        legend=legend,
    )
