"""Helpers every view uses: the sign-in gate and the page-or-partial choice."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render, resolve_url
from django.utils.cache import patch_vary_headers
from django_htmx.http import HttpResponseClientRedirect

View = Callable[..., HttpResponseBase]  # a page, a redirect or a streamed export


def signed_in(view: View) -> View:
    """Like login_required, but an htmx request is redirected by the client (HX-Redirect)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            if getattr(request, "htmx", False):
                login_url = resolve_url(settings.LOGIN_URL)
                query = urlencode({"next": request.get_full_path()})
                return HttpResponseClientRedirect(f"{login_url}?{query}")
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper


def partial_or_page(
    request: HttpRequest,
    template: str,
    partial: str,
    context: dict[str, Any],
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only the named partial when htmx asks for it (Vary: HX-Request)."""
    name = f"{template}#{partial}" if getattr(request, "htmx", False) else template
    response = render(request, name, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response
