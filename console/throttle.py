"""Sign-in throttling keyed by the username tried and the client address.

After `LOGIN_THROTTLE_FAILURES` failures for one (username, address) inside
`LOGIN_THROTTLE_WINDOW_SECONDS`, the pair is locked until the oldest failure leaves the window:
a password alone no longer signs in, whether right or wrong, and the answer does not say which.
A success clears the pair.

The username is keyed exactly as the sign-in form reads it (NFKC-normalised), and case-folded,
so a look-alike spelling (`ｌena`) spends lena's budget instead of getting a fresh one. The
address is the peer's (`REMOTE_ADDR`), or, only when `REPLAY_TRUSTED_PROXIES` says which hops
are ours, the client address the trusted proxies wrote into `REPLAY_TRUSTED_PROXY_HEADER`:
behind a proxy every client would otherwise share the proxy's address and lock each other out.

A locked pair is not a lock-out of the owner: someone who knows only the username can lock
the pair, but the owner still signs in with the right password *and* a valid code from their
authenticator, at most `LOGIN_THROTTLE_BACKOFF_SECONDS` after the pair's last failure (the
backoff keeps guessing slow; a guess while locked is answered the same whatever was right).
People without an authenticator wait for the window. django-otp's per-device throttle covers
the code itself, and only someone with the right password ever reaches it.
"""

from __future__ import annotations

import ipaddress
import math
import unicodedata
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from console.env import TrustedProxies, parse_trusted_proxies
from console.models import LoginFailure

MESSAGE_LOCKED = (
    "Too many failed sign-in attempts for this account from your address. "
    "Try again in {minutes} minute(s)."
)
MESSAGE_LOCKED_SECOND_FACTOR = (
    "If you have an authenticator, you may sign in now with your password and its current code."
)
MESSAGE_BACKOFF = "Too many failed sign-in attempts. Wait {seconds} seconds before the next try."


def _limits() -> tuple[int, timedelta]:
    failures = int(getattr(settings, "LOGIN_THROTTLE_FAILURES", 5))
    window = timedelta(seconds=int(getattr(settings, "LOGIN_THROTTLE_WINDOW_SECONDS", 900)))
    return failures, window


def _backoff() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "LOGIN_THROTTLE_BACKOFF_SECONDS", 5)))


def throttle_username(username: str) -> str:
    """The name the throttle counts under: NFKC as the sign-in form reads it, case-folded."""
    folded = unicodedata.normalize("NFKC", username).strip().casefold()
    return unicodedata.normalize("NFKC", folded)[:150]


def _trusted_proxies() -> TrustedProxies:
    return parse_trusted_proxies(getattr(settings, "REPLAY_TRUSTED_PROXIES", ""))


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
    header = str(getattr(settings, "REPLAY_TRUSTED_PROXY_HEADER", "X-Forwarded-For"))
    meta_key = "HTTP_" + header.upper().replace("-", "_")
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


def login_throttle_wait(*, username: str, ip: str) -> int:
    """Seconds until this pair may sign in with a password alone; 0 when it may now."""
    limit, window = _limits()
    now = timezone.now()
    recent = list(
        LoginFailure.objects.filter(
            username=throttle_username(username), ip=ip, created_at__gt=now - window
        )
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) < limit:
        return 0
    oldest_that_counts = recent[-1]
    return max(1, math.ceil((oldest_that_counts + window - now).total_seconds()))


def login_backoff_wait(*, username: str, ip: str) -> int:
    """Seconds until a locked pair may try its password with a code; 0 when it may now."""
    last = (
        LoginFailure.objects.filter(username=throttle_username(username), ip=ip)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    if last is None:
        return 0
    left = (last + _backoff() - timezone.now()).total_seconds()
    return max(0, math.ceil(left))


def login_failure_record(*, username: str, ip: str) -> None:
    LoginFailure.objects.create(username=throttle_username(username), ip=ip)


def login_success_record(*, username: str, ip: str) -> None:
    LoginFailure.objects.filter(username=throttle_username(username), ip=ip).delete()


def locked_message(wait_seconds: int) -> str:
    return MESSAGE_LOCKED.format(minutes=max(1, math.ceil(wait_seconds / 60)))


def backoff_message(wait_seconds: int) -> str:
    return MESSAGE_BACKOFF.format(seconds=max(1, wait_seconds))
