"""Structural JSON diffs with RFC 6901 JSON Pointer paths (core/replay/diff.py)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.replay.diff import (
    MISSING,
    DiffEntry,
    PointerError,
    apply_diff,
    diff,
    first_divergence,
    iter_diff,
    pointer_escape,
    pointer_get,
    pointer_join,
    pointer_split,
    pointer_unescape,
    strict_equal,
)

ROOT = Path(__file__).resolve().parents[2]


def same(x: Any, y: Any) -> bool:
    """Type-strict JSON equality written independently of core.replay.diff (the test oracle).

    True, 1 and 1.0 differ; 0.0 and -0.0 differ; NaN equals NaN; dict key order is ignored.
    """
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
    if isinstance(x, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)
    return x == y


def paths(entries: list[DiffEntry]) -> list[str]:
    return [e.path for e in entries]


# ------------------------------------------------------------------ exact paths


def test_it_reports_nothing_for_equal_documents() -> None:
    a = {"a": [1, {"b": None, "c": "x"}], "d": 1.5, "e": True}
    assert diff(a, json.loads(json.dumps(a))) == []
    assert first_divergence(a, copy.deepcopy(a)) is None


def test_it_gives_the_exact_path_of_a_nested_change() -> None:
    a = {"events": [{"seq": 0, "out": {"text": "hi"}}, {"seq": 1, "out": {"text": "yo"}}]}
    b = copy.deepcopy(a)
    b["events"][1]["out"]["text"] = "YO"
    assert diff(a, b) == [DiffEntry("/events/1/out/text", "yo", "YO")]


def test_it_escapes_slash_and_tilde_in_keys() -> None:
    a = {"a/b": 1, "m~n": 2, "~1": 3, "/": {"~": 4}}
    b = {"a/b": 10, "m~n": 20, "~1": 30, "/": {"~": 40}}
    assert paths(diff(a, b)) == ["/a~1b", "/m~0n", "/~01", "/~1/~0"]
    for entry in diff(a, b):
        assert pointer_get(a, entry.path) == entry.before
        assert pointer_get(b, entry.path) == entry.after


def test_it_reports_added_and_removed_keys_in_a_deterministic_order() -> None:
    a = {"z": 1, "gone": 2, "a": 3}
    b = {"new2": 5, "a": 3, "z": 1, "new1": 4}
    assert diff(a, b) == [
        DiffEntry("/gone", 2, MISSING),
        DiffEntry("/new1", MISSING, 4),
        DiffEntry("/new2", MISSING, 5),
    ]


def test_it_walks_object_keys_in_the_document_order_of_a() -> None:
    a = {"b": 1, "a": 1, "c": 1}
    b = {"a": 2, "c": 2, "b": 2}
    assert paths(diff(a, b)) == ["/b", "/a", "/c"]


def test_it_ignores_object_key_order() -> None:
    a = {"x": {"p": 1, "q": [1, 2]}, "y": 2}
    b = {"y": 2, "x": {"q": [1, 2], "p": 1}}
    assert diff(a, b) == []


def test_it_reports_array_growth_as_additions_at_their_indexes() -> None:
    assert diff([1, 2], [1, 2, 3, [4]]) == [
        DiffEntry("/2", MISSING, 3),
        DiffEntry("/3", MISSING, [4]),
    ]


def test_it_reports_array_shrinking_as_removals_at_their_indexes() -> None:
    a = {"xs": [1, 2, 3, 4]}
    b = {"xs": [9, 2]}
    assert diff(a, b) == [
        DiffEntry("/xs/0", 1, 9),
        DiffEntry("/xs/2", 3, MISSING),
        DiffEntry("/xs/3", 4, MISSING),
    ]
    assert apply_diff(a, diff(a, b)) == b


def test_it_reports_a_type_change_once_at_its_path() -> None:
    a = {"v": {"deep": {"deeper": 1}}, "w": [1, 2], "s": "x"}
    b = {"v": [{"deep": 1}], "w": {"0": 1}, "s": None}
    assert diff(a, b) == [
        DiffEntry("/v", a["v"], b["v"]),
        DiffEntry("/w", a["w"], b["w"]),
        DiffEntry("/s", "x", None),
    ]


@pytest.mark.parametrize(
    ("before", "after"),
    [(True, 1), (1, True), (False, 0), (1, 1.0), (0, 0.0), (True, 1.0), (0.0, -0.0), (0, None)],
)
def test_it_treats_bool_int_and_float_as_distinct(before: Any, after: Any) -> None:
    assert before == after or after is None  # Python would call most of these equal
    a = {"k": [before]}
    b = {"k": [after]}
    assert diff(a, b) == [DiffEntry("/k/0", before, after)]
    assert same(apply_diff(a, diff(a, b)), b)


def test_it_finds_a_type_difference_hidden_deep_inside_an_equal_looking_subtree() -> None:
    a = {"x": [{"n": 1, "m": [0, 0.5]}] * 3, "y": "same"}
    b = {"x": [{"n": 1, "m": [0, 0.5]}, {"n": 1, "m": [0.0, 0.5]}, {"m": [0, 0.5], "n": True}]}
    b["y"] = "same"
    assert a == b  # Python's == cannot see it
    assert diff(a, b) == [DiffEntry("/x/1/m/0", 0, 0.0), DiffEntry("/x/2/n", 1, True)]


def test_it_treats_nans_as_equal_and_signed_zeros_as_different() -> None:
    nan = float("nan")
    assert diff([nan], [float("nan")]) == []
    assert paths(diff({"z": 0.0}, {"z": -0.0})) == ["/z"]


def test_it_replaces_the_root() -> None:
    assert diff({"a": 1}, [1]) == [DiffEntry("", {"a": 1}, [1])]
    assert diff(1, "1") == [DiffEntry("", 1, "1")]
    assert diff(None, False) == [DiffEntry("", None, False)]
    assert apply_diff({"a": 1}, [DiffEntry("", {"a": 1}, [1])]) == [1]


def test_it_does_not_report_equal_scalars_at_the_root() -> None:
    assert diff("x", "x") == []
    assert diff(None, None) == []


def test_it_handles_documents_deeper_than_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() * 3
    a: Any = 0
    b: Any = 1
    for _ in range(depth):
        a = [a]
        b = [b]
    entries = diff(a, b)
    assert entries == [DiffEntry("/0" * depth, 0, 1)]
    assert first_divergence(a, b) == entries[0]
    assert pointer_get(apply_diff(a, entries), "/0" * depth) == 1


# ------------------------------------------------------------------ entries


def test_it_spells_a_missing_side_as_null_named_by_absent() -> None:
    assert DiffEntry("/a", 1, None).to_json() == {"path": "/a", "before": 1, "after": None}
    assert DiffEntry("/a", MISSING, None).to_json() == {
        "path": "/a",
        "before": None,
        "after": None,
        "absent": "before",
    }
    assert DiffEntry("/a", 1, MISSING).to_json() == {
        "path": "/a",
        "before": 1,
        "after": None,
        "absent": "after",
    }
    for entry in diff({"a": 1, "b": None}, {"b": None, "c": None}):
        assert DiffEntry.from_json(json.loads(json.dumps(entry.to_json()))) == entry


def test_it_reads_an_entry_that_leaves_the_missing_side_out() -> None:
    assert DiffEntry.from_json({"path": "/a", "after": None}) == DiffEntry("/a", MISSING, None)
    assert DiffEntry.from_json({"path": "/a", "before": 1}) == DiffEntry("/a", 1, MISSING)


def test_it_names_the_kind_of_each_entry() -> None:
    assert [e.kind for e in diff({"a": 1, "b": 2}, {"a": 3, "c": 4})] == [
        "changed",
        "removed",
        "added",
    ]


def test_it_has_a_missing_sentinel_that_stays_itself() -> None:
    assert repr(MISSING) == "MISSING"
    assert not MISSING
    assert copy.deepcopy(MISSING) is MISSING
    assert pickle.loads(pickle.dumps(MISSING)) is MISSING  # noqa: S301 (our own bytes)


def test_it_keeps_entries_immutable() -> None:
    entry = DiffEntry("/a", 1, 2)
    with pytest.raises(AttributeError):
        entry.path = "/b"  # type: ignore[misc]


# ------------------------------------------------------------------ apply_diff


def test_it_never_mutates_the_input_or_shares_with_it() -> None:
    a = {"xs": [1, 2, 3], "o": {"k": [1]}, "keep": {"deep": [1]}}
    b = {"xs": [1], "o": {"k": [1, 2]}, "keep": {"deep": [1]}, "new": {"n": 1}}
    snapshot = copy.deepcopy(a)
    entries = diff(a, b)
    result = apply_diff(a, entries)
    assert same(result, b)
    assert same(a, snapshot)
    assert result["keep"] is not a["keep"]
    assert result["new"] is not entries[-1].after


def test_it_applies_array_removals_from_the_end_whatever_their_order() -> None:
    a = [0, 1, 2, 3, 4]
    entries = [
        DiffEntry("/2", 2, MISSING),
        DiffEntry("/3", 3, MISSING),
        DiffEntry("/4", 4, MISSING),
    ]
    assert apply_diff(a, entries) == [0, 1]
    assert apply_diff(a, list(reversed(entries))) == [0, 1]


def test_it_applies_additions_with_the_append_token() -> None:
    assert apply_diff([1], [DiffEntry("/-", MISSING, 2)]) == [1, 2]


def test_it_refuses_entries_that_do_not_resolve() -> None:
    with pytest.raises(PointerError):
        apply_diff({"a": 1}, [DiffEntry("/b/c", 1, 2)])
    with pytest.raises(PointerError):
        apply_diff([1], [DiffEntry("/5", MISSING, 2)])
    with pytest.raises(PointerError):
        apply_diff([1], [DiffEntry("/1", 1, MISSING)])
    with pytest.raises(PointerError):
        apply_diff({"a": 1}, [DiffEntry("", {"a": 1}, MISSING)])


# ------------------------------------------------------------------ pointers


def test_it_escapes_and_unescapes_tokens() -> None:
    assert pointer_escape("a/b") == "a~1b"
    assert pointer_escape("m~n") == "m~0n"
    assert pointer_escape("~1") == "~01"
    assert pointer_unescape("~01") == "~1"
    assert pointer_join([]) == ""
    assert pointer_join(["a/b", 0, "m~n", ""]) == "/a~1b/0/m~0n/"
    assert pointer_split("/a~1b/0/m~0n/") == ["a/b", "0", "m~n", ""]


def test_it_resolves_the_rfc_6901_examples() -> None:
    doc = {
        "foo": ["bar", "baz"],
        "": 0,
        "a/b": 1,
        "c%d": 2,
        "e^f": 3,
        "g|h": 4,
        "i\\j": 5,
        'k"l': 6,
        " ": 7,
        "m~n": 8,
    }
    expected = {
        "": doc,
        "/foo": ["bar", "baz"],
        "/foo/0": "bar",
        "/": 0,
        "/a~1b": 1,
        "/c%d": 2,
        "/e^f": 3,
        "/g|h": 4,
        "/i\\j": 5,
        '/k"l': 6,
        "/ ": 7,
        "/m~0n": 8,
    }
    for pointer, value in expected.items():
        assert pointer_get(doc, pointer) == value


@pytest.mark.parametrize(
    "pointer", ["foo", "/nope", "/foo/2", "/foo/-", "/foo/01", "/foo/x", "/foo/0/x", "/~2", "/m~"]
)
def test_it_raises_pointer_error_for_unresolvable_pointers(pointer: str) -> None:
    doc = {"foo": ["bar", "baz"], "m~": 1}
    with pytest.raises(PointerError):
        pointer_get(doc, pointer)
    with pytest.raises(KeyError):
        pointer_get(doc, pointer)
    with pytest.raises(IndexError):
        pointer_get(doc, pointer)


# ------------------------------------------------------------------ laziness and purity


def test_it_stops_walking_at_the_first_divergence() -> None:
    a = {"first": 1, "rest": list(range(1000))}
    b = {"first": 2, "rest": list(range(1000, 2000))}
    iterator = iter_diff(a, b)
    assert next(iterator) == DiffEntry("/first", 1, 2)
    assert first_divergence(a, b) == DiffEntry("/first", 1, 2)
    assert len(diff(a, b)) == 1001


def test_it_is_importable_without_django() -> None:
    code = (
        "import sys, core.replay.diff; "
        "assert not any(m.split('.')[0] == 'django' for m in sys.modules), 'django imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# ------------------------------------------------------------------ properties

keys = st.text(alphabet=st.sampled_from("ab/~0 é"), max_size=4)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 1.0, -1.0])
    | st.text(max_size=5)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


@st.composite
def related_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    """A value and a mutated copy of it, so diffs are small and sit deep inside."""
    a = draw(json_values)

    def mutate(value: Any) -> Any:
        choice = draw(st.integers(min_value=0, max_value=9))
        if choice == 0:
            return draw(json_values)
        if isinstance(value, dict):
            out = {k: mutate(v) for k, v in value.items() if draw(st.integers(0, 7))}
            for key in draw(st.lists(keys, max_size=2)):
                out[key] = draw(json_values)
            if draw(st.booleans()):  # same items, another insertion order
                out = dict(reversed(list(out.items())))
            return out
        if isinstance(value, list):
            out_list = [mutate(v) for v in value]
            cut = draw(st.integers(min_value=0, max_value=len(out_list)))
            if draw(st.booleans()):
                out_list = out_list[:cut]
            return out_list + draw(st.lists(json_values, max_size=2))
        if choice == 1 and isinstance(value, int | float):
            return draw(st.sampled_from([int, float, bool]))(value) if math.isfinite(value) else 0
        return value

    return a, mutate(a)


pairs = st.tuples(json_values, json_values) | related_pairs()


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_it_rebuilds_b_by_applying_the_diff_to_a(pair: tuple[Any, Any]) -> None:
    a, b = pair
    snapshot = copy.deepcopy(a)
    entries = diff(a, b)
    assert same(apply_diff(a, entries), b)
    assert same(a, snapshot)
    assert (entries == []) == same(a, b) == strict_equal(a, b)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_it_reports_the_values_found_at_each_path(pair: tuple[Any, Any]) -> None:
    a, b = pair
    for entry in diff(a, b):
        for doc, side in ((a, entry.before), (b, entry.after)):
            if side is MISSING:
                with pytest.raises(PointerError):
                    pointer_get(doc, entry.path)
            else:
                assert same(pointer_get(doc, entry.path), side)


@settings(max_examples=300)
@given(json_values)
def test_it_finds_no_difference_between_a_value_and_itself_or_its_copy(a: Any) -> None:
    assert diff(a, a) == []
    assert diff(a, copy.deepcopy(a)) == []


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_it_returns_the_first_entry_as_the_first_divergence(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert first_divergence(a, b) == (diff(a, b) or [None])[0]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_it_is_deterministic_and_serialisable(pair: tuple[Any, Any]) -> None:
    a, b = pair
    entries = diff(a, b)
    assert entries == diff(copy.deepcopy(a), copy.deepcopy(b))
    for entry in entries:
        assert DiffEntry.from_json(entry.to_json()) == entry


@settings(max_examples=300)
@given(st.lists(st.one_of(keys, st.integers(min_value=0, max_value=99)), max_size=6))
def test_it_round_trips_pointer_tokens(parts: list[str | int]) -> None:
    assert pointer_split(pointer_join(parts)) == [str(p) for p in parts]
