"""Reading a native trace's bytes: a ``.trace.json`` document is read into one buffer,
a piece at a time, straight from the source (`reader._read_document_bytes`), and refused
as soon as it passes its limit; whatever the source (a file, a stream that hands out a few
bytes a call, one that has only ``read``), compressed or not, the trace and its report are
the same."""

from __future__ import annotations

import functools
import gzip
import io
from typing import Any

import pytest

from core.errors import MALFORMED_TRACE, ReplayError
from core.formats import default_registry, native
from core.formats.native import engine
from core.formats.native.recorder import record
from core.replay.runtime import RecordOptions
from tests.replay.helpers import golden_key_ring, golden_signer


@functools.cache
def document_bytes() -> bytes:
    opts = RecordOptions(seed="document-read", iterations=3, filler_events=400)
    return native.dumps_document(record(opts, default_registry(), golden_signer()))


class Trickle(io.RawIOBase):
    """A stream that hands out at most `step` bytes a call."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        piece = self._data[self._pos : self._pos + min(len(b), self._step)]
        b[: len(piece)] = piece
        self._pos += len(piece)
        return len(piece)


class ReadOnly:
    """A source with ``read`` and nothing else (no ``readinto``)."""

    def __init__(self, data: bytes) -> None:
        self._stream = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)


def report(trace: native.NativeTrace) -> dict[str, Any]:
    result = engine.replay(
        trace, mode=engine.AUDIT, registry=default_registry(), keys=golden_key_ring()
    )
    return result.to_json()


def records(trace: native.NativeTrace) -> list[Any]:
    return [(r.kind, r.where, r.ref, r.body) for r in trace.records()]


@pytest.mark.parametrize("name", ["t.trace.json", "t.trace.json.gz", "t.trace"])
@pytest.mark.parametrize(
    "source",
    [
        pytest.param(io.BytesIO, id="bytes"),
        pytest.param(lambda data: io.BufferedReader(Trickle(data, 7)), id="7-bytes-a-read"),
        pytest.param(ReadOnly, id="read-only"),
    ],
)
def test_every_source_gives_the_same_trace(name: str, source: Any) -> None:
    data = document_bytes()
    sent = gzip.compress(data) if name.endswith(".gz") else data
    expected = native.open_native(io.BytesIO(data), "t.trace.json")
    trace = native.open_native(source(sent), name)
    assert (trace.encoding, trace.compressed) == ("json", name.endswith(".gz"))
    assert trace.header == expected.header
    assert records(trace) == records(expected)
    got = report(native.open_native(source(sent), name))
    assert got == report(native.open_native(io.BytesIO(sent), name))
    assert got["status"] == engine.OK
    assert got["stats"]["events"] == 403


@pytest.mark.parametrize("gz", [False, True])
def test_a_document_past_its_limit_is_refused_before_it_is_parsed(gz: bool) -> None:
    data = document_bytes()
    sent = gzip.compress(data) if gz else data
    name = "t.trace.json.gz" if gz else "t.trace.json"
    at_limit = native.Limits(max_document_bytes=len(data))
    assert native.open_native(io.BytesIO(sent), name, at_limit).header["format"] == ("replay-trace")
    for source in (io.BytesIO(sent), io.BufferedReader(Trickle(sent, 1000))):
        with pytest.raises(ReplayError) as refused:
            native.open_native(source, name, native.Limits(max_document_bytes=len(data) - 1))
        assert refused.value.code == MALFORMED_TRACE
        assert refused.value.message == (
            f"the JSON document is larger than {len(data) - 1} bytes; send large traces as "
            "JSON Lines (*.trace.jsonl), which are streamed"
        )
        assert refused.value.detail == {"limit": "max_document_bytes"}


def test_an_empty_or_blank_document_is_refused() -> None:
    for data in (b"", b" \n\t\r\n"):
        with pytest.raises(ReplayError) as refused:
            native.open_native(io.BytesIO(data), "t.trace.json")
        assert refused.value.message == "the file is empty"


def test_a_document_past_the_total_limit_is_refused_by_the_bounded_reader() -> None:
    data = document_bytes()
    with pytest.raises(ReplayError) as refused:
        native.open_native(
            io.BufferedReader(Trickle(data, 4096)),
            "t.trace.json",
            native.Limits(max_total_bytes=len(data) - 1),
        )
    assert refused.value.detail == {"limit": "max_total_bytes"}
    assert refused.value.message == (
        f"t.trace.json: more than {len(data) - 1} bytes once decompressed; refused (a gzip "
        "bomb, or a trace larger than this console accepts)"
    )
