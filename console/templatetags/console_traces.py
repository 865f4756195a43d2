"""A stored trace's words in the templates, the same as in the rows written in Python
(console.tables): its replayability badge and its counts."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from console.tables import contents_words, replayable_badge
from core.formats import formats
from replay.models import Trace

register = template.Library()


@register.filter
def replayable(trace: Trace) -> SafeString:
    """``{{ trace|replayable }}``: the badge (a tampered file is "not intact", never
    "replayable"); ``trace.replayable`` set by ``traces_mark_replayable``."""
    return replayable_badge(trace)


@register.filter
def contents(trace: Trace) -> str:
    """``{{ trace|contents }}``: "12 events, 3 steps", each count only when there is one; ""
    for a format whose files have neither (AHD, a MACE log as MACE's writer persists it)."""
    words = getattr(formats().get(trace.format), "counts", ("event", "step"))
    return contents_words(trace.event_count, trace.step_count, words)
