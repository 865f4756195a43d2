"""The ContextOS reader's value bound, in characters of text, for every width of character
(issue 20, item 7): one tool envelope, and the top-level values but ``tool_envelopes``
together, at most ``MAX_VALUE_CHARS`` (8 Mi) characters, so that the widest (4 bytes a
character in CPython) costs one upload under 256 MiB (measured through gunicorn in
tests/console/test_hostile_gunicorn.py). The bound is exact: one character past it is
refused, whichever chunk the value ends in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.errors import ReplayError
from core.formats.contextos import reader

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_bombs

BOUND = reader.MAX_VALUE_CHARS


def test_the_bound_is_8_mi_characters():
    assert BOUND == 8 * 1024**2 == bench_bombs.value_bound()


@pytest.mark.parametrize("width", list(bench_bombs.WIDE_TEXT))
def test_a_value_at_the_bound_is_read_and_one_past_it_refused(width):
    unit = bench_bombs.WIDE_TEXT[width]
    fits = (BOUND - 4096) // len(unit)  # 4 KiB: the rest of the envelope's text
    trace = reader.loads(bench_bombs.contextos_long_value(unit, fits), "fits.trace.json")
    assert len(trace.envelopes) == 2
    with pytest.raises(ReplayError) as refused:
        reader.loads(bench_bombs.contextos_long_value(unit, BOUND // len(unit) + 1), "w.json")
    assert refused.value.code == "MALFORMED_TRACE"
    assert refused.value.message == "w.json: tool_envelopes[0] is longer than 8388608 characters"


def test_the_head_values_are_bounded_together():
    half = "\U0001f600" * (BOUND // 2 + 1)
    data = bench_bombs.contextos_long_value("\U0001f600", BOUND // 2, head=True)
    data = data.replace(b'"invoke":', b'"extra":"' + half.encode() + b'","invoke":', 1)
    with pytest.raises(ReplayError) as refused:
        reader.loads(data, "h.json")
    assert refused.value.message == (
        "h.json: the top-level values but tool_envelopes are longer than 8388608 characters "
        "together (at invoke)"
    )


def test_a_head_just_under_the_bound_is_read():
    data = bench_bombs.contextos_long_value("\U0001f600", BOUND - 4096, head=True)
    trace = reader.loads(data, "h.json")
    assert len(trace.head["invoke"]["request"]["note"]) == BOUND - 4096
