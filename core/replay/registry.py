"""The registry of deterministic step functions and runtimes, by `name@version`.

A deterministic step names the function that produced it (`"fn": "router.decide@1"`); replay
re-executes exactly that function. Other installed packages extend the registry through the
entry-point group `replay_console.functions`: each entry point names a callable that takes the
registry and registers what it brings, e.g. in a package's pyproject.toml:

    [project.entry-points."replay_console.functions"]
    my_functions = "my_package.replay_functions:register"

Pure: no Django, no I/O beyond reading installed package metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

from core.replay.rng import DeterministicRNG

ENTRY_POINT_GROUP = "replay_console.functions"


@dataclass
class ReplayState:
    """What a deterministic step may read: snapshot bodies and the materialised state."""

    snapshots: Mapping[str, Any]
    materialised: dict[str, Any] = field(default_factory=dict)


StepFunction = Callable[[Any, ReplayState, DeterministicRNG], Any]
#: a sandbox stand-in for an external call: (step input, rng) -> output content
MockFunction = Callable[[Any, DeterministicRNG], Any]


class Materialiser(Protocol):
    """Folds the ordered event stream into state, one event at a time (bounded memory)."""

    def apply(self, event: Mapping[str, Any]) -> None: ...

    def state(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Runtime:
    """A runtime whose traces can be replayed: how state is materialised, how it answers."""

    name: str
    materialiser: Callable[[Mapping[str, Any], DeterministicRNG], Materialiser]
    final_answer: Callable[[Any, int], Any]  # (last deterministic output, step count) -> answer


class Registry:
    """Functions by `name@version`, runtimes by name."""

    def __init__(self) -> None:
        self._functions: dict[str, StepFunction] = {}
        self._runtimes: dict[str, Runtime] = {}
        self._mocks: dict[str, MockFunction] = {}

    def register(self, name: str, fn: StepFunction) -> None:
        """Register `fn` under `name@version`; a name is registered once."""
        if "@" not in name:
            raise ValueError(f"function names carry their version: {name!r} needs '@version'")
        if name in self._functions and self._functions[name] is not fn:
            raise ValueError(f"{name} is already registered to another function")
        self._functions[name] = fn

    def register_mock(self, external_name: str, fn: MockFunction) -> None:
        """A stand-in that sandbox replays may use for a missing external output."""
        self._mocks[external_name] = fn

    def mock(self, external_name: str) -> MockFunction | None:
        return self._mocks.get(external_name)

    def register_runtime(self, runtime: Runtime) -> None:
        self._runtimes[runtime.name] = runtime

    def function(self, name: str) -> StepFunction | None:
        return self._functions.get(name)

    def runtime(self, name: str) -> Runtime | None:
        return self._runtimes.get(name)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def runtime_names(self) -> list[str]:
        return sorted(self._runtimes)


def load_entry_points(registry: Registry, eps: Iterable[Any] | None = None) -> list[str]:
    """Let installed packages register their functions; returns the entry points loaded."""
    loaded = []
    for ep in eps if eps is not None else entry_points(group=ENTRY_POINT_GROUP):
        ep.load()(registry)
        loaded.append(ep.name)
    return loaded
