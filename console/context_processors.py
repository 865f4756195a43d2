from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console import roles

#: the navigation section each page belongs to, by the prefix of its URL name
NAV_SECTIONS = (
    ("trace-upload", "upload"),
    ("trace-", "traces"),
    ("run-", "traces"),
    ("force-continue", "force-continue"),
    ("production", "production"),
    ("ledger", "ledger"),
    ("checkpoint", "ledger"),
    ("halt-", "halts"),
    ("incident", "halts"),
    ("key-", "keys"),
    ("server-key", "keys"),
    ("ops-", "ops"),
    ("api-docs", "api"),
    ("api-token", "tokens"),
    ("user-", "users"),
    ("role-grant", "role-grants"),
    ("dsr-", "dsr"),
)


def nav_section(request: HttpRequest) -> str:
    """The navigation link the page is under (marked aria-current="page"), or ""."""
    match = getattr(request, "resolver_match", None)
    name = (match.url_name or "") if match is not None else ""
    return next((section for prefix, section in NAV_SECTIONS if name.startswith(prefix)), "")


def console(request: HttpRequest) -> dict[str, Any]:
    """What the layout needs to draw navigation: the user's roles and allowed actions.

    Navigation only hides links; every view still checks the matrix itself.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"console_roles": [], "console_can": {}}
    return {
        "nav_current": nav_section(request),
        "console_roles": sorted(roles.roles(user)),
        "console_can": {action: roles.can(user, action) for action in roles.ACTIONS},
    }
