from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest

from console import roles
from governance.requests import inbox

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
    ("inbox", "inbox"),
)


def nav_section(request: HttpRequest) -> str:
    """The navigation link the page is under (marked aria-current="page"), or ""."""
    match = getattr(request, "resolver_match", None)
    name = (match.url_name or "") if match is not None else ""
    if match is not None and name.startswith(
        "request-"
    ):  # one pair of pages for every kind of council request
        from governance.requests.builtin import kinds

        kind = kinds().get(match.kwargs.get("kind", ""))
        return getattr(kind, "nav_section", "")
    return next((section for prefix, section in NAV_SECTIONS if name.startswith(prefix)), "")


def console(request: HttpRequest) -> dict[str, Any]:
    """What the layout needs to draw navigation: the user's roles and allowed actions.

    Navigation only hides links; every view still checks the matrix itself.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"console_roles": [], "console_can": {}}
    in_effect = roles.roles(user)
    return {
        "nav_current": nav_section(request),
        "console_roles": sorted(in_effect),
        "console_can": {action: roles.can(user, action) for action in roles.ACTIONS},
        # called by the layout only, once ({% with %}): htmx fragments never pay for it
        "console_inbox": _Once(lambda: _inbox_count(request, user, in_effect)),
        # a witness refused the ledger's history: admins and council see it on every page
        "console_witness_alerts": _Once(lambda: _witness_alerts(in_effect)),
    }


class _Once:
    """A value computed the first time a template asks for it, then kept."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._done = False
        self._value: Any = None

    def __call__(self) -> Any:
        if not self._done:
            self._value, self._done = self._compute(), True
        return self._value


def _inbox_count(request: HttpRequest, user: Any, in_effect: frozenset[str]) -> int | None:
    """How many governed requests wait for this person's signature; None for someone whose
    roles sign nothing (the navigation then shows no count). A handful of queries, whatever
    the number of open requests (``governance.requests.inbox``); none on the inbox page,
    which has listed them already."""
    if not inbox.signs_anything(in_effect):
        return None
    listed = getattr(request, "inbox_waiting", None)
    if listed is None:
        listed = inbox.waiting_for(user, roles=in_effect)
    return len(listed)


def _witness_alerts(in_effect: frozenset[str]) -> list[Any]:
    """The unacknowledged witness alerts, for admins and council only (one query)."""
    from core.ledger.roles import STRONG_ROLES
    from governance import witnessing

    if not in_effect & STRONG_ROLES:
        return []
    return witnessing.open_alerts()
