"""Inline SVG drawn on the server: the overview of a trace's events and the verdicts chart.

Functions here compute geometry only; the templates draw it (so every label is escaped and
no style attribute is needed: classes come from the stylesheet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def overview(
    buckets: list[dict[str, Any]], *, total: int, broke_at: int | None, height: int = 90
) -> Overview:
    """The whole trace as fixed buckets of consecutive events (``replay.traceindex``): one
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
    return Overview(width, height, base_y, bars, broke_at, total)


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


@dataclass
class Chart:
    width: int
    height: int
    base_y: int
    columns: list[Column]
    bar_width: float
    max_total: int
    statuses: tuple[str, ...]


CHART_STATUSES = ("ok", "diverged", "tamper_detected", "refused")


def verdict_chart(days: list[tuple[str, dict[str, int]]]) -> Chart:
    """Stacked bars, one per day: how many replays ended in each verdict."""
    width, height, base_y, top = 1000, 220, 190, 20
    max_total = max([sum(c.values()) for _, c in days] + [1])
    slot = (width - 60) / max(1, len(days))
    bar_width = max(4.0, slot * 0.7)
    columns = []
    for index, (label, counts) in enumerate(days):
        x = 40 + index * slot
        y = float(base_y)
        bars = []
        for status in CHART_STATUSES:
            count = counts.get(status, 0)
            if not count:
                continue
            h = (base_y - top) * count / max_total
            y -= h
            bars.append(Bar(x, y, h, status, count))
        columns.append(Column(label, x, bars, sum(counts.values())))
    return Chart(width, height, base_y, columns, bar_width, max_total, CHART_STATUSES)
