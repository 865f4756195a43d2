"""The digest the reader gives each span row (``otel.services._digest``: ``sha256:`` over the
record's RFC 8785 bytes), pinned on the captured bodies' spans, and held byte for byte to
``core.canonical.jcs`` on the spans of generated bodies and on values made to trip a fast
canonicaliser: floats Python writes otherwise than ECMAScript, integers past 2**53, keys
sorted differently by code point and by UTF-16 unit, surrogates, and what JCS refuses."""

from __future__ import annotations

import hashlib
import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import CanonicalError, jcs
from core.formats.otel import mapping, otlp
from otel.services import _digest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]

# sha256 of the fixture's span digests, one a line in request order (first 32 hex digits);
# taken from the canonicaliser the reader used before the fast path
PINNED = {
    "none-json.json": "690f3ee9df91db7a5bd0500add1163a3",
    "none-proto.bin": "690f3ee9df91db7a5bd0500add1163a3",
    "openai-v2-json-nocontent.json": "9d1134c1b4644060fbee6d44ceca85db",
    "openai-v2-json.json": "af11a2136fb58bc38d365408954fa8cf",
    "openai-v2-proto-divergent.bin": "1405e145116591986a4ddd5ca94c0b4d",
    "openai-v2-proto-nocontent.bin": "9d1134c1b4644060fbee6d44ceca85db",
    "openai-v2-proto-onebyone-1.bin": "d99a33b04110f66444ee7f172a90759d",
    "openai-v2-proto-onebyone-2.bin": "4f19a7fba3a6aeb9ab18e74950876eb1",
    "openai-v2-proto-onebyone-3.bin": "8d9b51a547c14d7815c1e5b4bd6ac1bd",
    "openai-v2-proto-onebyone-4.bin": "fee4eb47e402f73407992d7a6c9a832c",
    "openai-v2-proto-stream.bin": "605ca1f57500f259eaad117fc480b00c",
    "openai-v2-proto.bin": "af11a2136fb58bc38d365408954fa8cf",
    "openinference-json.json": "8cada90c5f70a1633bf7efaf677e81d2",
    "openinference-proto-nocontent.bin": "942617909fa0817a3d4bbd9aad6f5082",
    "openinference-proto-stream.bin": "d54cb8fdd72217995dec5870a69c552c",
    "openinference-proto.bin": "8cada90c5f70a1633bf7efaf677e81d2",
    "openllmetry-json.json": "6f45a7e351b6045ec86a0b47439a6b2b",
    "openllmetry-proto-nocontent.bin": "aea1e2436e90161d4303062f37e4151a",
    "openllmetry-proto-stream.bin": "2ff3eac122a73e7727b76e382513ee28",
    "openllmetry-proto.bin": "6f45a7e351b6045ec86a0b47439a6b2b",
}


def reference(value) -> str:
    return "sha256:" + hashlib.sha256(jcs(value)).hexdigest()


def records_of(data: bytes, media: str) -> list[dict]:
    return [mapping.span_record(plain) for plain in otlp.decode(data, media).spans]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_it_gives_the_captured_spans_their_pinned_digests(name):
    media = otlp.JSON if name.endswith(".json") else otlp.PROTOBUF
    digests = [_digest(r) for r in records_of((FIXTURES / name).read_bytes(), media)]
    assert hashlib.sha256("\n".join(digests).encode()).hexdigest()[:32] == PINNED[name]


def test_it_gives_generated_genai_spans_the_digest_of_their_jcs_bytes():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_otlp

    request, _ = bench_otlp.genai_request(random.Random(31), 512, 64, "agent-0")
    records = records_of(request.SerializeToString(), otlp.PROTOBUF)
    assert len(records) == 512
    for record in records:
        assert _digest(record) == reference(record)


TRICKY = [
    # floats Python's repr writes otherwise than ECMAScript's Number::toString
    1.0,
    -0.0,
    0.0,
    1e21,
    1e20,
    1e16,
    1e15,
    123456789012345678.0,
    1e-7,
    1e-5,
    0.0001,
    5e-324,
    1.7976931348623157e308,
    0.1,
    -2.5,
    [1.0, 2.5, {"x": 3.0}],
    # integers: exact up to 2**53, refused past it
    2**53,
    -(2**53),
    10**15,
    True,
    False,
    None,
    # strings JSON.stringify and json write alike, and surrogates
    "\u2028\u2029\x7f",
    '\x00\x1f\b\f\n\r\t"\\/',
    "ünïcode ✓",
    "😀",
    "\ud83d\ude00",  # a surrogate pair spelt as two code points: one character to JS
    "</script>",
    ":1.0,",  # looks like a float written by repr, inside a string
    '"x":1e5,',
    # keys: UTF-16 order differs from code point order past U+E000
    {"\uffff": 1, "😀": 2},
    {"\ue000": 1, "\U00010000": 2, "a": 3},
    {"b": 1, "a": 2, "A": 3, "": 4, "10": 5, "9": 6, "é": 7},
    {"\ud83d\ude00": 1},
    {"k": {"j": [{"z": 1, "y": [1.5, None]}]}},
    (1, "two", 3.0),
    [],
    {},
]

REFUSED = [
    2**53 + 1,
    -(2**53) - 1,
    10**16,
    math.nan,
    math.inf,
    "\ud800",
    {"k": "\udfff"},
    {"a": b"bytes"},
    {1: "a non-string key", "b": 2},
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_it_writes_values_a_fast_path_could_get_wrong_as_jcs_does(value):
    assert _digest({"v": value}) == reference({"v": value})
    assert _digest(value) == reference(value)


@pytest.mark.parametrize("value", REFUSED, ids=repr)
def test_it_refuses_what_jcs_refuses(value):
    with pytest.raises(CanonicalError):
        jcs(value)
    with pytest.raises(CanonicalError):
        _digest(value)


def test_it_follows_jcs_on_values_nested_deep():
    value: object = "bottom"
    for n in range(200):
        value = [value] if n % 2 else {"k": value}
    assert _digest(value) == reference(value)


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON_VALUES)
def test_it_follows_jcs_on_generated_values(value):
    try:
        expected = reference(value)
    except CanonicalError:  # a lone surrogate, say
        with pytest.raises(CanonicalError):
            _digest(value)
        return
    assert _digest(value) == expected
