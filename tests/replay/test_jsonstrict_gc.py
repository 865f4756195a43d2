"""The whole-document decode pauses the cyclic garbage collector (issue 23 item 4: a quarter
of the decoding time of a 30 MB trace went to collections walking the new containers), and
always leaves it as it found it, whatever happens."""

from __future__ import annotations

import gc
import json

import pytest

from core.errors import ReplayError
from core.formats import jsonstrict


class _Spy:
    """Stands in for the strict decoder: notes whether the collector ran while it decoded."""

    def __init__(self, fail: bool = False) -> None:
        self.enabled: list[bool] = []
        self.fail = fail

    def raw_decode(self, text: str, start: int) -> tuple[object, int]:
        self.enabled.append(gc.isenabled())
        if self.fail:
            raise json.JSONDecodeError("Expecting value", text, start)
        return json.JSONDecoder().raw_decode(text, start)


def big_text() -> bytes:
    return json.dumps({"events": ["x" * 100] * 20_000}).encode()


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_a_large_text_is_decoded_with_the_collector_paused_then_resumed(collector, monkeypatch):
    spy = _Spy()
    monkeypatch.setattr(jsonstrict, "_DECODER", spy)
    data = big_text()
    assert len(data) >= jsonstrict._NO_COLLECTION_BYTES
    assert jsonstrict.loads_strict(data, where="t") == json.loads(data)
    assert spy.enabled == [False]
    assert gc.isenabled()


def test_a_small_text_leaves_the_collector_running(collector, monkeypatch):
    spy = _Spy()
    monkeypatch.setattr(jsonstrict, "_DECODER", spy)
    assert jsonstrict.loads_strict(b'{"a": 1}', where="t") == {"a": 1}
    assert spy.enabled == [True]


def test_a_refused_large_text_resumes_the_collector(collector, monkeypatch):
    monkeypatch.setattr(jsonstrict, "_DECODER", _Spy(fail=True))
    with pytest.raises(ReplayError) as refused:
        jsonstrict.loads_strict(big_text(), where="t")
    assert refused.value.code == "MALFORMED_TRACE"
    assert gc.isenabled()


def test_a_paused_collector_stays_paused(collector, monkeypatch):
    spy = _Spy()
    monkeypatch.setattr(jsonstrict, "_DECODER", spy)
    gc.disable()
    jsonstrict.loads_strict(big_text(), where="t")
    assert spy.enabled == [False]
    assert not gc.isenabled()
