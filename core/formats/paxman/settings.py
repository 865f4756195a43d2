"""The Paxman format's settings, read through a getter so the package stays pure.

- ``REPLAY_PAXMAN_CAPABILITIES``: capabilities a deployment adds to the built-ins and the
  installed packages' (a mapping: capability id -> version or list of versions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from core.formats.paxman import CapabilityRegistry, capability_registry
from core.formats.protocol import SettingError

Setting = Callable[[str, Any], Any]


def capabilities(setting: Setting, installed: Mapping[str, list[str]]) -> CapabilityRegistry:
    """The capabilities a Paxman replay accepts: ``installed`` (built-ins and entry points)
    and ``REPLAY_PAXMAN_CAPABILITIES``; raises ValueError naming the setting when it is not a
    mapping of ids to versions (a :class:`SettingError`, which is a ValueError)."""
    registry = CapabilityRegistry(dict(installed))
    extra = setting("REPLAY_PAXMAN_CAPABILITIES", None) or {}
    try:
        for cid, versions in dict(extra).items():
            for version in [versions] if isinstance(versions, str) else versions:
                registry.register(cid, version)
    except (TypeError, ValueError) as exc:
        raise SettingError(f"REPLAY_PAXMAN_CAPABILITIES: {exc}") from None
    return registry


@functools.cache
def installed_capabilities() -> dict[str, list[str]]:
    """Paxman's built-in capabilities and those installed packages register (entry points
    are read once per process)."""
    return capability_registry().as_dict()
