"""Sign-in throttling through django-axes, with the console's keys, messages and one exception.

django-axes counts failed sign-ins per (username, address) (``AXES_LOCKOUT_PARAMETERS``) in
its own table, so the count holds across every worker process with no extra service. After
``LOGIN_THROTTLE_FAILURES`` failures the pair is locked until ``LOGIN_THROTTLE_WINDOW_SECONDS``
after its last failure (axes' cool-off): a password alone no longer signs in, whether right or
wrong, and the answer does not say which. A success clears the pair (``AXES_RESET_ON_SUCCESS``).

The username is keyed exactly as the sign-in form reads it (NFKC-normalised), and case-folded,
so a look-alike spelling (`ｌena`) spends lena's budget instead of getting a fresh one. The
address is the peer's (`REMOTE_ADDR`), or, only when `REPLAY_TRUSTED_PROXIES` says which hops
are ours, the client address the trusted proxies wrote into `REPLAY_TRUSTED_PROXY_HEADER`:
behind a proxy every client would otherwise share the proxy's address and lock each other out.

A locked pair is not a lock-out of the owner: someone who knows only the username can lock
the pair, but the owner still signs in with the right password *and* a valid code from their
authenticator, at most `LOGIN_THROTTLE_BACKOFF_SECONDS` after the pair's last failure (the
backoff keeps guessing slow; a guess while locked is answered the same whatever was right).
The sign-in view (``console.views.auth``) marks such a request (:func:`second_factor_mark`),
and :class:`SecondFactorAxesBackend` then lets the password be checked; the code is checked
after it. People without an authenticator wait for the window. django-otp's per-device
throttle covers the code itself, and only someone with the right password ever reaches it.

The sign-in page renders its own lock-out answer (429 with the minutes left and the code
field), so axes' middleware keeps the view's response (:func:`lockout_response`).
"""

from __future__ import annotations

import ipaddress
import math
import unicodedata
from datetime import timedelta
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from console.env import TrustedProxies, parse_trusted_proxies

MESSAGE_LOCKED = (
    "Too many failed sign-in attempts for this account from your address. "
    "Try again in {minutes} minute(s)."
)
MESSAGE_LOCKED_SECOND_FACTOR = (
    "If you have an authenticator, you may sign in now with your password and its current code."
)
MESSAGE_BACKOFF = "Too many failed sign-in attempts. Wait {seconds} seconds before the next try."

_SECOND_FACTOR_MARK = "console_signin_second_factor"


# --- settings (read at call time, so a test's override holds) ---------------------------------


def throttle_failures() -> int:
    """``LOGIN_THROTTLE_FAILURES``: failures per (username, address) that lock the pair."""
    return int(settings.LOGIN_THROTTLE_FAILURES)


def throttle_window() -> timedelta:
    """``LOGIN_THROTTLE_WINDOW_SECONDS``: how long after its last failure a pair stays locked."""
    return timedelta(seconds=int(settings.LOGIN_THROTTLE_WINDOW_SECONDS))


def throttle_backoff() -> timedelta:
    """``LOGIN_THROTTLE_BACKOFF_SECONDS``: a locked pair's wait before password + code."""
    return timedelta(seconds=int(settings.LOGIN_THROTTLE_BACKOFF_SECONDS))


def _trusted_proxies() -> TrustedProxies:
    return parse_trusted_proxies(settings.REPLAY_TRUSTED_PROXIES)


def _proxy_header() -> str:
    return str(settings.REPLAY_TRUSTED_PROXY_HEADER)


# --- what axes calls (AXES_* settings name these) --------------------------------------------


def axes_failure_limit(request: HttpRequest | None, credentials: Any = None) -> int:
    return throttle_failures()


def axes_cool_off(request: HttpRequest | None = None) -> timedelta:
    return throttle_window()


def axes_username(request: HttpRequest | None, credentials: dict[str, Any] | None) -> str:
    """The name axes counts under: the form's ``username`` (or the credentials'), keyed."""
    name = (credentials or {}).get("username")
    if name is None and request is not None:
        name = request.POST.get("username", "")
    return throttle_username(str(name or ""))


def axes_client_ip(request: HttpRequest) -> str | None:
    """The client address axes stores: :func:`client_ip`, or None when it is no address (a
    request made in-process, without a peer)."""
    found = _address(client_ip(request))
    return str(found) if found is not None else None


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any = None
) -> HttpResponse:
    """The sign-in view already answered a locked pair (429, the minutes left, the code
    field), and the failure that reaches the limit is answered as any wrong password is."""
    assert original_response is not None  # axes' middleware always passes the view's answer
    return original_response


class SecondFactorAxesBackend(AxesStandaloneBackend):
    """Axes' guard, except for a request the sign-in view marked as a locked owner's try with
    a code (:func:`second_factor_mark`): its password is checked, and its code after it."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None or getattr(request, _SECOND_FACTOR_MARK, False):
            # no request: not a sign-in form (force_login, a management command)
            return None
        return super().authenticate(request, *args, **kwargs)


# --- the view's side ------------------------------------------------------------------------


def throttle_username(username: str) -> str:
    """The name the throttle counts under: NFKC as the sign-in form reads it, case-folded."""
    folded = unicodedata.normalize("NFKC", username).strip().casefold()
    return unicodedata.normalize("NFKC", folded)[:150]


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def client_ip(request: HttpRequest) -> str:
    """The client's address: the peer's, unless configured trusted proxies forwarded it.

    With a hop count N, the client is the N-th address from the right of the header (each of
    our N proxies appended one; anything further left was written by the client). With
    networks, the peer must be one of them, and the client is the right-most address of the
    header outside them. Anything unreadable falls back to the peer address.
    """
    peer = request.META.get("REMOTE_ADDR", "") or "unknown"
    trusted = _trusted_proxies()
    if not trusted:
        return peer
    meta_key = "HTTP_" + _proxy_header().upper().replace("-", "_")
    hops = [h.strip() for h in request.META.get(meta_key, "").split(",") if h.strip()]
    if isinstance(trusted, int):
        if len(hops) < trusted:
            return peer
        found = _address(hops[-trusted])
        return str(found) if found is not None else peer
    peer_address = _address(peer)
    if peer_address is None or not any(peer_address in net for net in trusted):
        return peer
    for hop in reversed(hops):
        found = _address(hop)
        if found is None:
            return peer
        if not any(found in net for net in trusted):
            return str(found)
    return str(_address(hops[0])) if hops else peer


def _last_failure(request: HttpRequest, username: str) -> Any:
    AxesProxyHandler.update_request(request)
    address = request.axes_ip_address  # type: ignore[attr-defined]  # set by update_request
    return (
        AccessAttempt.objects.filter(username=throttle_username(username), ip_address=address)
        .order_by("-attempt_time")
        .values_list("attempt_time", flat=True)
        .first()
    )


def locked_wait(request: HttpRequest, username: str) -> int:
    """Seconds until this pair may sign in with a password alone; 0 when it may now."""
    if not AxesProxyHandler.is_locked(request, {"username": username}):
        return 0
    last = _last_failure(request, username)
    if last is None:
        return 0
    return max(1, math.ceil((last + throttle_window() - timezone.now()).total_seconds()))


def backoff_wait(request: HttpRequest, username: str) -> int:
    """Seconds until a locked pair may try its password with a code; 0 when it may now."""
    last = _last_failure(request, username)
    if last is None:
        return 0
    return max(0, math.ceil((last + throttle_backoff() - timezone.now()).total_seconds()))


def second_factor_mark(request: HttpRequest) -> None:
    """This request is a locked owner's try with password and code: let the password be
    checked (:class:`SecondFactorAxesBackend`); the view checks the code after it."""
    setattr(request, _SECOND_FACTOR_MARK, True)


def failure_record(request: HttpRequest, username: str) -> None:
    """A refused try whose password was right (the code was not): axes counts it as a failed
    sign-in. (A wrong password is counted by axes itself, through ``user_login_failed``.)"""
    AxesProxyHandler.user_login_failed(
        sender=__name__, credentials={"username": username}, request=request
    )


def locked_message(wait_seconds: int) -> str:
    return MESSAGE_LOCKED.format(minutes=max(1, math.ceil(wait_seconds / 60)))


def backoff_message(wait_seconds: int) -> str:
    return MESSAGE_BACKOFF.format(seconds=max(1, wait_seconds))
