"""GET /healthz: for load balancers and the stack's supervisor; public, never cached."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console.health import health


@never_cache
@require_GET
def healthz_view(request: HttpRequest) -> JsonResponse:
    result = health()
    return JsonResponse(result, status=200 if not result["failed"] else 503)
