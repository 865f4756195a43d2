"""Byte-exact vectors and properties for the canonical JSON profiles (core/canonical.py).

No Django needed: the module under test is pure.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import enum
import hashlib
import json
import math
import os
import random
import struct
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import canonical
from core.canonical import (
    PROFILES,
    CanonicalError,
    contextos,
    es_number_to_string,
    jcs,
    js_sorted,
    mace_v1,
    mace_v1_hash,
    mace_v1_reference,
    python_sorted,
    sha256_prefixed,
)
from tests.published import node_or_skip

NAN = float("nan")
INF = float("inf")


def _f64(bits: int) -> float:
    return struct.unpack(">d", struct.pack(">Q", bits))[0]


# ---------------------------------------------------------------------------------------------
# RFC 8785 vectors
# ---------------------------------------------------------------------------------------------

# RFC 8785 Appendix B: IEEE-754 bit pattern -> JSON number text.
RFC8785_NUMBERS = [
    (0x0000000000000000, "0"),
    (0x8000000000000000, "0"),
    (0x0000000000000001, "5e-324"),
    (0x8000000000000001, "-5e-324"),
    (0x7FEFFFFFFFFFFFFF, "1.7976931348623157e+308"),
    (0xFFEFFFFFFFFFFFFF, "-1.7976931348623157e+308"),
    (0x4340000000000000, "9007199254740992"),
    (0xC340000000000000, "-9007199254740992"),
    (0x4430000000000000, "295147905179352830000"),
    (0x44B52D02C7E14AF5, "9.999999999999997e+22"),
    (0x44B52D02C7E14AF6, "1e+23"),
    (0x44B52D02C7E14AF7, "1.0000000000000001e+23"),
    (0x444B1AE4D6E2EF4E, "999999999999999700000"),
    (0x444B1AE4D6E2EF4F, "999999999999999900000"),
    (0x444B1AE4D6E2EF50, "1e+21"),
    (0x3EB0C6F7A0B5ED8C, "9.999999999999997e-7"),
    (0x3EB0C6F7A0B5ED8D, "0.000001"),
    (0x41B3DE4355555553, "333333333.3333332"),
    (0x41B3DE4355555554, "333333333.33333325"),
    (0x41B3DE4355555555, "333333333.3333333"),
    (0x41B3DE4355555556, "333333333.3333334"),
    (0x41B3DE4355555557, "333333333.33333343"),
    (0xBECBF647612F3696, "-0.0000033333333333333333"),
    (0x43143FF3C1CB0959, "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), RFC8785_NUMBERS, ids=[t for _, t in RFC8785_NUMBERS])
def test_it_writes_rfc8785_appendix_b_numbers(bits: int, text: str) -> None:
    value = _f64(bits)
    assert es_number_to_string(value) == text
    assert jcs(value) == text.encode()
    assert jcs([value]) == f"[{text}]".encode()
    assert js_sorted({"n": value}) == f'{{"n":{text}}}'.encode()
    assert contextos({"n": value}) == f'{{"n":{text}}}'.encode()


@pytest.mark.parametrize("bits", [0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000])
def test_it_refuses_rfc8785_appendix_b_nan_and_infinity_in_jcs(bits: int) -> None:
    with pytest.raises(CanonicalError):
        jcs({"n": _f64(bits)})
    with pytest.raises(CanonicalError):
        es_number_to_string(_f64(bits))


def test_it_canonicalises_the_rfc8785_section_3_2_2_example() -> None:
    value = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    assert jcs(value) == (
        b'{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        b'"string":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


RFC8785_SORT_INPUT = {
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\U0001f600": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis",
}


def test_it_sorts_the_rfc8785_section_3_2_3_example_by_utf16_code_units() -> None:
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    ).encode()
    assert jcs(RFC8785_SORT_INPUT) == expected
    # contextos writes the sorted list's order; js-sorted moves the array index "1" first.
    assert contextos(RFC8785_SORT_INPUT) == expected
    assert (
        js_sorted(RFC8785_SORT_INPUT)
        == (
            '{"1":"One","\\r":"Carriage Return","\u0080":"Control",'
            '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
            '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
        ).encode()
    )
    # Python sorts by code point: U+FB33 comes before U+1F600.
    assert list(json.loads(mace_v1(RFC8785_SORT_INPUT)))[-2:] == ["\ufb33", "\U0001f600"]


def test_it_refuses_what_jcs_cannot_represent() -> None:
    assert jcs(2**53) == b"9007199254740992"
    assert jcs(-(2**53)) == b"-9007199254740992"
    for bad in (2**53 + 1, -(2**53) - 1, 10**30, NAN, INF, -INF, "\ud800", {"\udc00": 1}):
        with pytest.raises(CanonicalError):
            jcs(bad)
    with pytest.raises(CanonicalError):
        jcs({1: "non-string key"})
    with pytest.raises(CanonicalError):
        jcs(Decimal("1"))
    assert jcs(1e30) == b"1e+30"  # large *floats* are fine
    assert jcs(-0.0) == b"0"
    assert jcs((1, "a")) == b'[1,"a"]'
    assert jcs("\ud83d\ude00") == '"\U0001f600"'.encode()  # a surrogate pair is one character


# ---------------------------------------------------------------------------------------------
# ECMAScript number and string formatting (js-sorted, contextos)
# ---------------------------------------------------------------------------------------------

ES_NUMBERS = [
    (1.0, "1"),
    (-0.0, "0"),
    (0.0, "0"),
    (1e21, "1e+21"),
    (1e-7, "1e-7"),
    (123456789012345680000.0, "123456789012345680000"),
    (0.000001, "0.000001"),
    (1.5e-7, "1.5e-7"),
    (-1e-6, "-0.000001"),
    (0.1, "0.1"),
    (100.0, "100"),
    (1e20, "100000000000000000000"),
    (1.25e21, "1.25e+21"),
    (123.456, "123.456"),
    (5e-324, "5e-324"),
    (2.5e-5, "0.000025"),
    (1e16, "10000000000000000"),
]


@pytest.mark.parametrize(("value", "text"), ES_NUMBERS, ids=[t for _, t in ES_NUMBERS])
def test_it_formats_numbers_like_ecmascript(value: float, text: str) -> None:
    assert es_number_to_string(value) == text
    assert js_sorted(value) == text.encode()


def test_it_converts_integers_like_json_parse_in_js_profiles() -> None:
    assert js_sorted(2**53 + 1) == b"9007199254740992"
    assert js_sorted(123456789012345678901) == b"123456789012345680000"
    assert js_sorted(10**21) == b"1e+21"
    assert js_sorted(-(10**22)) == b"-1e+22"
    assert js_sorted(10**400) == b"null"  # JSON.parse gives Infinity
    assert js_sorted([NAN, INF, -INF]) == b"[null,null,null]"
    assert contextos({"a": NAN}) == b'{"a":null}'
    assert js_sorted([True, False, None, 7]) == b"[true,false,null,7]"


def test_it_escapes_strings_like_json_stringify() -> None:
    s = '\x00\x08\t\n\x0b\x0c\r\x1b\x1f "\\/\x7f\u2028\u00e9\U0001f600'
    expected = '"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001b\\u001f \\"\\\\/\x7f\u2028\u00e9\U0001f600"'
    assert js_sorted(s) == expected.encode()
    assert jcs(s) == expected.encode()
    # Lone surrogates are escaped with lower-case hex; a pair is one astral character.
    assert js_sorted("a\ud800b\udfffc") == b'"a\\ud800b\\udfffc"'
    assert js_sorted("\ud83d\ude00") == '"\U0001f600"'.encode()
    assert js_sorted("\ude00\ud83d") == b'"\\ude00\\ud83d"'


def test_it_sorts_js_keys_by_utf16_code_units_not_code_points() -> None:
    value = {"\uffff": 1, "\U0001f600": 2}
    assert js_sorted(value) == '{"\U0001f600":2,"\uffff":1}'.encode()
    assert jcs(value) == '{"\U0001f600":2,"\uffff":1}'.encode()
    assert mace_v1(value) == '{"\uffff":1,"\U0001f600":2}'.encode()
    assert python_sorted(value) == b'{"\\uffff":1,"\\ud83d\\ude00":2}'


def test_it_treats_a_spelt_out_surrogate_pair_key_as_the_astral_key() -> None:
    assert js_sorted({"\ud83d\ude00": 1, "\uffff": 2}) == '{"\U0001f600":1,"\uffff":2}'.encode()
    assert contextos({"\U0001f600": 1, "n": {"\ud83d\ude00": 2, "x": 3}}) == (
        '{"n":{"\U0001f600":2},"\U0001f600":1}'.encode()
    )
    for fn in (js_sorted, contextos, jcs):
        with pytest.raises(CanonicalError):
            fn({"\U0001f600": 1, "\ud83d\ude00": 2})


def test_it_puts_array_index_keys_first_like_a_js_object() -> None:
    assert js_sorted({"b": 1, "10": 2, "2": 3, "a": 4}) == b'{"2":3,"10":2,"a":4,"b":1}'
    assert js_sorted({"4294967295": 1, "4294967294": 2, "01": 3, "1": 4, "b": 5}) == (
        b'{"1":4,"4294967294":2,"01":3,"4294967295":1,"b":5}'
    )
    assert js_sorted({"-1": 1, "1.0": 2, "0": 3, "\uff11": 4}) == (
        '{"0":3,"-1":1,"1.0":2,"\uff11":4}'.encode()
    )
    # JCS is a plain sort: no index-first ordering.
    assert jcs({"b": 1, "10": 2, "2": 3, "a": 4}) == b'{"10":2,"2":3,"a":4,"b":1}'


def test_it_sorts_nested_values_in_js_sorted() -> None:
    value = {"z": [{"b": 1, "a": [3, {"d": 1, "c": 2}]}], "a": {"y": None, "x": "\u00e9"}}
    assert js_sorted(value) == (
        '{"a":{"x":"\u00e9","y":null},"z":[{"a":[3,{"c":2,"d":1}],"b":1}]}'.encode()
    )


def test_it_drops_proto_keys_like_js_assignment_does() -> None:
    assert js_sorted({"__proto__": {"x": 1}, "a": 1, "A": 2}) == b'{"A":2,"a":1}'
    assert js_sorted({"n": {"__proto__": None}}) == b'{"n":{}}'


def test_it_refuses_non_json_values_in_js_profiles() -> None:
    for fn in (js_sorted, contextos, jcs):
        with pytest.raises(CanonicalError):
            fn({"a": {1, 2}})
        with pytest.raises(CanonicalError):
            fn({"a": {2: "int key"}})


# ---------------------------------------------------------------------------------------------
# contextos: JSON.stringify(obj, Object.keys(obj).sort())
# ---------------------------------------------------------------------------------------------


def test_it_applies_the_contextos_allow_list_at_every_level() -> None:
    assert contextos({"b": {"x": 1, "a": 2}, "a": 1}) == b'{"a":1,"b":{"a":2}}'
    assert contextos({"a": [{"a": 1, "b": 2, "c": 3}, [{"b": 1, "z": 0}]], "b": {"c": 1}}) == (
        b'{"a":[{"a":1,"b":2},[{"b":1}]],"b":{}}'
    )
    # Output order is the sorted list's order: no array-index-first rule.
    assert contextos({"b": 1, "10": 2, "2": 3}) == b'{"10":2,"2":3,"b":1}'
    # The list fixes the order inside nested objects too.
    assert contextos({"b": {"b": 1, "a": 2}, "a": 0}) == b'{"a":0,"b":{"a":2,"b":1}}'


def test_it_handles_contextos_non_objects_like_object_keys_does() -> None:
    assert contextos([{"0": 1, "a": 2}, {"1": 3}]) == b'[{"0":1},{"1":3}]'
    assert contextos([1, "x", None]) == b'[1,"x",null]'
    assert contextos("ab") == b'"ab"'
    assert contextos(5) == b"5"
    assert contextos(1e21) == b"1e+21"
    assert contextos(True) == b"true"
    with pytest.raises(CanonicalError):
        contextos(None)


def test_it_reproduces_the_contextos_proto_quirk() -> None:
    # Checked against Node 20: Get(obj, "__proto__") reaches Object.prototype.
    assert contextos({"__proto__": 1, "a": {}}) == (
        b'{"__proto__":1,"a":{"__proto__":{"__proto__":null}}}'
    )
    assert contextos({"__proto__": {"x": 1}, "a": 1, "A": 2}) == (
        b'{"A":2,"__proto__":{"__proto__":{"__proto__":null}},"a":1}'
    )


# ---------------------------------------------------------------------------------------------
# mace-v1
# ---------------------------------------------------------------------------------------------

MACE_VECTORS: list[tuple[Any, bytes]] = [
    ({"\ufb01": "\ufb01"}, '{"\ufb01":"fi"}'.encode()),
    ({"x": 0.1 + 0.2}, b'{"x":0.3}'),
    ({"x": 1e-10}, b'{"x":0.0}'),
    ({"x": -1e-10}, b'{"x":-0.0}'),
    ({"x": 1.23456789012}, b'{"x":1.23456789}'),
    ({"x": 1e16}, b'{"x":1e+16}'),
    ({"x": 1e-5}, b'{"x":1e-05}'),
    ({"x": 1.5e-7}, b'{"x":1.5e-07}'),
    ({"x": 1e15}, b'{"x":1000000000000000.0}'),
    ({"x": 2.0}, b'{"x":2.0}'),
    # Rounded from the exact binary value: 5e-10 is 5.00000000000000003e-10, 1.5e-9 is
    # 1.49999999999999999e-9, so both become 1e-09 (a decimal half-even would not).
    ({"x": 5e-10}, b'{"x":1e-09}'),
    ({"x": 1.5e-9}, b'{"x":1e-09}'),
    (
        {"b": True, "i": 7, "n": None, "big": 2**70},
        b'{"b":true,"big":1180591620717411303424,"i":7,"n":null}',
    ),
    ({"s": '\x00\x1f\x7f\u2028"\\'}, '{"s":"\\u0000\\u001f\x7f\u2028\\"\\\\"}'.encode()),
    (
        {"b": 1, "a": [1, "\u00e9", (2.5,)], "A": {}},
        '{"A":{},"a":[1,"e\u0301",[2.5]],"b":1}'.encode(),
    ),
    ({"\uffff": 1, "\U0001f600": 2, "~": 3}, '{"~":3,"\uffff":1,"\U0001f600":2}'.encode()),
    ("\u2460", b'"1"'),
    ([], b"[]"),
]


@pytest.mark.parametrize(("value", "expected"), MACE_VECTORS)
def test_it_writes_mace_v1_vectors(value: Any, expected: bytes) -> None:
    assert mace_v1(value) == expected
    assert mace_v1_reference(value) == expected


@pytest.mark.parametrize("bad", [NAN, INF, -INF, {"a": [1, NAN]}, "\ud800", {"a": object()}])
def test_it_refuses_what_mace_v1_cannot_represent(bad: Any) -> None:
    with pytest.raises(CanonicalError):
        mace_v1(bad)
    with pytest.raises(CanonicalError):
        mace_v1_reference(bad)


def test_it_hashes_mace_v1_with_a_sha256_prefix() -> None:
    value = {"seq": 1, "type": "start", "payload": {"p": 0.5}}
    body = b'{"payload":{"p":0.5},"seq":1,"type":"start"}'
    assert mace_v1(value) == body
    assert mace_v1_hash(value) == "sha256:" + hashlib.sha256(body).hexdigest()
    assert sha256_prefixed(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_it_serves_plain_json_values_from_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [v for v, _ in MACE_VECTORS if not isinstance(v, dict) or "big" not in v]
    expected = [mace_v1(v) for v in fast]

    def refuse(obj: Any) -> bytes:
        raise AssertionError(f"fell back to the reference for {obj!r}")

    monkeypatch.setattr(canonical, "mace_v1_reference", refuse)
    assert [mace_v1(v) for v in fast] == expected
    assert (
        mace_v1({"a": 2**64 - 1, "b": -(2**63)})
        == b'{"a":18446744073709551615,"b":-9223372036854775808}'
    )
    with pytest.raises(CanonicalError):
        mace_v1({"a": [0.5, NAN]})


def test_it_falls_back_to_the_reference_for_what_orjson_would_change() -> None:
    class Key(str):
        pass

    class Num(float):
        pass

    value = {Key("b"): Num(0.1 + 0.2), "a": [2**64, -(2**63) - 1], 3: "x"}
    with pytest.raises(CanonicalError):  # json.dumps cannot sort str and int keys together
        mace_v1(value)
    del value[3]
    assert mace_v1(value) == b'{"a":[18446744073709551616,-9223372036854775809],"b":0.3}'
    assert mace_v1({1: "a", 0: "\u00bd"}) == '{"0":"1\u20442","1":"a"}'.encode()
    deep: Any = 1
    for _ in range(300):  # deeper than orjson's recursion limit
        deep = [deep]
    assert mace_v1(deep) == b"[" * 300 + b"1" + b"]" * 300


def test_it_escapes_every_code_point_in_orjson_exactly_as_json_does() -> None:
    # The mace-v1 fast path relies on this for every string it hands to orjson.
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert orjson.dumps(every) == json.dumps(every, ensure_ascii=False).encode()


@settings(max_examples=3000)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_it_rounds_with_round_9_exactly_like_the_fstring_definition(x: float) -> None:
    a, b = round(x, 9), float(f"{x:.9f}")
    assert struct.pack(">d", a) == struct.pack(">d", b) or (math.isnan(a) and math.isnan(b))


# ---------------------------------------------------------------------------------------------
# python-sorted (Paxman stable_dumps)
# ---------------------------------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: Decimal
    tags: frozenset[str]


def test_it_writes_python_sorted_like_json_dumps() -> None:
    value = {"\u00e9": "\u00e9", "a": 1e-7, "b": 1e16, "c": 1.0, "d": NAN, "e": [INF, -INF]}
    assert python_sorted(value) == (
        b'{"a":1e-07,"b":1e+16,"c":1.0,"d":NaN,"e":[Infinity,-Infinity],"\\u00e9":"\\u00e9"}'
    )
    assert python_sorted("\ud800") == b'"\\ud800"'


def test_it_converts_paxman_types_in_python_sorted() -> None:
    value = {
        "dec": Decimal("1.10"),
        "when": dt.datetime(2026, 5, 9, 12, 30, tzinfo=dt.UTC),
        "day": dt.date(2026, 5, 9),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "set": {"b", "a", "c"},
        "mixed": {1, "a"},
        "enum": Colour.RED,
        "point": Point(Decimal("2"), frozenset({"y", "x"})),
        "raw": b"\x00\xff",
    }
    assert python_sorted(value) == (
        b'{"day":"2026-05-09","dec":"1.10","enum":"red","id":"12345678-1234-5678-1234-'
        b'567812345678","mixed":["a",1],"point":{"tags":["x","y"],"x":"2"},"raw":"00ff",'
        b'"set":["a","b","c"],"when":"2026-05-09T12:30:00+00:00"}'
    )
    with pytest.raises(CanonicalError):
        python_sorted({"a": object()})
    with pytest.raises(CanonicalError):
        python_sorted({1: 1, "a": 2})


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=()), max_size=12)
_keys = st.one_of(
    _text,
    st.sampled_from(["a", "b", "0", "1", "2", "10", "01", "4294967294", "4294967295", "\u00e9"]),
    st.integers(0, 2**32).map(str),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e-3, 1e-3),
    st.floats(-1e20, 1e20),
    _text,
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_keys, inner, max_size=6),
    ),
    max_leaves=25,
)


def _outcome(fn: Any, value: Any) -> bytes | str:
    try:
        return fn(value)
    except CanonicalError:
        return "CanonicalError"


def _reorder(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = [(k, _reorder(v, rnd)) for k, v in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_reorder(v, rnd) for v in value]
    return value


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_it_mace_v1_fast_path_equals_the_reference_definition(value: Any) -> None:
    assert _outcome(mace_v1, value) == _outcome(mace_v1_reference, value)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.randoms(use_true_random=False))
def test_it_never_changes_bytes_when_dict_keys_are_reordered(
    value: Any, rnd: random.Random
) -> None:
    shuffled = _reorder(value, rnd)
    for fn in PROFILES.values():
        assert _outcome(fn, shuffled) == _outcome(fn, value)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_it_is_deterministic_for_copies_of_a_value(value: Any) -> None:
    for fn in PROFILES.values():
        assert _outcome(fn, copy.deepcopy(value)) == _outcome(fn, value)


def test_it_is_deterministic_across_processes_and_hash_seeds() -> None:
    script = (
        "import json; from core.canonical import PROFILES, sha256_prefixed\n"
        "v = {'s': ['k%d' % i for i in range(40)], 'n': 0.1, 'u': '\\u00e9', '9': [1, {'b': 2}]}\n"
        "out = {n: sha256_prefixed(f(v)) for n, f in PROFILES.items()}\n"
        "v['s'] = set(v['s']); out['python-sorted-set'] = sha256_prefixed(\n"
        "    PROFILES['python-sorted'](v))\n"
        "print(json.dumps(out, sort_keys=True))\n"
    )
    root = Path(canonical.__file__).resolve().parent.parent
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        run = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1
    hashes = json.loads(outputs.pop())
    assert len(set(hashes.values())) >= 4  # profiles really differ on this value


_ijson_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
ijson_values = st.recursive(
    _ijson_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=6), inner, max_size=6)
    ),
    max_leaves=25,
)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(ijson_values)
def test_it_jcs_parses_back_to_an_equal_value_and_matches_the_rfc8785_package(
    value: Any,
) -> None:
    out = jcs(value)
    assert json.loads(out, parse_int=float) == value  # JCS numbers are doubles
    assert out == rfc8785.dumps(value)


@settings(max_examples=3000)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_it_formats_every_double_like_an_independent_es_implementation(x: float) -> None:
    text = es_number_to_string(x)
    assert text.encode() == rfc8785.dumps(x)
    assert float(text) == x


# ---------------------------------------------------------------------------------------------
# Differential check against a real JavaScript engine (skipped where Node is not installed)
# ---------------------------------------------------------------------------------------------

_NODE_SCRIPT = r"""
const sort = (v) => Array.isArray(v) ? v.map(sort)
  : v && typeof v === "object"
    ? Object.keys(v).sort().reduce((o, k) => { o[k] = sort(v[k]); return o }, {})
    : v;
const values = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = values.map((v) => {
  let c;
  try { c = JSON.stringify(v, Object.keys(v).sort()) } catch (e) { c = null }
  return [JSON.stringify(sort(v)), c];
});
process.stdout.write(JSON.stringify(out));
"""

_NODE_KEYS = [
    "a",
    "b",
    "B",
    "0",
    "1",
    "2",
    "10",
    "01",
    "-1",
    "4294967294",
    "4294967295",
    "__proto__",
    "\u00e9",
    "\uffff",
    "\U0001f600",
    "\ufb33",
    "\r",
    "\ud800",
    "",
]


def _random_value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth < 3 and roll < 0.25:
        keys = rnd.sample(_NODE_KEYS, rnd.randint(0, 6))
        return {k: _random_value(rnd, depth + 1) for k in keys}
    if depth < 3 and roll < 0.4:
        return [_random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    kind = rnd.randrange(7)
    if kind == 0:
        while True:
            f = _f64(rnd.getrandbits(64))
            if math.isfinite(f):
                return f
    if kind == 1:
        return rnd.choice([0.1, 1e21, 1e-7, 5e-324, -0.0, 123456789012345680000.0, 1e-6])
    if kind == 2:
        return rnd.choice([2**53 + 1, 10**21, -(2**60), 10**400, 7, 0])
    if kind == 3:
        return "".join(
            rnd.choice(
                [
                    "a",
                    "\x00",
                    "\x1f",
                    "\x7f",
                    "\ud800",
                    "\udc00",
                    "\ud83d",
                    "\ude00",
                    "\u2028",
                    '"',
                    "\\",
                    "\u00e9",
                ]
            )
            for _ in range(rnd.randint(0, 6))
        )
    return rnd.choice([None, True, False, "x"])


def test_it_matches_node_for_js_sorted_and_contextos() -> None:
    node = node_or_skip()
    rnd = random.Random(8785)
    values = [_random_value(rnd) for _ in range(3000)]
    values += [{"b": {"x": 1, "a": 2}, "a": 1}, {"__proto__": 1, "a": {}}, [{"0": 1, "a": 2}]]
    run = subprocess.run(
        [node, "-e", _NODE_SCRIPT],
        input=json.dumps(values),  # ensure_ascii: lone surrogates travel as \udxxx
        capture_output=True,
        text=True,
        check=True,
    )
    results = json.loads(run.stdout)
    for value, (js_text, ctx_text) in zip(values, results, strict=True):
        assert js_sorted(value) == js_text.encode(), value
        if ctx_text is None:
            with pytest.raises(CanonicalError):
                contextos(value)
        else:
            assert contextos(value) == ctx_text.encode(), value


def test_it_registers_every_profile() -> None:
    expected = {
        "mace-v1": mace_v1,
        "python-sorted": python_sorted,
        "js-sorted": js_sorted,
        "contextos": contextos,
        "jcs": jcs,
    }
    assert expected == PROFILES
