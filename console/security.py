"""The CSP nonce for templates, no-store caching, and the second-factor gate.

The Content-Security-Policy itself is django-csp's (`CONTENT_SECURITY_POLICY` in settings):
no inline script or style at all; scripts load from our own origin and carry the nonce
(htmx's `{% htmx_script %}` reads `csp_nonce` from the template context), styles come only
from static files. Templates therefore never use `style=` or `on*=`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from csp.constants import HEADER
from csp.middleware import CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django_htmx.http import HttpResponseClientRedirect

from console import roles


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware, with the policy on a 404 and a 500 in DEBUG too.

    django-csp leaves those two out in DEBUG, for Django's technical pages and their inline
    styles; the console draws its own 404 and 500 pages in every mode (console.views.errors),
    so they keep the policy like every other page."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if settings.DEBUG and response.status_code in (404, 500) and HEADER not in response:
            parts = self.get_policy_parts(request=request, response=response)
            response[HEADER] = build_policy(**asdict(parts))
            return response
        return super().process_response(request, response)


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
    """Template context processor: `csp_nonce` for `{% htmx_script %}` and our own scripts.

    django-csp makes the nonce when it is first read, and names it in the header only then."""
    nonce = getattr(request, "csp_nonce", None)
    return {"csp_nonce": str(nonce) if nonce is not None else ""}


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
