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
