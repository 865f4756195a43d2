"""``otlp.validate``, the request path's check of a body, against ``otlp.decode``, the
reader's: for every body the same refusal (code and words) or the same spans accepted, the
same rejections and the same trace ids, with no span dict built for a protobuf body."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from opentelemetry.proto.common.v1 import common_pb2 as c
from opentelemetry.proto.trace.v1 import trace_pb2 as t

from core.formats.otel import otlp
from core.formats.otel.otlp import Limits, OtlpError
from tests.otel.test_otlp import SEEDS, mutated, rich_request
from tests.otel.test_receiver_refusals import CASES, LIMITS, body

FIXTURES = Path(__file__).parent / "fixtures"
PB, JS = otlp.PROTOBUF, otlp.JSON
SMALL = Limits(max_string_bytes=64, max_values=50, max_depth=2, max_attributes=3)


def by_decode(data: bytes, content_type: str, limits: Limits) -> tuple[Any, ...]:
    try:
        out = otlp.decode(data, content_type, limits=limits)
    except OtlpError as error:
        return (error.code, error.message)
    return ("ok", len(out.spans), out.rejected, sorted({s["trace_id"] for s in out.spans}))


def by_validate(data: bytes, content_type: str, limits: Limits) -> tuple[Any, ...]:
    try:
        out = otlp.validate(data, content_type, limits=limits)
    except OtlpError as error:
        return (error.code, error.message)
    return ("ok", out.spans, out.rejected, out.trace_ids)


def same(data: bytes, content_type: str = PB, limits: Limits = otlp.DEFAULT_LIMITS) -> tuple:
    expected = by_decode(data, content_type, limits)
    assert by_validate(data, content_type, limits) == expected
    return expected


@pytest.mark.parametrize(
    "name", sorted(p.name for p in FIXTURES.iterdir() if p.suffix == ".bin" or "json-" in p.name)
)
def test_it_reads_the_captured_bodies_as_decode_does(name):
    content_type = PB if name.endswith(".bin") else JS
    assert same((FIXTURES / name).read_bytes(), content_type)[0] == "ok"


@pytest.mark.parametrize("regime", sorted(LIMITS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_it_refuses_and_rejects_as_decode_does(case, regime):
    same(CASES[case](), PB, LIMITS[regime])


def test_it_checks_a_rich_request_under_many_limits():
    data = rich_request().SerializeToString()
    for limits in (
        otlp.DEFAULT_LIMITS,
        SMALL,
        Limits(max_depth=0),
        Limits(max_depth=1),
        Limits(max_depth=2),
        Limits(max_attributes=0),
        Limits(max_events=1),
        Limits(max_links=0),
        Limits(max_spans=1),
        Limits(max_body_bytes=10),
        Limits(max_string_bytes=3),
    ):
        same(data, PB, limits)


def test_it_refuses_what_decode_refuses_before_reading():
    assert same(b"", "text/plain")[0] == otlp.UNSUPPORTED_MEDIA_TYPE
    assert same(b"x" * 101, PB, Limits(max_body_bytes=100))[0] == otlp.BODY_TOO_LARGE
    assert same(b'{"resourceSpans": 5}', JS)[0] == otlp.WRONG_TYPE


def test_it_builds_no_span_dict_for_a_protobuf_body(monkeypatch):
    def built(*args: Any) -> None:
        raise AssertionError("a dict was built")

    for name in ("_pb_span", "_pb_attributes", "_pb_value", "_finish_span"):
        monkeypatch.setattr(otlp, name, built)
    checked = otlp.validate(rich_request().SerializeToString(), PB)
    assert (checked.spans, checked.rejected) == (4, [])


def test_a_wide_body_costs_its_checks_no_python_objects():
    wide = [c.KeyValue(key=f"k{i}", value=c.AnyValue(int_value=i)) for i in range(10_000)]
    data = body(
        *(t.Span(trace_id=b"\x01" * 16, span_id=bytes([n]) * 8, attributes=wide) for n in (1, 2))
    )
    tracemalloc.start()
    try:
        otlp.validate(data, PB)
        _, validated = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        otlp.decode(data, PB)
        _, decoded = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert validated < 256 * 1024  # the protobuf runtime's own memory is not Python's
    assert decoded > 20 * validated


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_it_answers_mutated_bodies_as_decode_does(case):
    data, content_type = case
    same(data, content_type)
    same(data, content_type, SMALL)


def test_the_seeds_of_the_fuzz_are_read_alike():
    for data, content_type in SEEDS:
        same(data, content_type)
        same(data, content_type, SMALL)
