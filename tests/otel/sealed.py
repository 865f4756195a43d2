"""Stored OpenTelemetry traces with the facts a test wants (service, models, agent,
conversation id), made from a real client's export (``openai-v2-json.json``: an agent span,
two chat calls and a tool execution) whose span records are given those values, then sealed
and stored through the real ingest path, as a seal stores them."""

from __future__ import annotations

import contextlib
import io
import itertools
from datetime import datetime, timedelta
from unittest import mock

from django.utils import timezone

from core.formats.otel import record as rec
from replay.models import Trace
from replay.services import trace_ingest
from tests.otel.helpers import FIXTURES

EXPORT = FIXTURES / "openai-v2-json.json"
SEALED_AT = "2026-01-01T00:00:00.000Z"
_ids = itertools.count(1)


def otel_trace(
    *,
    service: str = "weather-svc",
    models: tuple[str, str | None] = ("gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
    agent: str = "weather-agent",
    conversation: str | None = None,
    created_at: datetime | None = None,
    status: str | None = None,
    tool: bool = True,
) -> Trace:
    """One sealed trace stored: every span's ``service``, the agent span's ``agent_name`` and
    ``conversation_id``, every model call's (and the agent's) request model ``models[0]``,
    the calls' response model ``models[1]`` (None: not recorded). Its verdict set to
    ``status``, stored at ``created_at`` when given. ``tool=False``: without its
    ``execute_tool`` span (so without that operation)."""
    n = next(_ids)
    assembled = rec.assemble_export(EXPORT.read_bytes())
    spans = []
    for original in assembled.spans:
        if not tool and original["operation"] == rec.TOOL_OPERATION:
            continue
        span = dict(original)
        span["service"] = service
        if span["agent_name"] is not None:
            span["agent_name"] = agent
        if span["conversation_id"] is not None:
            span["conversation_id"] = conversation or f"conv-{n}"
        if span["request_model"] is not None:
            span["request_model"] = models[0]
        if span["response_model"] is not None:
            span["response_model"] = models[1]
        spans.append(span)
    trace_id = f"{n:08x}" + assembled.trace_id[8:]
    _record, data, _digest = rec.seal(trace_id, spans, sealed_at=SEALED_AT, reason="manual")
    # stored at ``created_at`` (the upload time is set once, and its facts keep a copy of it)
    clock = mock.patch("django.utils.timezone.now", return_value=created_at)
    with clock if created_at is not None else contextlib.nullcontext():
        trace = trace_ingest(
            source=io.BytesIO(data),
            filename=f"{trace_id}.v1.otel.json",
            declared_format=rec.FORMAT,
        ).trace
    if status is not None:
        Trace.objects.filter(pk=trace.pk).update(last_status=status)
        trace.refresh_from_db()
    return trace


def three_traces() -> dict[str, Trace]:
    """Three OTel traces the list's filters tell apart, oldest first: ``a`` and ``c`` of one
    service (spelt in two cases) and one conversation, on other models; ``b`` of another
    service and agent, without a tool call."""
    now = timezone.now()
    return {
        "a": otel_trace(
            service="Weather-Svc",
            models=("gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
            conversation="conv-a",
            created_at=now - timedelta(days=3),
            status="ok",
        ),
        "b": otel_trace(
            service="billing-svc",
            models=("claude-3-5-sonnet", None),
            agent="Billing-Agent",
            conversation="conv-b",
            created_at=now - timedelta(days=2),
            status="diverged",
            tool=False,
        ),
        "c": otel_trace(
            service="weather-svc",
            models=("gpt-4o", "gpt-4o-2024-08-06"),
            conversation="conv-a",
            created_at=now - timedelta(days=1),
            status="ok",
        ),
    }
