"""Paxman's fast path (``paxman._parse_canonical``: orjson, then proof by re-serialising) gives
exactly the report of the strict path (``loads_strict`` then replay) on every input: same
status, code, message, checks. Hostile texts fall back to the strict path, which words the
refusal; the canonical goldens take the fast path.
"""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.canonical import python_sorted
from core.errors import MALFORMED_TRACE
from core.formats import jsonstrict
from core.formats import paxman as px
from core.formats.paxman import artifact as px_artifact
from core.formats.paxman import verify as px_verify
from tests.published import PUBLISHED

FIXTURES = PUBLISHED
GOLDENS = sorted((FIXTURES / "paxman").glob("*.json"))
MONEY = FIXTURES / "paxman" / "money_unresolved.json"


@contextmanager
def strict_only():
    with mock.patch.object(px_verify, "_parse_canonical", return_value=None):
        yield


def both(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    fast = px.verify_bytes(data).to_json()
    with strict_only():
        strict = px.verify_bytes(data).to_json()
    return fast, strict


def canonical(doc: Any) -> bytes:
    return python_sorted(doc) + b"\n"


def money() -> dict[str, Any]:
    return json.loads(MONEY.read_bytes())


def rehashed(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["replay_hash"] = px.replay_hash_of(out)
    return out


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.name)
def test_each_golden_takes_the_fast_path_with_the_strict_report(path):
    data = path.read_bytes()
    assert px_verify._parse_canonical(data) is not None
    fast, strict = both(data)
    assert fast == strict
    assert fast["status"] == "ok"


CANON = canonical(money()).rstrip(b"\n")
HOSTILE = {
    "duplicate key": CANON[:-1] + b',"status":"SUCCESS"}',
    "duplicate key inside": CANON.replace(b'"metadata":{', b'"metadata":{"a":1,"a":1', 1),
    "NaN": CANON.replace(b'"metadata":{', b'"metadata":{"x":NaN', 1),
    "Infinity": CANON.replace(b'"metadata":{', b'"metadata":{"x":-Infinity', 1),
    "big int": CANON.replace(b'"metadata":{', b'"metadata":{"x":' + b"9" * 40, 1),
    "huge int": CANON.replace(b'"metadata":{', b'"metadata":{"x":' + b"9" * 5000, 1),
    "byte-order mark": b"\xef\xbb\xbf" + CANON,
    "bad UTF-8": CANON.replace(b'"metadata":{', b'"metadata":{"x":"\xff"', 1),
    "lone surrogate": CANON.replace(b'"metadata":{', b'"metadata":{"x":"\\ud800"', 1),
    "deep nesting": CANON.replace(b'"metadata":{', b'"metadata":{"x":' + b"[" * 5000, 1),
    "deep but closed": CANON.replace(
        b'"metadata":{', b'"metadata":{"x":' + b"[" * 300 + b"]" * 300 + b",", 1
    ),
    "trailing data": CANON + b"{}",
    "truncated": CANON[:-7],
    "not an object": b"[" + CANON + b"]",
    "unknown field": CANON[:-1] + b',"zzz":1}',
}
ACCEPTED = {"big int"}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_declines_the_fast_path_and_is_refused_as_strictly(name):
    data = HOSTILE[name]
    assert px_verify._parse_canonical(data) is None
    fast, strict = both(data)
    assert fast == strict
    if name in ACCEPTED:  # what loads_strict reads (not what orjson or the proof admit)
        assert fast["status"] == "ok"
    else:
        assert fast["error_code"] == MALFORMED_TRACE


def test_the_installed_orjson_refuses_lone_surrogates_so_the_fast_path_is_on():
    assert jsonstrict.orjson_refuses_lone_surrogates()
    assert px_verify._FAST_PARSE


@pytest.mark.parametrize("lone", ["\\ud800", "\\udc00", "x\\udbff", "\\udfffx", "\\ud83d\\ud83d"])
def test_a_lone_surrogate_anywhere_is_refused_as_strictly(lone):
    doc = money()
    data = canonical(doc).replace(b'"metadata":{', b'"metadata":{"k":"' + lone.encode() + b'"', 1)
    assert px_verify._parse_canonical(data) is None
    fast, strict = both(data)
    assert fast == strict
    assert fast["error_code"] == MALFORMED_TRACE
    assert "lone UTF-16 surrogate" in fast["message"]


def test_a_float_overflowing_to_infinity_is_refused_the_same_on_both_paths():
    # 1e400 is refused where the text spells it (it once read as inf, and the strict path's
    # rehydration raised on the "Infinity" it wrote back)
    data = CANON.replace(b'"metadata":{', b'"metadata":{"x":1e400', 1)
    assert px_verify._parse_canonical(data) is None
    fast, strict = both(data)
    assert fast == strict
    column = data.index(b"1e400") + 1  # the canonical spelling is ASCII, on one line
    assert (fast["error_code"], fast["message"]) == (
        MALFORMED_TRACE,
        f"artifact: number out of range at line 1 column {column} (/metadata/x): 1e400 is "
        "larger in magnitude than any double (at most 1.7976931348623157e+308)",
    )


def test_a_text_in_another_spelling_declines_the_fast_path_and_reports_as_strictly():
    doc = money()
    doc["metadata"] = {"note": "naïve café"}
    for data in (
        json.dumps(doc, indent=2).encode(),
        json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(),
        json.dumps(doc).encode(),
    ):
        assert px_verify._parse_canonical(data) is None
        fast, strict = both(data)
        assert fast == strict
        assert fast["status"] == "ok"


def test_a_canonical_text_that_fails_later_checks_reports_as_strictly():
    doc = money()
    doc["statistics"] = {"tampered": 1}
    data = canonical(doc)
    assert px_verify._parse_canonical(data) is not None
    fast, strict = both(data)
    assert fast == strict
    assert fast["error_code"] == "HASH_MISMATCH"


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_stable_writes_exactly_python_sorted(value):
    assert px_artifact._stable(value) == python_sorted(value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metadata=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4), stats=JSON_VALUES)
def test_random_artifacts_report_the_same_on_both_paths(metadata, stats):
    doc = money()
    doc["metadata"] = metadata
    doc["statistics"] = stats
    for data in (
        canonical(doc),
        canonical(rehashed(doc) if isinstance(stats, dict | type(None)) else doc),
    ):
        fast, strict = both(data)
        assert fast == strict


MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "replace"]),
        st.integers(min_value=0, max_value=len(CANON)),
        st.binary(min_size=1, max_size=3)
        | st.sampled_from(
            [b",", b'"', b":", b"{", b"}", b"[", b"]", b"\\u", b"NaN", b"\xff", b" ", b'"a":1,']
        ),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MUTATIONS)
def test_random_byte_edits_of_a_canonical_artifact_report_the_same_on_both_paths(edits):
    data = bytearray(CANON + b"\n")
    for kind, where, piece in edits:
        at = min(where, len(data))
        if kind == "insert":
            data[at:at] = piece
        elif kind == "delete":
            del data[at : at + len(piece)]
        else:
            data[at : at + len(piece)] = piece
    fast, strict = both(bytes(data))
    assert fast == strict


@pytest.mark.parametrize("status", [[], {}, 1, None])
def test_a_field_result_status_of_another_type_is_refused_not_raised(status):
    doc = money()
    path = next(iter(doc["field_results"]))
    doc["field_results"][path]["status"] = status
    fast, strict = both(canonical(doc))
    assert fast == strict
    assert fast["error_code"] == MALFORMED_TRACE
    assert fast["message"] == (
        f"artifact.field_results[{path!r}].status: must be one of "
        f"SUCCESS/PARTIAL_SUCCESS/UNRESOLVED/EXECUTION_FAILED, got {status!r}"
    )
