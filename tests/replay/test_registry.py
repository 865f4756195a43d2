from __future__ import annotations

import pytest

from core.replay.registry import Registry, load_entry_points


class FakeEntryPoint:
    def __init__(self, name, target):
        self.name = name
        self._target = target

    def load(self):
        return self._target


def double_v1(step_input, state, rng):
    return {"value": step_input["value"] * 2}


def test_it_lets_installed_packages_register_functions_through_entry_points():
    registry = Registry()

    def register(reg):
        reg.register("double@1", double_v1)

    loaded = load_entry_points(registry, [FakeEntryPoint("doubler", register)])
    assert loaded == ["doubler"]
    assert registry.function("double@1") is double_v1
    assert registry.names() == ["double@1"]


def test_it_refuses_a_function_name_without_a_version():
    with pytest.raises(ValueError, match="needs '@version'"):
        Registry().register("double", double_v1)


def test_it_refuses_to_rebind_a_registered_name():
    registry = Registry()
    registry.register("double@1", double_v1)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("double@1", lambda i, s, r: None)


def test_it_registers_the_reference_runtime_by_default():
    from core.formats import default_registry

    registry = default_registry()
    assert {"router.decide@1", "answer.compose@1"} <= set(registry.names())
    assert registry.runtime_names() == ["mace-reference"]
    assert registry.mock("llm.complete") is not None
