"""Sign-in throttling keyed by the username tried and the client address.

After `LOGIN_THROTTLE_FAILURES` failures for one (username, address) inside
`LOGIN_THROTTLE_WINDOW_SECONDS`, every further attempt for that pair is refused, even with the
right password, until the oldest failure leaves the window. A success clears the pair. Keying
on the pair (not the username alone) keeps an attacker from locking a person out from
elsewhere; the per-device TOTP throttle of django-otp covers the second factor.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from console.models import LoginFailure

MESSAGE_LOCKED = (
    "Too many failed sign-in attempts for this account from your address. "
    "Try again in {minutes} minute(s)."
)


def _limits() -> tuple[int, timedelta]:
    failures = int(getattr(settings, "LOGIN_THROTTLE_FAILURES", 5))
    window = timedelta(seconds=int(getattr(settings, "LOGIN_THROTTLE_WINDOW_SECONDS", 900)))
    return failures, window


def client_ip(request: HttpRequest) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is client-controlled unless a trusted proxy rewrites it.
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _key(username: str) -> str:
    return username.strip().lower()[:150]


def login_throttle_wait(*, username: str, ip: str) -> int:
    """Seconds until this pair may try again; 0 when it may try now."""
    limit, window = _limits()
    now = timezone.now()
    recent = list(
        LoginFailure.objects.filter(username=_key(username), ip=ip, created_at__gt=now - window)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) < limit:
        return 0
    oldest_that_counts = recent[-1]
    return max(1, math.ceil((oldest_that_counts + window - now).total_seconds()))


def login_failure_record(*, username: str, ip: str) -> None:
    LoginFailure.objects.create(username=_key(username), ip=ip)


def login_success_record(*, username: str, ip: str) -> None:
    LoginFailure.objects.filter(username=_key(username), ip=ip).delete()


def locked_message(wait_seconds: int) -> str:
    return MESSAGE_LOCKED.format(minutes=max(1, math.ceil(wait_seconds / 60)))
