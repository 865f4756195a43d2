"""Fuzzing the parser and the engine: whatever the bytes, only a ReplayError-derived refusal or
a report comes out, never any other exception.

Inputs: random bytes; golden traces with bit flips, truncations and splices, in every
spelling; and structurally valid traces whose events were rewritten with arbitrary JSON and
re-chained (the chain is unkeyed, so a forger gets that far before the seal stops them).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ERROR_CODES, ReplayError
from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import rechain
from tests.replay.helpers import golden, golden_key_ring

pytestmark = pytest.mark.slow

KEYS = golden_key_ring()
REGISTRY = default_registry()

OK = golden("ok.trace.json").read_bytes()
SEEDS = {
    "ok.trace.json": OK,
    "ok.trace.jsonl": golden("ok.trace.jsonl").read_bytes(),
    "ok.trace.json.gz": gzip.compress(OK, mtime=0),
    "unpersisted.trace.json": golden("unpersisted.trace.json").read_bytes(),
}
FILENAMES = [*SEEDS, "upload", "x.trace.jsonl.gz", "x.json"]

FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def open_and_replay(data: bytes, filename: str, mode: str) -> engine.ReplayReport | None:
    """What the console does with an upload; None when it is refused before a replay."""
    try:
        trace = native.open_native(io.BytesIO(data), filename)
    except ReplayError as exc:
        refusal = exc
    else:
        refusal = None
    if refusal is not None:
        assert refusal.code in ERROR_CODES
        return None
    report = engine.replay(trace, mode=mode, registry=REGISTRY, keys=KEYS)
    assert report.status in (engine.OK, engine.DIVERGED, engine.TAMPER_DETECTED, engine.REFUSED)
    assert (report.status == engine.OK) == (report.error_code is None)
    report.to_json()
    return report


modes = st.sampled_from(engine.MODES)


@settings(FUZZ, max_examples=150)
@given(data=st.binary(max_size=4096), filename=st.sampled_from(FILENAMES), mode=modes)
def test_it_only_refuses_random_bytes(data, filename, mode):
    report = open_and_replay(data, filename, mode)
    assert report is None or report.status != engine.OK


@st.composite
def damaged(draw: st.DrawFn) -> tuple[bytes, str]:
    filename = draw(st.sampled_from(list(SEEDS)))
    data = bytearray(SEEDS[filename])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "delete", "duplicate"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice":  # bytes from another golden trace
            other = SEEDS[draw(st.sampled_from(list(SEEDS)))]
            start = draw(st.integers(0, len(other) - 1))
            data[at:at] = other[start : start + draw(st.integers(1, 200))]
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
    return bytes(data), draw(st.sampled_from([filename, *FILENAMES]))


@settings(FUZZ, max_examples=400)
@given(case=damaged(), mode=modes)
def test_it_only_refuses_or_reports_on_damaged_traces(case, mode):
    data, filename = case
    open_and_replay(data, filename, mode)


# text that includes lone surrogates (only `\\u` escapes can carry them into the parser)
any_text = st.lists(  # st.text() never yields lone surrogates, so join characters by hand
    st.characters(codec=None) | st.sampled_from(["\ud800", "\udfff", "\x00", "\u2028"]),
    max_size=12,
).map("".join)
edge_numbers = st.sampled_from([10**400, -(10**400), 2**64, -(2**63) - 1, 1e308, -1e308, 5e-324])
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | edge_numbers
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@st.composite
def rechained(draw: st.DrawFn) -> dict[str, Any]:
    """The ok trace with events rewritten by arbitrary JSON, then re-chained."""
    document = json.loads(OK)
    events = document["events"]
    for _ in range(draw(st.integers(1, 3))):
        event = events[draw(st.integers(0, len(events) - 1))]
        target = draw(st.sampled_from(["payload", "payload-value", "type", "seed"]))
        if target == "payload":
            event["payload"] = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
        elif target == "payload-value":
            key = draw(st.sampled_from(["load", "delta", "skill", "value", "user", "x"]))
            event["payload"][key] = draw(edge_numbers | json_values)
        elif target == "type":
            event["type"] = draw(
                st.sampled_from(["brain.tick", "skill.feedback", "user.message"]) | any_text
            )
        else:
            document["job"]["job_seed"] = draw(any_text)
    with contextlib.suppress(ReplayError, UnicodeError):  # unhashable: left as drawn
        rechain(document)
    return document


def spell(document: dict[str, Any], filename: str, *, ascii_only: bool) -> bytes | None:
    """The document in `filename`'s spelling; `ascii_only` writes `\\u` escapes, which is
    how lone surrogates reach the parser (raw UTF-8 cannot carry them)."""
    if not ascii_only:
        try:
            if ".jsonl" in filename:
                return b"".join(native.iter_jsonl(document))
            return native.dumps_document(document)
        except UnicodeError:
            return None
    if ".jsonl" not in filename:
        return json.dumps(document).encode()
    lines = [{k: v for k, v in document.items() if k not in ("events", "steps", "outputs")}]
    lines += [{"record": "event", **e} for e in document["events"]]
    lines += [{"record": "step", **s} for s in document["steps"]]
    lines += [
        {"record": "output", "output_ref": ref, **out}
        for ref, out in sorted(document["outputs"].items())
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@settings(FUZZ, max_examples=250)
@given(
    document=rechained(),
    filename=st.sampled_from(["t.trace.json", "t.trace.jsonl"]),
    ascii_only=st.booleans(),
    mode=modes,
)
def test_it_only_refuses_or_reports_on_forged_event_streams(document, filename, ascii_only, mode):
    data = spell(document, filename, ascii_only=ascii_only)
    if data is not None:
        report = open_and_replay(data, filename, mode)
        if document != json.loads(OK):  # some draws rewrite a value with itself
            assert report is None or report.status != engine.OK


# --- a verify-only upload (an AHD sidecar against the demo checkout) ------------------------

AHD_ROOT = Path(__file__).resolve().parents[2] / "replay" / "demo_ahd"
SIDECAR = (AHD_ROOT / "docs" / "evals" / "2026-04-21-swiss.replay.json").read_bytes()


def _sidecar_variants() -> st.SearchStrategy[bytes]:
    flips = st.tuples(st.integers(0, len(SIDECAR) - 1), st.integers(1, 255)).map(
        lambda f: SIDECAR[: f[0]] + bytes([SIDECAR[f[0]] ^ f[1]]) + SIDECAR[f[0] + 1 :]
    )
    cuts = st.integers(0, len(SIDECAR)).map(lambda n: SIDECAR[:n])
    doc = json.loads(SIDECAR)
    edits = st.tuples(
        st.sampled_from(sorted(doc)),
        st.recursive(
            st.none() | st.booleans() | st.text(),
            lambda c: st.lists(c) | st.dictionaries(st.text(), c),
            max_leaves=5,
        ),
    ).map(lambda kv: json.dumps({**doc, kv[0]: kv[1]}).encode())
    return st.one_of(st.binary(max_size=2048), flips, cuts, edits)


@FUZZ
@given(data=_sidecar_variants(), name=st.sampled_from(["s.replay.json", "s.md", "x.json"]))
def test_an_ahd_upload_is_a_report_or_a_refusal_whatever_the_bytes(data, name):
    from core.formats import ahd

    report = ahd.verify_upload(data, name, root=AHD_ROOT)
    assert report.status in ("ok", "refused", "tamper_detected")
    assert report.error_code is None or report.error_code in ERROR_CODES
