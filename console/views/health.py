"""GET /healthz: for load balancers and the stack's supervisor; public, never cached.

Anyone gets the status alone (``{"status": "ok"}``, 200; ``{"status": "failing"}``, 503): no
ledger head, no database, broker or storage kinds, no timings. The details (every check, as
console/health.py makes them) go to a signed-in admin, or to a monitor that sends the
configured token (``REPLAY_MONITORING_TOKEN``) as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from console import conf, roles
from console.health import health

BEARER = "Bearer "


def _monitor(request: HttpRequest) -> bool:
    token = conf.monitoring_token()
    sent = request.META.get("HTTP_AUTHORIZATION", "")
    if not token or not sent.startswith(BEARER):
        return False
    return hmac.compare_digest(sent[len(BEARER) :].encode(), token.encode())


def details_allowed(request: HttpRequest) -> bool:
    """A configured monitor, or a signed-in admin (their second factor verified)."""
    if _monitor(request):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and roles.ADMIN in roles.roles(user))


@never_cache
@require_GET
def healthz_view(request: HttpRequest) -> JsonResponse:
    result = health()
    status = 200 if not result["failed"] else 503
    if not details_allowed(request):
        return JsonResponse({"status": result["status"]}, status=status)
    return JsonResponse(result, status=status)
