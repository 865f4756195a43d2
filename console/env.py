"""Settings helpers that read the environment and fail loudly on nonsense."""

from __future__ import annotations

import ipaddress
import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_secret(name: str, default: str | None = None) -> str | None:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return os.environ.get(name, default)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


TrustedProxies = int | list[ipaddress.IPv4Network | ipaddress.IPv6Network]


def parse_trusted_proxies(raw: str) -> TrustedProxies:
    """`REPLAY_TRUSTED_PROXIES`: a hop count, or comma-separated addresses/CIDRs; 0 if unset."""
    text = str(raw or "").strip()
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    try:
        return [ipaddress.ip_network(part.strip(), strict=False) for part in text.split(",")]
    except ValueError:
        raise ImproperlyConfigured(
            f"REPLAY_TRUSTED_PROXIES={text!r} is neither a hop count nor a list of addresses "
            "or CIDR networks"
        ) from None
