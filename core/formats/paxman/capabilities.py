"""The capability registry a Paxman artifact's pins are checked against (seed 001 §3, check 3):
Paxman's V1 built-ins plus a deployment's, registered through an entry-point group. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from core.formats.paxman.artifact import parse_version

#: Capability id -> version, the capabilities Paxman 1.0.2 ships (``paxman.capabilities.v1``:
#: the five V1 built-ins, each at "1.0"). Deployments add theirs (:func:`capability_registry`).
CAPABILITY_REGISTRY: Mapping[str, str] = MappingProxyType(
    {
        "inference": "1.0",
        "lookup": "1.0",
        "regex_extraction": "1.0",
        "text_extraction": "1.0",
        "validation": "1.0",
    }
)
#: Installed packages add capabilities through this entry-point group: each entry point names
#: a callable taking the :class:`CapabilityRegistry` (it calls ``register(id, version)``), or
#: a mapping of capability id -> version (or list of versions).
CAPABILITY_ENTRY_POINT_GROUP = "replay_console.paxman_capabilities"


class CapabilityRegistry:
    """The capabilities replay accepts, keyed as Paxman keys its registry: ``(id, version)``.

    An artifact's ``capability_versions`` pin each capability id at one version; replay
    checks the id is registered and then that the pinned version is one registered for it
    (Paxman's ``get(id, version)`` raises ``CAPABILITY_NOT_FOUND`` on either miss).
    """

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        self._versions: dict[str, set[str]] = {}
        self._sorted: dict[str, tuple[str, ...]] = {}
        for cid, versions in (entries or {}).items():
            for version in [versions] if isinstance(versions, str) else versions:
                self.register(cid, version)

    def register(self, capability_id: Any, version: Any) -> None:
        if not isinstance(capability_id, str) or not capability_id:
            raise ValueError(f"a capability id must be a non-empty string, got {capability_id!r}")
        if not isinstance(version, str) or not version:
            raise ValueError(
                f"capability {capability_id!r}: a version must be a non-empty string, "
                f"got {version!r}"
            )
        self._versions.setdefault(capability_id, set()).add(version)
        self._sorted.pop(capability_id, None)

    def versions(self, capability_id: str) -> tuple[str, ...]:
        """The versions registered for an id, in PEP 440 order where they parse."""
        found = self._sorted.get(capability_id)
        if found is None:
            found = tuple(sorted(self._versions.get(capability_id, ()), key=_version_sort_key))
            self._sorted[capability_id] = found
        return found

    def ids(self) -> list[str]:
        return sorted(self._versions)

    def as_dict(self) -> dict[str, list[str]]:
        return {cid: list(self.versions(cid)) for cid in self.ids()}


def _version_sort_key(text: str) -> tuple[int, Any, str]:
    try:
        return (1, parse_version(text).key, text)
    except ValueError:
        return (0, (), text)


def load_capability_entry_points(registry: CapabilityRegistry, eps: Any = None) -> list[str]:
    """Let installed packages register capabilities; returns the entry points loaded."""
    from importlib.metadata import entry_points

    loaded = []
    for ep in eps if eps is not None else entry_points(group=CAPABILITY_ENTRY_POINT_GROUP):
        brought = ep.load()
        if callable(brought):
            brought(registry)
        else:
            for cid, versions in dict(brought).items():
                for version in [versions] if isinstance(versions, str) else versions:
                    registry.register(cid, version)
        loaded.append(ep.name)
    return loaded


def capability_registry(
    extra: Mapping[str, Any] | None = None, *, eps: Any = None
) -> CapabilityRegistry:
    """Paxman's built-in capabilities, then ``extra`` (a deployment's setting: id -> version
    or list of versions), then what installed packages register (``eps``: the entry points,
    found in :data:`CAPABILITY_ENTRY_POINT_GROUP` when None)."""
    registry = CapabilityRegistry(CAPABILITY_REGISTRY)
    for cid, versions in (extra or {}).items():
        for version in [versions] if isinstance(versions, str) else versions:
            registry.register(cid, version)
    load_capability_entry_points(registry, eps)
    return registry


def _as_registry(registry: Any) -> CapabilityRegistry:
    if registry is None:
        return _BUILTIN
    if isinstance(registry, CapabilityRegistry):
        return registry
    return CapabilityRegistry(registry)


_BUILTIN = CapabilityRegistry(CAPABILITY_REGISTRY)  # read-only by convention: never registered to
