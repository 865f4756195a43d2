"""The operations dashboard and the local API documentation page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from console import charts, roles
from console.models import DriftSample
from console.selectors import TraceFilters, trace_queryset
from console.tables import not_replayable_rows_html
from console.views.common import signed_in
from governance.retention import retention_policy, retention_upcoming
from replay.models import ReplayRun
from replay.selectors import traces_missing

CHART_DAYS = 30
NOT_REPLAYABLE_SHOWN = 50
RETENTION_SHOWN = 20


def _verdicts_by_day(days: int) -> list[tuple[str, dict[str, int]]]:
    today = timezone.now().date()
    start = today - timedelta(days=days - 1)
    rows = (
        ReplayRun.objects.filter(state=ReplayRun.State.DONE, finished_at__date__gte=start)
        .annotate(day=TruncDate("finished_at"))
        .values("day", "status")
        .annotate(n=Count("id"))
    )
    counts: dict[Any, dict[str, int]] = {}
    for row in rows:
        counts.setdefault(row["day"], {})[row["status"]] = row["n"]
    return [
        ((start + timedelta(days=i)).strftime("%m-%d"), counts.get(start + timedelta(days=i), {}))
        for i in range(days)
    ]


@require_GET
@signed_in
def dashboard_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    not_replayable = list(
        trace_queryset(TraceFilters(replayable=False)).order_by("-created_at", "-id")[
            :NOT_REPLAYABLE_SHOWN
        ]
    )
    days = _verdicts_by_day(CHART_DAYS)
    latest = DriftSample.objects.order_by("-created_at", "-id").first()
    drift = (
        list(
            DriftSample.objects.filter(sweep=latest.sweep)
            .select_related("trace", "run")
            .order_by("-drifted", "id")
        )
        if latest
        else []
    )
    missing = traces_missing(not_replayable)  # one query for them all, not one per trace
    context = {
        # in Python (console.tables); empty when every stored trace is replayable
        "not_replayable_rows": not_replayable_rows_html((t, missing[t.pk]) for t in not_replayable),
        "chart": charts.verdict_chart(days),
        "chart_days": CHART_DAYS,
        "chart_total": sum(sum(c.values()) for _, c in days),
        "drift": drift,
        "drift_at": latest.created_at if latest else None,
        "drifted": sum(1 for d in drift if d.drifted),
        "retention_on": not retention_policy().empty,
        "expiring": retention_upcoming(limit=RETENTION_SHOWN),
    }
    return render(request, "console/ops_dashboard.html", context)


API_EXAMPLE_ORIGIN = "http://127.0.0.1:8000"


@require_GET
@signed_in
def api_docs_view(request: HttpRequest) -> HttpResponse:
    """The API reference, rendered here from the OpenAPI schema (no CDN, no script)."""
    roles.require(request.user, roles.BROWSE)
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = []
    for path, methods in schema.get("paths", {}).items():
        for method, op in methods.items():
            body = (op.get("requestBody") or {}).get("content", {})
            operations.append(
                {
                    "path": path,
                    "method": method.upper(),
                    "summary": op.get("summary") or "",
                    "description": op.get("description") or "",
                    "parameters": op.get("parameters", []),
                    "body": sorted(body),
                    "responses": sorted(op.get("responses", {}).items()),
                    "tags": op.get("tags", []),
                }
            )
    info = schema.get("info", {})
    # The schema's example names the default address; the page shows the one it was served from.
    origin = request.build_absolute_uri("/").rstrip("/")
    blocks = [
        {
            "text": block.strip().replace(API_EXAMPLE_ORIGIN, origin),
            "code": block.strip().startswith("curl "),
        }
        for block in str(info.get("description", "")).split("\n\n")
        if block.strip()
    ]
    context = {"operations": operations, "info": info, "description_blocks": blocks}
    return render(request, "console/api_docs.html", context)
