"""The ledger events that concern stored traces.

One definition of "an event concerns a trace", used by retention (a trace an event names never
expires: ``governance.retention``) and by evidence bundles (the events a bundle carries:
``dsr.evidence``, which adds the keys and proofs that verify them offline): the event's
payload names, under one of :data:`REFERENCE_KEYS`, the trace's id, its stored file's sha256
(bare or ``sha256:``-prefixed), one of its runs or one of its snapshots. An event type that
concerns a trace names it under one of these keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Final

from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import Expression

from core.ledger import chain
from governance.models import REFERENCE_KEYS, GovernanceEvent, PayloadText
from replay.models import ReplayRun, Trace

__all__ = [
    "CHUNK",
    "REFERENCE_KEYS",
    "events_matching",
    "events_naming",
    "matching_query",
    "trace_names",
]

CHUNK: Final = 500
#: names looked up per query (one array parameter, the same under each of the six keys)
NAMES_PER_QUERY: Final = 5000
_SEQ = chain.FIELDS.index("seq")


def trace_names(traces: Sequence[Trace]) -> dict[str, set[int]]:
    """Every string an event could name each trace by -> the pks of the traces it names."""
    names: dict[str, set[int]] = {}
    for trace in traces:
        sha = trace.blob.sha256
        for name in (trace.trace_id, sha, f"sha256:{sha}"):
            names.setdefault(name, set()).add(trace.pk)
        for ref in trace.required_snapshot_ids or []:
            if isinstance(ref, dict) and ref.get("snapshot_id"):
                names.setdefault(str(ref["snapshot_id"]), set()).add(trace.pk)
    runs = ReplayRun.objects.filter(trace__in=[t.pk for t in traces])
    for run_id, trace_pk in runs.values_list("id", "trace_id"):
        names.setdefault(str(run_id), set()).add(trace_pk)
    return names


def events_naming(
    traces: Sequence[Trace], *, after_seq: int = 0
) -> Iterator[tuple[tuple[Any, ...], set[int]]]:
    """Each event after ``after_seq`` that names one of ``traces`` (a row in ``chain.FIELDS``
    order), with the pks of the traces it names, in seq order.

    The names of the traces are looked up in the ledger through the expression index on each
    of :data:`REFERENCE_KEYS` (migration 0012), :data:`NAMES_PER_QUERY` names at a time, so
    the cost is the traces' and the matching events', never the ledger's length; then the
    full rows of the events that matched.
    """
    if not traces:
        return
    names: dict[str, set[int]] = {}
    for start in range(0, len(traces), CHUNK):
        for name, pks in trace_names(traces[start : start + CHUNK]).items():
            names.setdefault(name, set()).update(pks)
    matched: dict[int, set[int]] = {}
    for seq, refs in events_matching(sorted(names), after_seq=after_seq):
        for ref in refs:
            if ref is not None and ref in names:
                matched.setdefault(seq, set()).update(names[ref])
    seqs = sorted(matched)
    for start in range(0, len(seqs), CHUNK):
        rows = (
            GovernanceEvent.objects.filter(seq__in=seqs[start : start + CHUNK])
            .order_by("seq")
            .values_list(*chain.FIELDS)
        )
        for row in rows:
            yield row, matched[row[_SEQ]]


def events_matching(
    names: Sequence[str], *, after_seq: int = 0
) -> Iterator[tuple[int, tuple[str | None, ...]]]:
    """Each event after ``after_seq`` whose payload holds one of ``names`` under one of
    :data:`REFERENCE_KEYS`, as its seq and its values of those keys (in that order); an event
    comes once per key and batch of names it matches. Each key's condition is the
    expression its index is built on (``payload ->> 'key'``), so the database answers from
    the six indexes."""
    for start in range(0, len(names), NAMES_PER_QUERY):
        rows = matching_query(names[start : start + NAMES_PER_QUERY], after_seq=after_seq)
        for seq, *refs in rows:
            yield seq, tuple(refs)


class _AnyOf(Expression):
    """``expression`` is one of ``values``, the values bound as one parameter (an array on
    PostgreSQL, a JSON array read by ``json_each`` on SQLite): the planner sees the
    expression itself, so its index serves the lookup, and the SQL stays the same size
    whatever the number of values (Django's IN writes one placeholder per value)."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, expression: Any, values: Sequence[str]) -> None:
        super().__init__()
        self.expression = expression
        self.values = list(values)

    def get_source_expressions(self) -> list[Any]:
        return [self.expression]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        (self.expression,) = exprs

    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        sql, params = compiler.compile(self.expression)
        if connection.vendor == "postgresql":
            return f"{sql} = ANY(%s)", (*params, self.values)
        sqlite = f"{sql} IN (SELECT value FROM json_each(%s))"  # noqa: S608 - compiled SQL
        return sqlite, (*params, json.dumps(self.values))


def matching_query(names: Sequence[str], *, after_seq: int = 0) -> QuerySet[Any, Any]:
    """The query of :func:`events_matching` for one batch of names: one SELECT per key, on
    that key's index expression, joined by UNION ALL (an event named under two keys comes
    twice), so the planner plans each key's lookup on its own index (one OR of the six
    conditions is planned as one scan of the whole table on PostgreSQL)."""
    columns = {f"ref_{i}": PayloadText(key) for i, key in enumerate(REFERENCE_KEYS)}
    rows = GovernanceEvent.objects.annotate(**columns).order_by()
    if after_seq:
        rows = rows.filter(seq__gt=after_seq)
    first, *rest = [
        rows.filter(_AnyOf(column, names)).values_list("seq", *columns)
        for column in columns.values()
    ]
    return first.union(*rest, all=True)
