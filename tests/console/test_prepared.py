"""`replay.prepared.Prepared`: a query shape compiled once gives what its QuerySet gives,
row for row and field for field (instances, the objects select_related caches, values_list
tuples), in one query; shapes whose SQL depends on the values are refused at their first
call. Run on SQLite and on PostgreSQL (.ci/run)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.roles import TRACE_BY_SHA256
from console.selectors import opened
from console.selectors.detail import COPIES, SAME_JOB
from core.ledger import codes
from governance import ledger
from governance import selectors as gov
from privacy import ingest as privacy_ingest
from replay import selectors as replay_selectors
from replay.models import Trace
from replay.prepared import Prepared

pytestmark = pytest.mark.django_db


def fields(obj: Any, depth: int = 2) -> dict[str, Any]:
    """An instance's loaded fields and the related objects select_related cached (two levels:
    a reverse one-to-one caches its way back)."""
    out = {k: v for k, v in vars(obj).items() if k != "_state"}
    if depth:
        cached = obj._state.fields_cache
        out |= {f"rel:{k}": fields(v, depth - 1) for k, v in cached.items() if v is not None}
    return out


def same(prepared: Prepared[Any], **values: Any) -> list[Any]:
    """The prepared call's rows, asserted equal to its QuerySet's, one query each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    expected = list(prepared.queryset(**values))
    with CaptureQueriesContext(connection) as queries:
        got = prepared(**values)
    assert len(queries) == 1
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        if hasattr(a, "_state"):
            assert type(a) is type(b)
            assert fields(a) == fields(b)
            assert a._state.db == b._state.db
            assert a._state.adding is b._state.adding is False
        else:
            assert a == b
            assert type(a) is type(b)
    return got


def test_the_trace_page_shapes_give_what_their_querysets_give(ingest, replayed):
    run = replayed("diverged")
    trace = run.trace
    other = ingest("ok")
    same_trace_id = Trace.objects.filter(trace_id=other.trace_id).exclude(pk=other.pk)
    rows = same(TRACE_BY_SHA256, sha256=trace.blob.sha256)
    assert [t.pk for t in rows] == [trace.pk]
    assert rows[0].blob.sha256 == trace.blob.sha256  # cached by select_related, no query
    assert same(TRACE_BY_SHA256, sha256="0" * 64) == []
    same(COPIES, trace_id=other.trace_id, pk=other.pk)
    assert len(same(COPIES, trace_id=other.trace_id, pk=-1)) == same_trace_id.count() + 1
    same(SAME_JOB, format=trace.format, job_id=trace.job_id, pk=-1)
    runs = same(replay_selectors._RUNS_OF_TRACE, pk=trace.pk)
    assert [r.pk for r in runs] == [run.pk]
    assert replay_selectors.runs_for_trace(trace)[0].trace is trace  # as trace.runs gives it
    opened.trace_index(trace)
    assert same(opened._INDEX_STAMP, blob_id=trace.blob_id)
    # the personal values a file is reassembled from, and its sealed-blob row
    assert same(privacy_ingest._SEALED, sha256=other.blob.sha256)
    assert same(privacy_ingest._VALUES, sha256=other.blob.sha256)
    assert same(privacy_ingest._VALUES, sha256="f" * 64) == []


def test_the_active_halts_shape_gives_the_halts_and_leaves_out_the_cleared(ingest):
    trace = ingest("ok")
    for target in (trace.trace_id, "another-trace-id"):
        ledger.append(
            event_type=codes.FORCE_HALT_REPLAY,
            payload={
                "target_kind": "trace",
                "target_id": target,
                "reason": "a halt",
                "cause_seq": 1,
                "cause_type": codes.INTEGRITY_FAILURE,
            },
        )
    halts = same(gov._HALTS_ACTIVE)
    assert [h.target_id for h in halts] == [trace.trace_id, "another-trace-id"]
    ledger.append(
        event_type=codes.FORCE_HALT_CLEAR, payload={"halt_seq": halts[0].seq, "reason": "fixed"}
    )
    assert [h.target_id for h in same(gov._HALTS_ACTIVE)] == ["another-trace-id"]
    assert gov.halts_on_trace(trace=trace) == {}


def test_a_prepared_call_takes_its_declared_arguments_only():
    with pytest.raises(TypeError, match=r"expected the arguments \['sha256'\]"):
        TRACE_BY_SHA256(sha=1)
    with pytest.raises(TypeError, match="sha256: expected str"):
        TRACE_BY_SHA256(sha256=5)
    with pytest.raises(ImproperlyConfigured, match="a prepared argument is str or int"):
        Prepared(lambda when: Trace.objects.filter(created_at=when), when=float)


@pytest.mark.parametrize(
    ("build", "arguments", "message"),
    [
        (
            lambda name: Trace.objects.filter(filename__contains=name),
            {"name": str},
            "name: the argument does not reach the SQL as a parameter of its own",
        ),
        (
            lambda year: Trace.objects.filter(created_at__year=year),
            {"year": int},
            "this shape cannot be prepared: the ORM reads its values",
        ),
        (
            lambda name: (
                Trace.objects.filter(filename=name)
                | Trace.objects.filter(filename__startswith=name)
            ),
            {"name": str},
            "an argument reaches the SQL rewritten",
        ),
        (
            lambda pk: Trace.objects.filter(pk=pk).values("pk"),
            {"pk": int},
            "gives instances or values_list rows",
        ),
        (
            lambda pk: Trace.objects.filter(pk=pk).prefetch_related("runs"),
            {"pk": int},
            "cannot prefetch",
        ),
    ],
)
def test_shapes_the_values_change_are_refused(build, arguments, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        Prepared(build, **arguments)(**{k: "x" if v is str else 1 for k, v in arguments.items()})
