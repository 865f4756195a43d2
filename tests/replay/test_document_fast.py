"""The whole-document reader's parse (``jsonstrict.loads_document``, issue 23 item 4) gives
exactly what ``loads_strict`` and ``text_shape_is_bounded`` give, on every text: the same
value (same types, same doubles to the bit) or the same refusal (code and message). Its fast
path (``orjson``, then a colon count for duplicate keys) declines where it could differ and
the strict decoder decides; a recorded trace takes it.
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats import default_registry, jsonstrict, native
from core.formats.jsonstrict import (
    NOT_PROVEN,
    loads_document,
    loads_strict,
    text_shape_is_bounded,
)
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_signer

DEPTH, STRING = 64, 16 * 1024**2


def tagged(value: Any) -> Any:
    """`value` with every scalar's type spelled out and doubles as their bits (1 == 1.0 ==
    True and 0.0 == -0.0 in Python; not here)."""
    if type(value) is dict:
        return ("dict", [(k, tagged(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [tagged(v) for v in value])
    if type(value) is float:
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


def outcome(call: Any) -> Any:
    try:
        value = call()
    except ReplayError as exc:
        return ("refused", exc.code, exc.message)
    return ("value", tagged(value))


def outcome2(call: Any) -> Any:
    """`outcome` of a call that gives a value and whether its shape is bounded."""
    try:
        value, bounded = call()
    except ReplayError as exc:
        return ("refused", exc.code, exc.message)
    return ("value", tagged(value), bounded)


def strict(data: bytes, **limits: int) -> Any:
    depth, string = limits.pop("max_depth", DEPTH), limits.pop("max_string", STRING)

    def both() -> Any:
        value = loads_strict(data, where="trace", **limits)
        return value, text_shape_is_bounded(data, max_depth=depth, max_string=string)

    return outcome2(both)


def document(data: bytes, **limits: int) -> Any:
    depth, string = limits.pop("max_depth", DEPTH), limits.pop("max_string", STRING)
    return outcome2(
        lambda: loads_document(data, where="trace", max_depth=depth, max_string=string, **limits)
    )


def fast(data: bytes) -> Any:
    """What the fast path alone gives (NOT_PROVEN when it declines)."""
    return jsonstrict._parse_document(data, jsonstrict._outside_strings(data))


def same(data: bytes, **limits: int) -> Any:
    want = strict(data, **dict(limits))
    assert document(data, **dict(limits)) == want
    return want


def test_the_installed_orjson_refuses_lone_surrogates_so_the_fast_path_is_on():
    assert jsonstrict.orjson_refuses_lone_surrogates()
    assert jsonstrict.FAST_DOCUMENT


# --- a recorded trace takes the fast path --------------------------------------------------


def recorded() -> bytes:
    doc = record(
        RecordOptions(seed="fast-doc", iterations=3, filler_events=200),
        default_registry(),
        golden_signer(),
    )
    return native.dumps_document(doc)


def test_a_recorded_document_takes_the_fast_path_with_the_strict_value():
    data = recorded()
    assert b"e-05" in data or b"e-0" in data  # floats orjson would spell otherwise
    value = fast(data)
    assert value is not NOT_PROVEN
    assert tagged(value) == tagged(loads_strict(data, where="trace"))
    assert same(data)[0] == "value"


def test_the_reader_refuses_a_duplicate_key_in_a_document_as_ever():
    data = recorded().replace(b'  "trace_id": ', b'  "trace_id": "x",\n  "trace_id": ', 1)
    assert fast(data) is NOT_PROVEN
    with pytest.raises(ReplayError) as caught:
        native.open_native(io.BytesIO(data), "t.trace.json")
    assert (caught.value.code, caught.value.message) == (
        MALFORMED_TRACE,
        "trace: duplicate key 'trace_id': a hash over duplicate keys is ambiguous",
    )


# --- hostile and edge texts: declined or refused exactly as strictly -----------------------

BASE = b'{"a": [1, 2.5, "s:t"], "b": {"c": null, "d": true}}'
HOSTILE = {
    "duplicate key": b'{"a": 1, "a": 1}',
    "duplicate key, nested": b'{"x": {"a": {"k": 1}, "a": {"k": 1}}}',
    "duplicate key whose value held colons": b'{"a": "1:2", "a": "12", "b": "::"}',
    "duplicate key after a dropped colon": b'{"a": {"x:y": 1}, "a": 2, "c:": 3, "d": 4}',
    "duplicate key spelled with an escape": b'{"a": 1, "\\u0061": 2}',
    "colon escaped in a string": b'{"a\\u003a": 1, "a:": 2}',
    "colon escaped, no duplicate": b'{"a\\u003ab": 1}',
    "NaN": b'{"x": NaN}',
    "Infinity": b'{"x": -Infinity}',
    "out of range": b'{"x": [1, 1e400]}',
    "out of range, negative": b'{"x": -1e400}',
    "underflow": b'{"x": 1e-400}',
    "integer past 64 bits": b'{"x": 18446744073709551616}',
    "integer just within 64 bits": b'{"x": 18446744073709551615}',
    "negative integer past 64 bits": b'{"x": -9223372036854775809}',
    "19-digit integer within 64 bits": b'{"x": 9223372036854775807}',
    "huge integer": b'{"x": ' + b"9" * 5000 + b"}",
    "long integer part": b'{"x": 12345678901234567890.5}',
    "long exponent": b'{"x": 1e-0000000000000000000001}',
    "long fraction": b'{"x": 0.1000000000000000055511151231257827021181583404541015625}',
    "byte-order mark": b"\xef\xbb\xbf" + BASE,
    "invalid UTF-8": b'{"x": "\xff"}',
    "overlong UTF-8": b'{"x": "\xc0\xba"}',
    "UTF-8 of a surrogate": b'{"x": "\xed\xa0\x80"}',
    "UTF-8 past U+10FFFF": b'{"x": "\xf4\x90\x80\x80"}',
    "truncated UTF-8": b'{"x": "\xe2\x82"}',
    "lone surrogate": b'{"x": "\\ud800"}',
    "lone low surrogate": b'{"x": "a\\udc00"}',
    "reversed pair": b'{"x": "\\udc00\\ud800"}',
    "surrogate pair": b'{"x": "\\ud83d\\ude00"}',
    "control character": b'{"x": "a\x01"}',
    "escaped NUL": b'{"x": "\\u0000"}',
    "bad escape": b'{"x": "\\x41"}',
    "short unicode escape": b'{"x": "\\u12"}',
    "trailing data": BASE + b" {}",
    "trailing comma": b'{"a": [1,]}',
    "truncated": BASE[:-3],
    "form feed as space": b'{"a":\x0c1}',
    "vertical tab as space": b'{"a":\x0b1}',
    "no-break space as space": b'{"a":\xc2\xa01}',
    "leading and trailing whitespace": b" \t\r\n" + BASE + b" \n\r\t",
    "a scalar": b"12",
    "leading zero": b'{"x": 01}',
    "negative zero": b'{"x": [-0, -0.0, 0e0, -0e-0]}',
    "plus sign": b'{"x": +1}',
    "bare point": b'{"x": 1.}',
    "upper-case exponent": b'{"x": 1E+2}',
    "comment": b'{"x": 1 /* c */}',
    "single quotes": b"{'x': 1}",
    "deep but closed": b'{"x": ' + b"[" * 70 + b"]" * 70 + b"}",
    "deeper than the parser": b'{"x": ' + b"[" * 1100 + b"]" * 1100 + b"}",
    "deep and open": b'{"x": ' + b"[" * 5000,
    "nesting at the limit": b'{"x": ' + b"[" * 62 + b"1" + b"]" * 62 + b"}",
    "backslashes before a quote": b'{"a\\\\": "b\\\\\\"c", "d": 1}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_or_edge_text_reads_exactly_as_strictly(name):
    same(HOSTILE[name])


DECLINED = {
    "duplicate key",
    "duplicate key, nested",
    "duplicate key whose value held colons",
    "duplicate key after a dropped colon",
    "duplicate key spelled with an escape",
    "colon escaped in a string",
    "colon escaped, no duplicate",
    "integer past 64 bits",
    "negative integer past 64 bits",
    "19-digit integer within 64 bits",
    "huge integer",
    "long integer part",
    "long exponent",
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_the_fast_path_declines_what_orjson_would_read_otherwise(name):
    assert fast(HOSTILE[name]) is NOT_PROVEN


@pytest.mark.parametrize("name", ["long fraction", "underflow", "negative zero", "surrogate pair"])
def test_the_fast_path_takes_what_it_reads_as_strictly(name):
    value = fast(HOSTILE[name])
    assert value is not NOT_PROVEN
    assert tagged(value) == tagged(loads_strict(HOSTILE[name], where="t"))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("duplicate key", "trace: duplicate key 'a': a hash over duplicate keys is ambiguous"),
        (
            "duplicate key spelled with an escape",
            "trace: duplicate key 'a': a hash over duplicate keys is ambiguous",
        ),
        (
            "lone surrogate",
            "trace: the string '\\ud800' holds a lone UTF-16 surrogate \\ud800, which is not "
            "Unicode text; escape a character outside the BMP as a surrogate pair, or write it "
            "as UTF-8",
        ),
        (
            "out of range",
            "trace: number out of range at line 1 column 11 (/x/1): 1e400 is larger in "
            "magnitude than any double (at most 1.7976931348623157e+308)",
        ),
        (
            "byte-order mark",
            "trace: starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM",
        ),
        ("deeper than the parser", "trace: nesting is deeper than the parser allows"),
        ("trailing data", "trace: unexpected data after the JSON value at line 1"),
    ],
)
def test_the_refusals_are_worded_as_ever(name, message):
    assert document(HOSTILE[name]) == ("refused", MALFORMED_TRACE, message)


def test_the_limits_refuse_before_the_parse_as_strictly():
    many_keys = b"{" + b",".join(b'"k%d":1' % i for i in range(40)) + b"}"
    assert same(many_keys, max_object_keys=30)[0] == "refused"
    assert same(many_keys, max_keys=30, max_object_keys=100)[0] == "refused"
    containers = b"[" + b",".join([b"{}"] * 1_000_001) + b"]"
    assert same(containers)[1:] == (
        MALFORMED_TRACE,
        "trace: more than 1000000 objects and arrays; refused before parsing it",
    )


def stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def called_with_frames_left(frames: int, call: Any) -> Any:
    """`call()` from deep enough in the stack that `frames` frames are left to it."""

    def down(n: int) -> Any:
        return call() if n <= 0 else down(n - 1)

    return down(sys.getrecursionlimit() - stack_depth() - frames)


def test_nesting_json_cannot_follow_is_refused_as_strictly_whatever_the_limit():
    # json follows as many levels as the interpreter's stack has frames left; orjson parses
    # 1024 (and writes 255): 200 levels, 150 frames left, a limit of 256
    data = b'{"x": ' + b'[{"a":' * 100 + b"1" + b"}]" * 100 + b"}"
    limits = {"max_depth": 256}
    want = called_with_frames_left(150, lambda: strict(data, **limits))
    assert want == ("refused", MALFORMED_TRACE, "trace: nesting is deeper than the parser allows")
    assert called_with_frames_left(150, lambda: document(data, **limits)) == want
    assert same(data, **limits)[0] == "value"  # with the stack's frames, it is read


@pytest.mark.parametrize("chunk", [1, 3, 8, 1 << 18])
def test_the_shape_is_proven_as_text_shape_is_bounded_proves_it(chunk, monkeypatch):
    monkeypatch.setattr(jsonstrict, "_CHUNK", chunk)
    data = b'{"k": ["' + b"x" * 40 + b'"], "y": [[[1]]], "z": "' + b"q" * 10 + b'"}'
    for depth in (3, 4, 5):
        for string in (39, 40, 41):
            assert same(data, max_depth=depth, max_string=string)[0] == "value"


# --- numbers: orjson reads every number it is given exactly as float() and int() do --------

HARD_DOUBLES = [
    "2.2250738585072011e-308",  # the largest subnormal, spelled as it once hung Java
    "2.2250738585072012e-308",
    "2.4703282292062327e-324",  # half the smallest subnormal: rounds to zero
    "2.4703282292062328e-324",  # just above: rounds up to 5e-324
    "4.9406564584124654e-324",
    "1.7976931348623157e308",
    "1.7976931348623158e308",  # rounds down to the largest double
    "1.7976931348623159e308",  # overflows
    "9007199254740993",  # 2**53 + 1 spelled as an integer: an int, exactly
    "9007199254740993.0",  # ... and as a double: ties to even
    "0.30000000000000004",
    "123456789012345678e-10",
    "7.038531e-26",
    "0." + "0" * 330 + "1",
    "1" + "0" * 18 + ".0",
    "8.988465674311579e307",
    "5e-324",
    "1e23",
    "8.98846567431158e307",
    "0.1" + "0" * 300 + "1",
    "4.9406564584124654417656879286822137236505980e-324",
    "2.47032822920623272088284396434110686182529901307162382212792841250337753635104375"
    "932649918180817996189898282347722858865463328355177969898199387398005390939063150"
    "356595155702263922908583924491051844359318028499365361525003193704576782492193656"
    "236698636584807570015857692699037063119282795585513329278343384093519780155312465"
    "972635795746227664652728272200563740064854999770965994704540208281662262378573934"
    "507363390079677619305775067401763246736009689513405355374585166611342237666786041"
    "621596804619144672918403005300575308490487653917113865916462395249126236538818796"
    "362393732804238910186723484976682350898633885879256283027559956575244555072551893"
    "136908362547791869486679949683240497058210285131854513962138377228261454376934125"
    "320985913276672363281255e-324",  # just past the halfway point to 5e-324
]


def strict_number(literal: str) -> Any:
    return outcome(lambda: loads_strict(literal.encode(), where="trace"))


def as_number(literal: str) -> Any:
    """`strict_number` through loads_document."""
    got = document(literal.encode())
    return got if got[0] == "refused" else got[:2]


def orjson_number(literal: str) -> Any:
    try:
        return ("value", tagged(orjson.loads(literal)))
    except orjson.JSONDecodeError:
        return ("refused",)


@pytest.mark.parametrize("literal", HARD_DOUBLES)
def test_hard_doubles_read_the_same(literal):
    want = strict_number(literal)
    if want[0] == "refused":  # out of range: orjson refuses it too, the strict path words it
        assert orjson_number(literal) == ("refused",)
        assert fast(literal.encode()) is NOT_PROVEN
    else:
        assert orjson_number(literal) == want
    assert as_number(literal) == want


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_double_as_python_writes_it_reads_the_same(x):
    for literal in (repr(x), json.dumps(x), f"{x:.17e}", f"{x:.9f}", f"{x:.25e}", f"{x:.3g}"):
        if "inf" in literal or "nan" in literal:
            continue
        want = strict_number(literal)
        if want[0] == "refused":  # e.g. 1.8e+308: out of range, refused by both
            assert "out of range" in want[2]
            assert orjson_number(literal) == ("refused",)
        else:
            assert orjson_number(literal) == want, literal


@settings(max_examples=3000, deadline=None)
@given(
    st.sampled_from(["", "-"]),
    st.from_regex(r"\A(0|[1-9][0-9]{0,17})\Z", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\A\.[0-9]{1,60}\Z", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\A[eE][+-]?[0-9]{1,3}\Z", fullmatch=True)),
)
def test_every_number_the_fast_path_takes_reads_the_same(sign, whole, fraction, exponent):
    literal = sign + whole + fraction + exponent
    want = strict_number(literal)
    got = orjson_number(literal)
    if want[0] == "refused":
        assert got == ("refused",)
        clipped = (
            literal if len(literal) <= 40 else f"{literal[:30]}... ({len(literal)} characters)"
        )
        assert want[1:] == (
            MALFORMED_TRACE,
            f"trace: number out of range at line 1 column 1: {clipped} is larger in magnitude "
            "than any double (at most 1.7976931348623157e+308)",
        )
    else:
        assert got == want, literal
    assert as_number(literal) == want


@settings(max_examples=2000, deadline=None)
@given(st.integers(-(10**18) + 1, 10**18 - 1))
def test_every_integer_of_up_to_18_digits_reads_as_the_same_int(n):
    assert orjson_number(str(n)) == ("value", ("int", n))


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(st.integers(10**18, 10**40), st.integers(-(10**40), -(10**18))).map(
        lambda n: n if abs(n) >= 10**18 else 10**18
    )
)
def test_a_longer_integer_is_declined_or_read_the_same(n):
    data = b'{"n": %d}' % n
    value = fast(data)
    if value is not NOT_PROVEN:
        assert tagged(value) == tagged({"n": n})
    same(data)


# --- any value, in any spelling, with or without a duplicate key ---------------------------

KEYS = st.text(st.sampled_from('ab:"\\\u00e9\u2028\U0001f600'), max_size=4)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


def spelled(value: Any, indent: int | None, ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(value, indent=indent, ensure_ascii=ascii_only, separators=separators).encode()


def with_duplicate(data: bytes, key: str) -> bytes:
    """`data` (an object) with `key` given twice more at its start."""
    name = json.dumps(key).encode()
    return b"{" + name + b": 1, " + name + b': "::"' + (b", " if data != b"{}" else b"") + data[1:]


@settings(max_examples=600, deadline=None)
@given(
    st.dictionaries(KEYS, VALUES, max_size=5),
    st.sampled_from([None, 0, 2]),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), KEYS),
)
def test_any_document_reads_exactly_as_strictly(value, indent, ascii_only, spaced, duplicate):
    data = spelled(value, indent, ascii_only, spaced)
    if duplicate is not None:
        data = with_duplicate(data, duplicate)
    want = same(data)
    if duplicate is not None:
        assert want == (
            "refused",
            MALFORMED_TRACE,
            f"trace: duplicate key {duplicate!r}: a hash over duplicate keys is ambiguous",
        )
    else:
        assert want[0] == "value"
        assert want[1] == tagged(value)


@settings(max_examples=300, deadline=None)
@given(VALUES, st.binary(max_size=3), st.integers(0, 200))
def test_any_text_damaged_anywhere_reads_exactly_as_strictly(value, junk, at):
    data = spelled({"v": value}, 2, False, True)
    at = min(at, len(data))
    same(data[:at] + junk + data[at:])


def test_a_double_is_compared_to_the_bit():
    assert tagged(-0.0) != tagged(0.0)
    assert tagged(1) != tagged(1.0) != tagged(True)
    assert math.isclose(struct.unpack(">d", tagged(0.5)[1])[0], 0.5)


@pytest.mark.parametrize("piece", [1, 3, 4096])
def test_the_colons_are_counted_as_orjson_writes_them(piece, monkeypatch):
    monkeypatch.setattr(jsonstrict, "_SLICE", piece)
    value = {
        "a:b": [{"k": "x:y", "l": [1, "::"]}] * 10,
        "c": {"d:": ["::"] * 9, "e": None},
        "f": {f"{i}:": i for i in range(70)},  # more keys than are counted one by one
        "g": "h:i",
    }
    assert jsonstrict._written_colons(value) == orjson.dumps(value).count(b":") == 217
