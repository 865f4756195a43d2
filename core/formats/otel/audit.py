"""The audit of a sealed OpenTelemetry GenAI trace record: its checks, in order, the first
that fails naming the code (nothing is re-executed: verify and replay both run them).

1. ``format``: a record of schema version 1 (what did not parse never reaches here: the
   adapter's ``refused`` reports it, ``MALFORMED_TRACE`` or ``UNSUPPORTED_SCHEMA_VERSION``);
2. ``halts``: as every format (``common.halt_refusal``);
3. ``seal``: ``seal.digest`` recomputes over the record's JCS bytes without the seal, else
   ``INTEGRITY_FAILURE`` with both digests;
4. ``span_tree``: span ids unique, every parent present, no cycle, one root, every span
   ending after it starts and within its parent's time, else ``INTEGRITY_FAILURE`` with
   ``broke_at`` the span's index; a parent the trace does not hold is ``INCOMPLETE_TRACE``
   instead (an exporter lost it or the root never came: incomplete, not inconsistent);
5. ``messages_schema``: input and output messages and system instructions validate against
   the GenAI conventions' JSON schemas (``schemas/``), else ``MALFORMED_TRACE`` (a verdict
   on a well-formed record: the adapter stores it);
6. ``tool_round_trips``: every tool call a model asked for ran as an ``execute_tool`` span
   with that call id and the arguments asked for, and the next model call of the
   conversation received the tool's result unchanged, else ``REPLAY_DIVERGENCE``;
7. ``conversation``: each model call's input carries, in order, the input and output
   messages of the call before it in its conversation (the model calls of one conversation
   id, a span's own or its nearest ancestor's; else of the trace, in time order), and no
   tool response twice, else ``REPLAY_DIVERGENCE``;
8. ``usage``: ``total_tokens`` is ``input_tokens + output_tokens`` where all three are
   given, and an agent span's usage is the sum of its model calls', else
   ``REPLAY_DIVERGENCE``.

A record captured without message content (``content: "none"``) runs 1-4 and 8; checks 5-7
pass saying so (:data:`NO_CONTENT`). Each divergence's ``path`` is an RFC 6901 pointer into
the record; ``before`` is what the source of truth recorded (the model's tool call, the tool
span's result, the earlier call's message, the model calls' token counts), ``after`` what
the later span has.

JSON values (tool arguments, results, responses) are compared as JSON: a string that holds
a JSON object or array stands for that value, and two values are equal when their RFC 8785
bytes are (``1`` and ``1.0`` are one number).

Pure: no Django.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

from core import errors
from core.canonical import CanonicalError, jcs
from core.formats.common import halt_refusal, halts_clear
from core.formats.otel.record import (
    FORMAT,
    SCHEMA_VERSION,
    Record,
    is_agent,
    is_model_call,
    is_tool_call,
    nanos_iso,
)
from core.formats.protocol import VerifyContext
from core.replay.diff import MISSING, pointer_join, strict_equal
from core.replay.report import AUDIT, Check, Divergence, ReplayReport

CHECKS = (
    "format",
    "halts",
    "seal",
    "span_tree",
    "messages_schema",
    "tool_round_trips",
    "conversation",
    "usage",
)
NO_CONTENT = (
    "not checked: the trace was captured without message content (the instrumentations' default)"
)
SCHEMA_DIR = Path(__file__).with_name("schemas")
#: each message field of a span record and the conventions' schema it validates against
SCHEMAS = {
    "input_messages": "gen-ai-input-messages.json",
    "output_messages": "gen-ai-output-messages.json",
    "system_instructions": "gen-ai-system-instructions.json",
}
#: the longest value a check's message quotes
_QUOTE = 160


def audit(record: Record, *, mode: str = AUDIT, ctx: VerifyContext | None = None) -> ReplayReport:
    """Every check of the module docstring, in order; the first that fails names the code."""
    ctx = ctx if ctx is not None else VerifyContext(mode=mode)
    refusal = halt_refusal(FORMAT, record.trace_id, ctx)
    if refusal is not None:
        return refusal
    report = ReplayReport(trace_id=record.trace_id, format=FORMAT, mode=mode)
    view = _View(record)
    report.stats = {
        "spans": len(record.spans),
        "model_calls": len(view.model_calls),
        "tool_calls": len(view.tool_spans),
    }
    doc = record.document
    previous = f", after {doc['previous']}" if doc["previous"] else ""
    report.checks.append(
        Check(
            "format",
            True,
            f"an OpenTelemetry GenAI trace record (otel_genai {SCHEMA_VERSION}) of trace "
            f"{record.trace_id}: version {doc['version']}{previous}, {len(record.spans)} "
            f"span{_s(len(record.spans))}, content {record.content}",
        )
    )
    for step in (_seal, _span_tree, _messages_schema, _tool_round_trips, _conversation, _usage):
        if not step(view, report):
            break
    return halts_clear(report, ctx)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _quote(value: Any) -> str:
    """A JSON value for a message, cut short."""
    if value is MISSING:
        return "(absent)"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _QUOTE else f"{text[: _QUOTE - 3]}..."


class _View:
    """A record with what the checks look up: model-call and tool spans, conversations."""

    def __init__(self, record: Record) -> None:
        self.record = record
        self.spans = record.spans
        self.model_calls = [i for i, s in enumerate(self.spans) if is_model_call(s)]
        self.tool_spans = [i for i, s in enumerate(self.spans) if is_tool_call(s)]
        #: model calls by conversation (:meth:`conversation_of`; None: the trace), time order
        self.conversations: dict[str | None, list[int]] = {}
        for i in self.model_calls:
            self.conversations.setdefault(self.conversation_of(i), []).append(i)
        self.next_call: dict[int, int] = {}
        self.previous_call: dict[int, int] = {}
        for calls in self.conversations.values():
            for a, b in pairwise(calls):
                self.next_call[a] = b
                self.previous_call[b] = a

    def conversation_of(self, i: int) -> str | None:
        """The conversation id of span ``i``, or else of its nearest ancestor that has one
        (an agent span often carries it, its model calls not), or None."""
        seen: set[int] = set()
        at: int | None = i
        while at is not None and at not in seen:
            seen.add(at)
            span = self.spans[at]
            if span["conversation_id"] is not None:
                return span["conversation_id"]
            parent = span["parent_span_id"]
            at = self.record.index_of(parent) if parent is not None else None
        return None

    def named(self, i: int) -> str:
        """A span in words: its pointer and name."""
        return f"/spans/{i} ({self.spans[i]['name']!r})"

    def fail(
        self,
        report: ReplayReport,
        check: str,
        code: str,
        message: str,
        *,
        broke_at: int | None = None,
        divergence: Divergence | None = None,
        **where: Any,
    ) -> bool:
        report.checks.append(Check(check, False, message))
        if divergence is not None:
            report.divergences.append(divergence)
        report.fail(code, message, broke_at=broke_at, **where)
        return False

    def diverged(
        self,
        report: ReplayReport,
        check: str,
        message: str,
        *,
        span: int,
        path: str,
        before: Any,
        after: Any,
    ) -> bool:
        """Fail ``check`` with REPLAY_DIVERGENCE at ``path`` in span ``span``."""
        divergence = Divergence(span, self.spans[span]["span_id"], path, before, after)
        return self.fail(
            report, check, errors.REPLAY_DIVERGENCE, message, broke_at=span, divergence=divergence
        )


# --- 3. seal ---------------------------------------------------------------------------------


def _seal(view: _View, report: ReplayReport) -> bool:
    record = view.record
    recorded = record.seal["digest"]
    if recorded != record.digest:
        message = (
            f"the record does not hash to its seal: seal.digest is {recorded}, the record's "
            f"JCS bytes without the seal hash to {record.digest}; the record was changed after "
            "it was sealed"
        )
        return view.fail(
            report,
            "seal",
            errors.INTEGRITY_FAILURE,
            message,
            expected=recorded,
            observed=record.digest,
        )
    seal = record.seal
    report.checks.append(
        Check(
            "seal",
            True,
            f"seal.digest {recorded} recomputes over the record's JCS bytes (RFC 8785), the "
            f"seal left out; sealed at {seal['sealed_at']} ({seal['reason']})",
        )
    )
    return True


# --- 4. span tree ----------------------------------------------------------------------------


def _span_tree(view: _View, report: ReplayReport) -> bool:
    spans = view.spans

    def broken(message: str, i: int, code: str = errors.INTEGRITY_FAILURE) -> bool:
        return view.fail(report, "span_tree", code, message, broke_at=i)

    index: dict[str, int] = {}
    for i, span in enumerate(spans):
        first = index.setdefault(span["span_id"], i)
        if first != i:
            return broken(
                f"span id {span['span_id']} appears twice: {view.named(first)} and {view.named(i)}",
                i,
            )
    for i, span in enumerate(spans):
        parent = span["parent_span_id"]
        if parent is not None and parent not in index:
            return broken(
                f"span {view.named(i)} names its parent {parent}, which is not in the trace "
                f"(/spans/{i}/parent_span_id): the trace is incomplete",
                i,
                errors.INCOMPLETE_TRACE,
            )
    cycle = _first_cycle(spans, index)
    if cycle is not None:
        walk = " -> ".join(f"/spans/{i}" for i in [*cycle, cycle[0]])
        return broken(
            f"span {view.named(min(cycle))} is its own ancestor: its parents form a cycle ({walk})",
            min(cycle),
        )
    roots = [i for i, span in enumerate(spans) if span["parent_span_id"] is None]
    if len(roots) > 1:
        return broken(
            f"{len(roots)} root spans: {view.named(roots[0])} and {view.named(roots[1])} both "
            "have no parent; a trace has one root",
            roots[1],
        )
    for i, span in enumerate(spans):
        start, end = int(span["start_time_unix_nano"]), int(span["end_time_unix_nano"])
        if end < start:
            return broken(
                f"span {view.named(i)} ends before it starts: {_when(end)} < {_when(start)} "
                f"(/spans/{i}/end_time_unix_nano)",
                i,
            )
        parent = span["parent_span_id"]
        if parent is None:
            continue
        p = index[parent]
        p_start = int(spans[p]["start_time_unix_nano"])
        p_end = int(spans[p]["end_time_unix_nano"])
        if start < p_start or end > p_end:
            return broken(
                f"span {view.named(i)} runs from {_when(start)} to {_when(end)}, outside its "
                f"parent {view.named(p)}, which runs from {_when(p_start)} to {_when(p_end)}",
                i,
            )
    report.checks.append(
        Check(
            "span_tree",
            True,
            f"one root span, {view.named(roots[0])}; {len(spans)} span{_s(len(spans))}, each "
            "parent present, no cycle, each span within its parent's time",
        )
    )
    return True


def _when(nanos: int) -> str:
    return nanos_iso(nanos) or f"{nanos} ns"


def _first_cycle(spans: list[dict[str, Any]], index: dict[str, int]) -> list[int] | None:
    """The first cycle of parent links (span indexes, child to parent), or None."""
    state = [0] * len(spans)  # 0 unseen, 1 on the current walk, 2 done
    for start in range(len(spans)):
        walk: list[int] = []
        i: int | None = start
        while i is not None and state[i] == 0:
            state[i] = 1
            walk.append(i)
            parent = spans[i]["parent_span_id"]
            i = index.get(parent) if parent is not None else None
        if i is not None and state[i] == 1:
            return walk[walk.index(i) :]
        for j in walk:
            state[j] = 2
    return None


# --- 5. messages schema ----------------------------------------------------------------------


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def schema_problem(value: Any, field: str) -> tuple[str, str] | None:
    """The first violation of the conventions' schema of ``field`` by ``value``, as
    ``(pointer within value, message)``, or None."""
    from jsonschema.exceptions import best_match

    validator = _validator(SCHEMAS[field])
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    if error.validator in ("anyOf", "oneOf") and error.context:
        common = _common_error(error.context)
        if common is not None:
            error = common
        else:
            return pointer_join(error.absolute_path), (
                f"{_quote(error.instance)} is none of the kinds the schema allows"
            )
    message = error.message
    if len(message) > 2 * _QUOTE:
        message = f"{message[: 2 * _QUOTE - 3]}..."
    return pointer_join(error.absolute_path), message


def _common_error(context: list[Any]) -> Any:
    """The first error every alternative of an ``anyOf`` gives (a part without a ``type``:
    each kind of part requires one), or None."""
    branches: dict[Any, list[Any]] = {}
    for sub in context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    shared = None
    for errors_of in branches.values():
        found = {(tuple(e.absolute_path), e.message) for e in errors_of}
        shared = found if shared is None else shared & found
    for sub in context:
        if (tuple(sub.absolute_path), sub.message) in (shared or ()):
            return sub
    return None


def _messages_schema(view: _View, report: ReplayReport) -> bool:
    if view.record.content == "none":
        report.checks.append(Check("messages_schema", True, NO_CONTENT))
        return True
    counted = dict.fromkeys(SCHEMAS, 0)
    for i, span in enumerate(view.spans):
        for field, schema in SCHEMAS.items():
            value = span[field]
            if value is None:
                continue
            counted[field] += 1
            problem = schema_problem(value, field)
            if problem is not None:
                inner, why = problem
                message = (
                    f"{field} of span {view.named(i)} do not follow the GenAI conventions' "
                    f"schema ({schema}): at /spans/{i}/{field}{inner}: {why}"
                )
                return view.fail(
                    report, "messages_schema", errors.MALFORMED_TRACE, message, broke_at=i
                )
    words = ", ".join(
        f"{field.replace('_', ' ')} of {n} span{_s(n)}" for field, n in counted.items() if n
    )
    report.checks.append(
        Check(
            "messages_schema",
            True,
            f"{words or 'no span carries messages'}: valid against the GenAI conventions' "
            "JSON schemas",
        )
    )
    return True


# --- JSON values and messages, compared ------------------------------------------------------


def json_value(value: Any) -> Any:
    """A value as JSON: a string holding a JSON object or array stands for that value."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return value
            if isinstance(parsed, dict | list):
                return parsed
    return value


def same_json(a: Any, b: Any) -> bool:
    """Whether two values are one JSON value (:func:`json_value`, then RFC 8785 bytes)."""
    a, b = json_value(a), json_value(b)
    try:
        return jcs(a) == jcs(b)
    except CanonicalError:
        return strict_equal(a, b)


def _parts(message: Any) -> list[Any]:
    parts = message.get("parts") if isinstance(message, Mapping) else None
    return parts if isinstance(parts, list) else []


def _tool_parts(
    messages: list[Any] | None, kind: str
) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """``(message index, part index, part)`` of each part of type ``kind``."""
    for m, message in enumerate(messages or ()):
        for p, part in enumerate(_parts(message)):
            if isinstance(part, Mapping) and part.get("type") == kind:
                yield m, p, part


def message_key(message: Any) -> bytes:
    """A message as it is compared across calls: an output message's ``finish_reason``, a
    null ``name`` and empty text parts left out (OpenLLMetry records an empty text part
    before a streamed tool call, which the application does not send back), tool arguments
    and responses as JSON (:func:`json_value`)."""
    if not isinstance(message, Mapping):
        return _bytes(message)
    kept = {
        k: v for k, v in message.items() if k != "finish_reason" and not (k == "name" and v is None)
    }
    if isinstance(kept.get("parts"), list):
        parts = [_part_key(part) for part in kept["parts"] if not _empty_text(part)]
        kept["parts"] = parts
    return _bytes(kept)


def _empty_text(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and part.get("content") == ""


def _part_key(part: Any) -> Any:
    if not isinstance(part, Mapping):
        return part
    return {k: json_value(v) if k in ("arguments", "response") else v for k, v in part.items()}


def _bytes(value: Any) -> bytes:
    try:
        return jcs(value)
    except CanonicalError:
        return json.dumps(value, sort_keys=True, default=repr).encode()


def _as_input(message: Any) -> Any:
    """An output message as the next call's input carries it (no ``finish_reason``)."""
    if isinstance(message, Mapping):
        return {k: v for k, v in message.items() if k != "finish_reason"}
    return message


# --- 6. tool round trips ---------------------------------------------------------------------


def _tool_round_trips(view: _View, report: ReplayReport) -> bool:
    if view.record.content == "none":
        report.checks.append(Check("tool_round_trips", True, NO_CONTENT))
        return True
    spans = view.spans
    by_call_id: dict[str, list[int]] = {}
    for j in view.tool_spans:
        tool = spans[j]["tool"] or {}
        if isinstance(tool.get("call_id"), str) and tool["call_id"]:
            by_call_id.setdefault(tool["call_id"], []).append(j)
    claimed: set[int] = set()
    calls = results = 0
    unrecorded_arguments = unrecorded_results = unanswered = uncaptured = 0
    for i in view.model_calls:
        span = spans[i]
        asked = list(_tool_parts(span["output_messages"], "tool_call"))
        if not asked:
            continue
        nxt = view.next_call.get(i)
        received = spans[nxt]["input_messages"] if nxt is not None else None
        anonymous = [
            (m, p, part)
            for m, p, part in _tool_parts(received, "tool_call_response")
            if not (isinstance(part.get("id"), str) and part["id"])
        ]
        asked_anonymous = sum(
            1 for _, _, part in asked if not (isinstance(part.get("id"), str) and part["id"])
        )
        anonymous = anonymous[len(anonymous) - asked_anonymous :] if asked_anonymous else []
        for m, p, part in asked:
            calls += 1
            at = f"/spans/{i}/output_messages/{m}/parts/{p}"
            call_id = part.get("id") if isinstance(part.get("id"), str) and part["id"] else None
            name = part.get("name")
            called = f"tool {name!r} (call id {call_id})" if call_id else f"tool {name!r}"
            t = _tool_span(view, by_call_id, claimed, i=i, call_id=call_id, name=name)
            if t is None:
                how = f"with call id {call_id}" if call_id else f"for {name!r} after it"
                return view.diverged(
                    report,
                    "tool_round_trips",
                    f"model call {view.named(i)} asked for {called} at {at}, but no "
                    f"execute_tool span {how} is in the trace",
                    span=i,
                    path=at,
                    before=part,
                    after=MISSING,
                )
            claimed.add(t)
            tool = spans[t]["tool"] or {}
            asked_arguments = part.get("arguments")
            if tool.get("arguments") is None:
                unrecorded_arguments += 1
            elif not same_json(asked_arguments, tool["arguments"]):
                return view.diverged(
                    report,
                    "tool_round_trips",
                    f"{called} ran as {view.named(t)} with other arguments than model call "
                    f"{view.named(i)} asked for: {at}/arguments is "
                    f"{_quote(asked_arguments)}, /spans/{t}/tool/arguments is "
                    f"{_quote(tool['arguments'])}",
                    span=t,
                    path=f"/spans/{t}/tool/arguments",
                    before=asked_arguments,
                    after=tool["arguments"],
                )
            if nxt is None:
                unanswered += 1
                continue
            if received is None:
                uncaptured += 1
                continue
            found = _response(received, call_id, anonymous)
            if found is None:
                return view.diverged(
                    report,
                    "tool_round_trips",
                    f"the result of {called}, run as {view.named(t)}, never reached the next "
                    f"model call {view.named(nxt)}: its input messages carry no "
                    f"tool_call_response {'with that id' if call_id else 'for it'}",
                    span=nxt,
                    path=f"/spans/{nxt}/input_messages",
                    before=_recorded(tool.get("result")),
                    after=MISSING,
                )
            a, b, response_part = found
            response = response_part.get("response", MISSING)
            if tool.get("result") is None:
                unrecorded_results += 1
                continue
            results += 1
            if response is MISSING or not same_json(tool["result"], response):
                path = f"/spans/{nxt}/input_messages/{a}/parts/{b}/response"
                return view.diverged(
                    report,
                    "tool_round_trips",
                    f"model call {view.named(nxt)} received another result of {called} than "
                    f"the tool returned: /spans/{t}/tool/result is {_quote(tool['result'])}, "
                    f"{path} is {_quote(response)}",
                    span=nxt,
                    path=path,
                    before=tool["result"],
                    after=response,
                )
    if not calls:
        detail = "no model call asked for a tool"
    else:
        detail = (
            f"{calls} tool call{_s(calls)}: each ran as an execute_tool span with the "
            "arguments the model asked for"
        )
        if results:
            detail += f"; {results} result{_s(results)} reached the next model call unchanged"
        notes = []
        if unrecorded_arguments:
            notes.append(
                f"{unrecorded_arguments} tool span{_s(unrecorded_arguments)} "
                "recorded no arguments (not compared)"
            )
        if unrecorded_results:
            notes.append(
                f"{unrecorded_results} tool span{_s(unrecorded_results)} recorded "
                "no result (not compared)"
            )
        if unanswered:
            notes.append(
                f"{unanswered} call{_s(unanswered)} came last in the conversation "
                "(no later model call to receive the result)"
            )
        if uncaptured:
            notes.append(
                f"{uncaptured} result{_s(uncaptured)} went to a model call "
                "recorded without its input messages (not compared)"
            )
        if notes:
            detail += "; " + "; ".join(notes)
    report.checks.append(Check("tool_round_trips", True, detail))
    return True


def _recorded(value: Any) -> Any:
    return MISSING if value is None else value


def _tool_span(
    view: _View,
    by_call_id: dict[str, list[int]],
    claimed: set[int],
    *,
    i: int,
    call_id: str | None,
    name: Any,
) -> int | None:
    """The execute_tool span of a tool call: by its call id; a call without one, by the
    tool's name, the first unclaimed one without a call id that starts after the call."""
    if call_id is not None:
        return next((j for j in by_call_id.get(call_id, ()) if j not in claimed), None)
    start = int(view.spans[i]["start_time_unix_nano"])
    for j in view.tool_spans:
        tool = view.spans[j]["tool"] or {}
        if (
            j not in claimed
            and not tool.get("call_id")
            and (tool.get("name") == name or view.spans[j]["name"].endswith(f" {name}"))
            and int(view.spans[j]["start_time_unix_nano"]) >= start
        ):
            return j
    return None


def _response(
    received: list[Any], call_id: str | None, anonymous: list[tuple[int, int, Mapping[str, Any]]]
) -> tuple[int, int, Mapping[str, Any]] | None:
    """The tool_call_response for a call: by id; a call without one, the next of the
    id-less responses (the last ones of the input, one per id-less call, in order)."""
    if call_id is not None:
        return next(
            (f for f in _tool_parts(received, "tool_call_response") if f[2].get("id") == call_id),
            None,
        )
    return anonymous.pop(0) if anonymous else None


# --- 7. conversation -------------------------------------------------------------------------


def _conversation(view: _View, report: ReplayReport) -> bool:
    if view.record.content == "none":
        report.checks.append(Check("conversation", True, NO_CONTENT))
        return True
    spans = view.spans
    pairs = skipped = 0
    for c in view.model_calls:
        received = spans[c]["input_messages"]
        if received is None:
            continue
        p = view.previous_call.get(c)
        if p is not None:
            if spans[p]["input_messages"] is None:
                skipped += 1
            else:
                pairs += 1
                if not _continues(view, report, p, c):
                    return False
        seen: dict[str, str] = {}
        for m, q, part in _tool_parts(received, "tool_call_response"):
            call_id = part.get("id")
            if not isinstance(call_id, str) or not call_id:
                continue
            at = f"/spans/{c}/input_messages/{m}/parts/{q}"
            if call_id in seen:
                return view.diverged(
                    report,
                    "conversation",
                    f"model call {view.named(c)} received the response to tool call {call_id} "
                    f"twice: at {seen[call_id]} and at {at}",
                    span=c,
                    path=at,
                    before=MISSING,
                    after=part,
                )
            seen[call_id] = at
        if p is not None and spans[p]["output_messages"] is not None:
            for _, _, part in _tool_parts(spans[p]["output_messages"], "tool_call"):
                call_id = part.get("id")
                if isinstance(call_id, str) and call_id and call_id not in seen:
                    return view.diverged(
                        report,
                        "conversation",
                        f"model call {view.named(c)} received no response to tool call "
                        f"{call_id}, which the call before it, {view.named(p)}, asked for",
                        span=c,
                        path=f"/spans/{c}/input_messages",
                        before=part,
                        after=MISSING,
                    )
    conversations = len(view.conversations)
    if not view.model_calls:
        detail = "no model calls"
    else:
        detail = (
            f"{len(view.model_calls)} model call{_s(len(view.model_calls))} in {conversations} "
            f"conversation{_s(conversations)}: "
        )
        detail += (
            f"each of {pairs} later call{_s(pairs)} carries the earlier call's input and "
            "output messages in order, and no tool response twice"
            if pairs
            else "no call follows another (nothing to carry over); no tool response twice"
        )
        if skipped:
            detail += (
                f"; {skipped} call{_s(skipped)} not compared with the one before (recorded "
                "without its input messages)"
            )
    report.checks.append(Check("conversation", True, detail))
    return True


def _continues(view: _View, report: ReplayReport, p: int, c: int) -> bool:
    """Whether call ``c``'s input carries, in order, every input and output message of the
    call ``p`` before it; a failure reports the first message it does not carry, at the
    position in ``c``'s input where it should be."""
    spans = view.spans
    expected = [
        (f"/spans/{p}/input_messages/{k}", m) for k, m in enumerate(spans[p]["input_messages"])
    ]
    expected += [
        (f"/spans/{p}/output_messages/{k}", _as_input(m))
        for k, m in enumerate(spans[p]["output_messages"] or ())
    ]
    received = spans[c]["input_messages"]
    keys = [message_key(m) for m in received]
    pos = 0
    for source, message in expected:
        key = message_key(message)
        k = pos
        while k < len(keys) and keys[k] != key:
            k += 1
        if k == len(keys):
            at = f"/spans/{c}/input_messages/{pos}"
            if pos < len(received):
                what = f"its input message {pos} is {_quote(received[pos])}"
                after = received[pos]
            else:
                what = f"its input ends after {len(received)} message{_s(len(received))}"
                after = MISSING
            return view.diverged(
                report,
                "conversation",
                f"model call {view.named(c)} does not carry {source} "
                f"({_quote(message)}) of the call before it in the conversation, "
                f"{view.named(p)}: {what}",
                span=c,
                path=at,
                before=message,
                after=after,
            )
        pos = k + 1
    return True


# --- 8. usage --------------------------------------------------------------------------------


def _usage(view: _View, report: ReplayReport) -> bool:
    spans = view.spans
    children: dict[str, list[int]] = {}
    for i, span in enumerate(spans):
        if span["parent_span_id"] is not None:
            children.setdefault(span["parent_span_id"], []).append(i)
    totals = agents = 0
    for i, span in enumerate(spans):
        usage = span["usage"]
        if usage is None:
            continue
        given = [usage[k] for k in ("input_tokens", "output_tokens", "total_tokens")]
        if None in given:
            continue
        totals += 1
        if given[2] != given[0] + given[1]:
            return view.diverged(
                report,
                "usage",
                f"span {view.named(i)} reports total_tokens {given[2]}, but its "
                f"input_tokens {given[0]} and output_tokens {given[1]} make "
                f"{given[0] + given[1]}",
                span=i,
                path=f"/spans/{i}/usage/total_tokens",
                before=given[0] + given[1],
                after=given[2],
            )
    for i, span in enumerate(spans):
        usage = span["usage"]
        if usage is None or not is_agent(span) or is_model_call(span):
            continue
        calls = [
            d for d in _descendants(span["span_id"], children, spans) if is_model_call(spans[d])
        ]
        if not calls:
            continue
        compared = False
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            if usage[name] is None:
                continue
            given = [(spans[d]["usage"] or {}).get(name) for d in calls]
            counts = [n for n in given if n is not None]
            if len(counts) != len(given):
                continue
            compared = True
            if sum(counts) != usage[name]:
                return view.diverged(
                    report,
                    "usage",
                    f"agent span {view.named(i)} reports {name} {usage[name]}, but its "
                    f"{len(calls)} model call{_s(len(calls))} report {sum(counts)} in all "
                    f"({' + '.join(map(str, counts))})",
                    span=i,
                    path=f"/spans/{i}/usage/{name}",
                    before=sum(counts),
                    after=usage[name],
                )
        agents += compared
    parts = []
    if totals:
        parts.append(f"total_tokens is input_tokens + output_tokens on {totals} span{_s(totals)}")
    if agents:
        parts.append(f"the usage of {agents} agent span{_s(agents)} is the sum of its model calls'")
    detail = "; ".join(parts) or (
        "nothing to check: no span reports input, output and total tokens, and no agent span "
        "a usage its model calls report"
    )
    report.checks.append(Check("usage", True, detail))
    return True


def _descendants(
    span_id: str, children: dict[str, list[int]], spans: list[dict[str, Any]]
) -> list[int]:
    """The indexes of every span below ``span_id`` (children, their children...)."""
    found: set[int] = set()
    stack = list(children.get(span_id, ()))
    while stack:
        i = stack.pop()
        if i not in found:
            found.add(i)
            stack.extend(children.get(spans[i]["span_id"], ()))
    return sorted(found)
