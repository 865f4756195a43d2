"""A person's own API tokens: create (shown once), list, revoke. Each creation and revocation
is a ledger event (API_TOKEN_CREATED, API_TOKEN_REVOKED)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from console import roles
from console.refusals import governance_status
from console.views.common import signed_in
from core.ledger.codes import GovernanceError
from governance import selectors as gov
from governance import services as gov_services

TOKEN_NAME_MAX = 100
MESSAGE_NAME_TOO_LONG = f"The name of a token has at most {TOKEN_NAME_MAX} characters."
MESSAGE_REVOKED = "Token {prefix}… revoked: it no longer authenticates."
TEMPLATE = "console/apitokens_own.html"


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {"tokens": gov.api_tokens_of(user=request.user), **extra}


@signed_in
@require_http_methods(["GET", "POST"])
def api_token_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.API_TOKENS_OWN)
    if request.method == "GET":
        return render(request, TEMPLATE, _context(request))
    name = request.POST.get("name", "").strip()
    if len(name) > TOKEN_NAME_MAX:
        context = _context(request, error=MESSAGE_NAME_TOO_LONG, name=name[:TOKEN_NAME_MAX])
        return render(request, TEMPLATE, context, status=400)
    row, token = gov_services.api_token_create(user=request.user, name=name, actor=request.user)
    # Rendered, never redirected: the token is in this one answer (no-store) and nowhere else.
    return render(request, TEMPLATE, _context(request, new_token=token, new_row=row), status=201)


@signed_in
@require_POST
def api_token_revoke_view(request: HttpRequest, token_id: str) -> HttpResponse:
    token = roles.access_api_token_by_id(request.user, token_id)
    try:
        gov_services.api_token_revoke(token=token, actor=request.user)
    except GovernanceError as exc:
        context = _context(request, error_code=exc.code, error_message=exc.message)
        return render(request, TEMPLATE, context, status=governance_status(exc.code))
    messages.success(request, MESSAGE_REVOKED.format(prefix=token.prefix))
    return HttpResponseRedirect(reverse("api-token-list"), status=303)
