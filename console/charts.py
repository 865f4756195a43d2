"""Inline SVG drawn on the server: the events timeline of a trace and the verdicts chart.

Functions here compute geometry only; the templates draw it (so every label is escaped and
no style attribute is needed: classes come from the stylesheet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TIMELINE_WIDTH = 1000
TIMELINE_MAX_POINTS = 120


@dataclass
class Point:
    x: float
    seq: int
    type: str
    state: str  # "ok" | "bad" | "after"
    label: bool = False


@dataclass
class Timeline:
    width: int
    height: int
    points: list[Point]
    line_y: int
    break_x: float | None
    broke_at: int | None
    gaps: list[float] = field(default_factory=list)
    total: int = 0


def timeline(events: list[dict[str, Any]], *, total: int, broke_at: int | None) -> Timeline:
    """Events as dots on a line: verified ones green, the one that broke red, the rest grey.

    `events` is what the page could afford to read (see console.selectors.trace_outline): a
    prefix and a window around the break; a gap in seqs is drawn as a break in the line.
    """
    shown = events[:TIMELINE_MAX_POINTS]
    margin = 30
    step = (TIMELINE_WIDTH - 2 * margin) / max(1, len(shown) - 1)
    points: list[Point] = []
    gaps: list[float] = []
    break_x = None
    previous_seq = None
    every = max(1, len(shown) // 12)
    for index, event in enumerate(shown):
        seq = int(event["seq"])
        x = margin + index * step if len(shown) > 1 else TIMELINE_WIDTH / 2
        if previous_seq is not None and seq != previous_seq + 1:
            gaps.append(x - step / 2)
        previous_seq = seq
        if broke_at is None or seq < broke_at:
            state = "ok"
        elif seq == broke_at:
            state = "bad"
            break_x = x
        else:
            state = "after"
        points.append(Point(x, seq, str(event.get("type", "")), state, index % every == 0))
    return Timeline(
        width=TIMELINE_WIDTH,
        height=90,
        points=points,
        line_y=40,
        break_x=break_x,
        broke_at=broke_at,
        gaps=gaps,
        total=total,
    )


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
