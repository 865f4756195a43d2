"""text_shape_is_bounded (issue 23 item 4): the whole-document reader skips check_shape's walk
only where the bytes prove the walk would pass; never where it would refuse."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ReplayError
from core.formats import default_registry, jsonstrict, native
from core.formats.jsonstrict import check_shape, text_shape_is_bounded
from core.formats.native import Limits, open_native
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_signer

TEXT = st.text(alphabet=st.sampled_from('ab"\\{}[]:,\n é\u2028'), max_size=12)
VALUES = st.recursive(
    st.none() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=30,
)


def walk_passes(value, depth: int, string: int) -> bool:
    try:
        check_shape(value, where="t", max_depth=depth, max_string=string)
    except ReplayError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(1, 8), st.integers(0, 14), st.sampled_from([1, 2, 3, 7, 1 << 18]))
def test_it_is_true_only_where_the_walk_passes(value, depth, string, chunk):
    data = json.dumps(value, ensure_ascii=False).encode()
    original = jsonstrict._CHUNK
    jsonstrict._CHUNK = chunk
    try:
        bounded = text_shape_is_bounded(data, max_depth=depth, max_string=string)
    finally:
        jsonstrict._CHUNK = original
    if bounded:
        assert walk_passes(json.loads(data), depth, string)


@pytest.mark.parametrize("chunk", [1, 4, 1 << 18])
def test_a_string_across_chunks_is_measured_whole(chunk, monkeypatch):
    monkeypatch.setattr(jsonstrict, "_CHUNK", chunk)
    data = b'{"k":[' + b'"' + b"x" * 40 + b'"' + b"]," + b'"y":1,' * 30 + b'"z":2}'
    assert text_shape_is_bounded(data, max_depth=4, max_string=40)
    assert not text_shape_is_bounded(data, max_depth=4, max_string=39)


def test_nesting_it_cannot_prove_is_left_to_the_walk():
    # [{"a":[{"a":...}]}]: a list and an object removed each pass, two levels
    mixed = b'[{"a":' * 5 + b"1" + b"}]" * 5 + b" " * 64  # longer than max_string
    assert text_shape_is_bounded(mixed, max_depth=10, max_string=8)
    assert not text_shape_is_bounded(mixed, max_depth=9, max_string=8)
    assert not walk_passes(json.loads(mixed), 9, 8)
    lists = b"[" * 6 + b"1" + b"]" * 6 + b" " * 64  # one level a pass: not proven
    assert not text_shape_is_bounded(lists, max_depth=6, max_string=8)
    assert walk_passes(json.loads(lists), 6, 8)


@pytest.mark.parametrize(
    ("limits", "payload", "message"),
    [
        (Limits(max_depth=6), {"deep": [[[1]]]}, "trace: nesting deeper than 6 levels"),
        (
            Limits(max_string=300),
            {"long": "x" * 301},
            "trace: the string at key 'long' is 301 characters, longer than the limit of 300",
        ),
    ],
)
def test_the_document_reader_still_refuses_what_the_walk_refuses(limits, payload, message):
    document = record(RecordOptions(seed="shape"), default_registry(), golden_signer())
    document["events"][0]["payload"] = payload
    data = native.dumps_document(document)
    with pytest.raises(ReplayError) as refused:
        open_native(io.BytesIO(data), "t.trace.json", limits)
    assert (refused.value.code, refused.value.message) == ("MALFORMED_TRACE", message)
    document["events"][0]["payload"] = {}
    open_native(io.BytesIO(native.dumps_document(document)), "t.trace.json", limits)
