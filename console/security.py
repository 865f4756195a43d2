"""Content-Security-Policy with a per-request nonce, and the second-factor gate.

The policy allows no inline script or style at all: scripts load from our own origin and
carry the nonce (htmx's `{% htmx_script %}` reads `csp_nonce` from the template context),
styles come only from static files. Templates therefore never use `style=` or `on*=`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django_htmx.http import HttpResponseClientRedirect

from console import roles

CSP_TEMPLATE = (
    "default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        nonce = secrets.token_urlsafe(18)
        request.csp_nonce = nonce  # type: ignore[attr-defined]
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CSP_TEMPLATE.format(nonce=nonce))
        return response


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every answer to a signed-in person and on the whole API.

    What a signed-in person sees (traces, reports, personal data once revealed) must not stay
    in a browser's or a proxy's cache after they sign out. Static files are left cacheable.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith("/static/"):
            return response
        user = getattr(request, "user", None)
        if request.path.startswith("/api/") or getattr(user, "is_authenticated", False):
            add_never_cache_headers(response)
        return response


def csp_nonce(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: `csp_nonce` for `{% htmx_script %}` and our own scripts."""
    return {"csp_nonce": getattr(request, "csp_nonce", "")}


# Pages a user who still owes a second factor may reach.
_OPEN_PREFIXES = ("/accounts/", "/static/", "/api/")


class SecondFactorMiddleware:
    """Sends a signed-in admin or council member to TOTP set-up or verification first.

    The strong roles are inert until verified anyway (console.roles); this only turns the
    403s they would meet into a clear next step. The API is left alone: there an unverified
    client simply acts with its other roles.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if (
            user.is_authenticated
            and not request.path.startswith(_OPEN_PREFIXES)
            and roles.needs_second_factor(user)
        ):
            from django_otp import devices_for_user

            has_device = any(True for _ in devices_for_user(user, confirmed=True))
            target = reverse("otp-verify" if has_device else "otp-setup")
            url = f"{target}?{urlencode({'next': request.get_full_path()})}"
            if getattr(request, "htmx", False):
                return HttpResponseClientRedirect(url)
            return HttpResponseRedirect(url)
        return self.get_response(request)
