"""check_key_count scans the structure outside strings with byte operations (issue 23: the
whole-document reader had slowed by the key-by-key regex scan): the same refusal, with the
same message, as the key-by-key scan it replaced, on any JSON text and any limits."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ReplayError
from core.formats import jsonstrict
from core.formats.jsonstrict import check_key_count

#: the key-by-key scan check_key_count used (kept to compare)
_KEY_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"[ \t\r\n]*(:)?|[{}]')


def _reference(data: bytes, *, where: str, max_keys: int, max_object_keys: int) -> None:
    if data.count(b":") <= min(max_keys, max_object_keys):
        return
    total = here = 0
    outer: list[int] = []
    for m in _KEY_TOKEN.finditer(data):
        if m.group(1) is not None:
            total += 1
            here += 1
            if here > max_object_keys:
                raise ReplayError(
                    "MALFORMED_TRACE",
                    f"{where}: an object has more than {max_object_keys} keys; refused before "
                    "parsing it",
                )
            if total > max_keys:
                raise ReplayError(
                    "MALFORMED_TRACE",
                    f"{where}: more than {max_keys} keys in all; refused before parsing it",
                )
        elif m.group() == b"{":
            outer.append(here)
            here = 0
        elif m.group() == b"}":
            here = outer.pop() if outer else 0


def _outcome(check, data: bytes, max_keys: int, max_object_keys: int) -> str:
    try:
        check(data, where="t", max_keys=max_keys, max_object_keys=max_object_keys)
    except ReplayError as exc:
        return exc.message
    return "ok"


TEXT = st.text(alphabet=st.sampled_from('ab:{}[]",\\\n é'), max_size=8)
VALUES = st.recursive(
    st.none() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(0, 12), st.integers(0, 12), st.booleans())
def test_it_refuses_exactly_what_the_key_by_key_scan_refused(value, most, total, spaced):
    data = json.dumps(value, ensure_ascii=False, indent=1 if spaced else None).encode()
    assert _outcome(check_key_count, data, total, most) == _outcome(_reference, data, total, most)


@pytest.mark.parametrize(
    "text",
    [
        rb'{"a\\":1}',  # an escaped quote inside a key
        rb'{"a\\\\":1,"b":{"c:":2,"d":"}{"},"e":3}',  # an escaped backslash, then the quote
        rb'[{"x":1,"y":2},{"x":1,"y":2,"z":3}]',
        rb'{"a":{"b":{"c":{"d":1,"e":2}}},"f":1,"g":2}',
    ],
)
def test_escapes_and_nesting(text):
    json.loads(text)
    for total in range(8):
        for most in range(5):
            assert _outcome(check_key_count, text, total, most) == _outcome(
                _reference, text, total, most
            )


def _deep(levels: int, keys_each: int) -> bytes:
    inner = b"1"
    for level in range(levels):
        pairs = b",".join(b'"k%d":%d' % (i, level) for i in range(keys_each - 1))
        inner = b'{"n":' + inner + (b"," + pairs if pairs else b"") + b"}"
    return inner


@pytest.mark.parametrize(
    "text",
    [
        # an object whose keys the objects it holds split into short runs
        b"{" + b",".join(b'"k%d":{"x":1}' % i for i in range(9)) + b"}",
        _deep(70, 3),  # nesting deeper than the fast pass follows: the exact scan decides
        _deep(5, 6),
        rb'{"a":1,"b":2',  # a brace without its pair
        rb'{"a":1}},{"b":2,"c":3',
        rb'"x":1,"y":2,"z":3',  # keys outside any object
    ],
)
def test_the_fast_pass_lets_through_only_what_the_exact_scan_does(text):
    for total in (0, 3, 8, 9, 10, 200, 300):
        for most in (0, 2, 3, 5, 8, 9, 10):
            assert _outcome(check_key_count, text, total, most) == _outcome(
                _reference, text, total, most
            ), (total, most)


def test_a_deep_text_within_the_limits_passes_the_exact_scan():
    text = _deep(70, 3)
    json.loads(text)
    assert _outcome(check_key_count, text, 1000, 10) == "ok"
    assert _outcome(check_key_count, text, 1000, 2) == (
        "t: an object has more than 2 keys; refused before parsing it"
    )


@pytest.mark.parametrize("slice_bytes", [1, 2, 5])
def test_the_fast_pass_reduces_the_structure_a_slice_at_a_time(slice_bytes, monkeypatch):
    monkeypatch.setattr(jsonstrict, "_REDUCE_BYTES", slice_bytes)
    texts = [
        b"{" + b",".join(b'"k%d":{"x":1,"y":{"z":2}}' % i for i in range(9)) + b"}",
        _deep(70, 3),
        _deep(5, 6),
        b"[" + b",".join(b'{"a":1,"b":{"c":2,"d":3},"e":[{"f":4}]}' for _ in range(40)) + b"]",
    ]
    for text in texts:
        json.loads(text)
        for total in (0, 3, 8, 9, 10, 200, 300):
            for most in (0, 2, 3, 5, 8, 9, 10):
                assert _outcome(check_key_count, text, total, most) == _outcome(
                    _reference, text, total, most
                ), (text[:40], total, most)
    structure = b"{::{:}}{}{:::{::{}}}"
    assert jsonstrict._drop_flat_objects(structure) == b"{::}{:::{::}}"
