"""What the trace list knows of a sealed OpenTelemetry GenAI trace without opening it: its
services, models, operations, conversation ids, agent names and providers, and its counts
(spans, model calls, tool calls, tokens), computed from its record (:mod:`record`).

The console keeps them beside the stored trace (``otel.models.OtelTraceFacts``) and filters
the list by the first five (``?service=``, ``?model=``, ``?operation=``, ``?conversation=``,
``?agent=``). A value is what a filter can name: a string of at most :data:`MAX_VALUE`
characters (a longer one is kept as its first :data:`MAX_VALUE`), leading and trailing
spaces trimmed, with no control, format or line-separator character (:func:`problem`); a
value that is not one (a name holding a NUL or a newline) is left out of the facts, as it
could not be typed into a filter and PostgreSQL could not store some of them.

Pure: no Django.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.formats.otel import record as rec
from core.formats.otel.record import Record

#: the longest value kept (the list's filters take no longer one)
MAX_VALUE = 255
#: characters a filterable value never holds: controls (NUL, tab, newline, DEL ...), format
#: characters (zero-width spaces, bidirectional overrides), surrogates, line and paragraph
#: separators
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

SERVICE = "service"
MODEL = "model"
OPERATION = "operation"
CONVERSATION = "conversation"
AGENT = "agent"
#: what the list filters by (each a ``?name=`` of the list and of ``GET /api/traces/``)
KINDS = (SERVICE, MODEL, OPERATION, CONVERSATION, AGENT)
#: the span record fields each kind's values come from, in that order
KIND_FIELDS: Mapping[str, tuple[str, ...]] = {
    SERVICE: ("service",),
    MODEL: ("request_model", "response_model"),
    OPERATION: ("operation",),
    CONVERSATION: ("conversation_id",),
    AGENT: ("agent_name",),
}
#: every span field the facts read a value from (``provider`` is kept, not filtered by)
FACT_FIELDS = frozenset({*(f for fields in KIND_FIELDS.values() for f in fields), "provider"})


@dataclass(frozen=True)
class Facts:
    """One trace's facts. Each tuple holds distinct values in the order their spans come in
    the record (start time, then span id), so the root's service comes first."""

    services: tuple[str, ...]
    models: tuple[str, ...]
    operations: tuple[str, ...]
    conversations: tuple[str, ...]
    agents: tuple[str, ...]
    providers: tuple[str, ...]
    span_count: int
    model_call_count: int
    tool_call_count: int
    #: summed over the model calls that record them (an agent span's usage repeats its
    #: calls': it is not added again); None when no model call records them
    input_tokens: int | None
    output_tokens: int | None

    def values(self) -> Iterator[tuple[str, str]]:
        """(kind, value) for each value the list filters by."""
        for kind, values in (
            (SERVICE, self.services),
            (MODEL, self.models),
            (OPERATION, self.operations),
            (CONVERSATION, self.conversations),
            (AGENT, self.agents),
        ):
            for value in values:
                yield kind, value


def problem(value: str) -> str | None:
    """Why ``value`` cannot be a filter's value (too long, or a character a name never
    holds: :func:`invisible`), None when it can."""
    if len(value) > MAX_VALUE:
        return f"at most {MAX_VALUE} characters (it has {len(value)})"
    return invisible(value)


def invisible(value: str) -> str | None:
    """The first control or invisible character of ``value``, in words; None without one."""
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            return (
                f"a value holds no control or invisible character "
                f"(it holds U+{ord(ch):04X} at {i + 1})"
            )
    return None


def fact_value(value: Any) -> str | None:
    """A span field's value as a fact: a string trimmed and cut to :data:`MAX_VALUE`
    characters, None when it is not a string, empty, or not filterable (:func:`problem`)."""
    if not isinstance(value, str):
        return None
    value = value.strip()[:MAX_VALUE].strip()
    if not value or problem(value) is not None:
        return None
    return value


def _distinct(values: Iterable[Any]) -> tuple[str, ...]:
    kept = (fact_value(v) for v in values)
    return tuple(dict.fromkeys(v for v in kept if v is not None))


def _tokens(spans: Iterable[Mapping[str, Any]], name: str) -> int | None:
    found = [
        span["usage"][name]
        for span in spans
        if isinstance(span.get("usage"), Mapping) and isinstance(span["usage"].get(name), int)
    ]
    return sum(found) if found else None


def facts_of(record: Record, *, withheld: Collection[str] = ()) -> Facts:
    """The facts of a parsed (or just sealed) record. ``withheld``: span fields whose values
    are left out (the privacy rules name them personal: :func:`withheld_by`)."""
    spans = record.spans

    def values(*fields: str) -> tuple[str, ...]:
        wanted = [f for f in fields if f not in withheld]
        return _distinct(span.get(f) for span in spans for f in wanted)

    calls = [s for s in spans if rec.is_model_call(s)]
    return Facts(
        services=values(*KIND_FIELDS[SERVICE]),
        models=values(*KIND_FIELDS[MODEL]),
        operations=values(*KIND_FIELDS[OPERATION]),
        conversations=values(*KIND_FIELDS[CONVERSATION]),
        agents=values(*KIND_FIELDS[AGENT]),
        providers=values("provider"),
        span_count=len(spans),
        model_call_count=len(calls),
        tool_call_count=sum(1 for s in spans if rec.is_tool_call(s)),
        input_tokens=_tokens(calls, "input_tokens"),
        output_tokens=_tokens(calls, "output_tokens"),
    )


def _pointer_tokens(pointer: str) -> tuple[str, ...] | None:
    if not pointer.startswith("/"):
        return None
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def withheld_by(pointers: Iterable[str]) -> frozenset[str]:
    """The span fields of :data:`FACT_FIELDS` that privacy path rules (JSON pointers over
    the record, ``*`` for any key or index) name personal: ``/spans/*/conversation_id``
    withholds ``conversation_id``; ``/spans`` or ``/spans/*`` (everything in a span) and
    ``/spans/*/*`` withhold them all. A rule naming one span (``/spans/3/agent_name``)
    withholds the field in every span: the facts are the trace's, not a span's."""
    withheld: set[str] = set()
    for pointer in pointers:
        tokens = _pointer_tokens(pointer)
        if not tokens or tokens[0] not in ("spans", "*"):
            continue
        if len(tokens) > 1 and not (tokens[1] == "*" or tokens[1].isdigit()):
            continue  # not a span: /spans is an array
        if len(tokens) < 3 or tokens[2] == "*":
            if len(tokens) <= 3:
                withheld |= FACT_FIELDS
            continue
        if len(tokens) == 3 and tokens[2] in FACT_FIELDS:
            withheld.add(tokens[2])
    return frozenset(withheld)
