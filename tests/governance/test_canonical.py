"""The ledger's fast canonical JSON (``governance.chain.canonical``, orjson on the subset
where it writes RFC 8785's bytes) is byte for byte ``replay.canonical.jcs``, and refuses what
jcs refuses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance import chain
from replay.canonical import CanonicalError, jcs

# every code point, lone surrogates included
_chars = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)
_text = st.text(_chars, max_size=12) | st.sampled_from(["", "a", "é", "\u2028", "\x7f", "😀"])
_ints = st.integers(min_value=-(2**64), max_value=2**64) | st.sampled_from(
    [2**53, 2**53 + 1, -(2**53), -(2**53) - 1, 0, -0]
)
_scalars = st.none() | st.booleans() | _ints | st.floats(allow_nan=True) | _text
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_text, inner, max_size=4)
    ),
    max_leaves=20,
)


def _either(fn, value):
    try:
        return ("ok", fn(value))
    except CanonicalError as exc:
        return ("refused", type(exc))


@settings(max_examples=3000, deadline=None)
@given(_values)
def test_it_writes_what_jcs_writes_or_refuses_what_it_refuses(value):
    assert _either(chain.canonical, value) == _either(jcs, value)


def test_every_code_point_is_escaped_as_jcs_escapes_it():
    for cp in (*range(0xD800), *range(0xE000, 0x110000)):
        s = chr(cp)
        assert chain.canonical({"k": s}) == jcs({"k": s}), hex(cp)


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, 2**53]},
        {"é": 1, "e": 2, "\U0001f600": 3, "\ufb01": 4},  # non-ASCII keys: jcs's own order
        {"x": 1.0, "y": -0.0, "z": 1e21},  # floats: jcs's ECMAScript spelling
        [2**53 + 1],  # refused by jcs
        "\ud800",  # a lone surrogate: refused
        {"k": "\ud83d\ude00", "\ud83d\ude01": 1},  # surrogate pairs as two code points
    ],
)
def test_the_edges_go_to_jcs(value):
    assert _either(chain.canonical, value) == _either(jcs, value)
