"""The ledger's fast canonical JSON (``core.ledger.chain.canonical``, orjson on the subset
where it writes RFC 8785's bytes) is byte for byte ``core.canonical.jcs``, and refuses what
jcs refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import CanonicalError, jcs
from core.ledger import chain

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


_payloads = st.dictionaries(_text, _values, max_size=4)
_labels = st.text(_chars.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=8)
_moments = st.datetimes(
    min_value=datetime(1970, 1, 1),
    max_value=datetime(2999, 12, 31),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


@settings(max_examples=400, deadline=None)
@given(
    payload=_payloads,
    label=_labels,
    actor_id=st.none() | st.integers(min_value=1, max_value=2**31),
    idem=st.none() | _labels,
    seq=st.integers(min_value=1, max_value=2**53),
    created_at=_moments,
    key_id=_labels,
)
def test_a_body_written_before_the_lock_is_the_whole_body_s_bytes(
    *, payload, label, actor_id, idem, seq, created_at, key_id
):
    """ledger appends write the body's bytes before the lock (chain.body_template) and add
    the head's members under it: the bytes are jcs's of the whole body, or both refuse."""
    fixed = {
        "code": 500,
        "type": "PII_REVEALED",
        "actor_id": actor_id,
        "actor_label": label,
        "payload": payload,
        "idempotency_key": idem,
        "actor_key_id": None,
        "actor_signature": "ab" * 64,
    }
    whole = chain.event_body(seq=seq, created_at=created_at, server_key_id=key_id, **fixed)

    def split(_value):
        template = chain.body_template(**fixed)
        return template.fill(seq=seq, created_at=created_at, server_key_id=key_id)

    assert _either(split, None) == _either(jcs, whole)


def test_the_head_s_members_are_where_jcs_puts_them():
    template = chain.body_template(
        code=7,
        type="X",
        actor_id=None,
        actor_label="system",
        payload={"z": 1.0, "é": [None]},
        idempotency_key=None,
        actor_key_id=None,
        actor_signature=None,
    )
    assert template.order == ("created_at", "seq", "server_key_id")
    assert template.fill(
        seq=42, created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), server_key_id="server:k"
    ) == (
        b'{"actor":"system","actor_id":null,"actor_key_id":null,"actor_signature":null,'
        b'"code":7,"created_at":"2026-01-02T03:04:05.000006Z","idempotency_key":null,'
        b'"payload":{"z":1,"\xc3\xa9":[null]},"seq":42,"server_key_id":"server:k","type":"X"}'
    )
