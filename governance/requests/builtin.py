"""The built-in kinds of governed request, registered in one place, and the one registry.

Force-continue, production replay, role grant and halt clear live in governance; the legal
requests' release and erasure approvals are registered by ``dsr`` through the entry-point
group ``replay_console.request_kinds`` (``pyproject.toml``), because governance never imports
the apps that call it."""

from __future__ import annotations

from core.ledger.requests import KindRegistry, load_entry_points
from governance.requests import force_continue, halt_clear, production, role_grant

BUILTIN = (force_continue.KIND, production.KIND, role_grant.KIND, halt_clear.KIND)


def register(registry: KindRegistry) -> None:
    for kind in BUILTIN:
        registry.register(kind)


_default: KindRegistry | None = None


def kinds() -> KindRegistry:
    """The built-in kinds plus everything installed packages register (built once)."""
    global _default  # noqa: PLW0603 - built once per process, then read-only
    if _default is None:
        registry = KindRegistry()
        register(registry)
        load_entry_points(registry)
        _default = registry
    return _default
