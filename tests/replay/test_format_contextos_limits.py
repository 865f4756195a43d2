"""The ContextOS reader's nesting limit is the same wherever it runs: a trace nested past
MAX_DEPTH is MALFORMED_TRACE naming its line, column and pointer, and one within it is read,
on the main thread, on a thread with a small stack (a development server's), and with most
of the recursion limit already used (deep in a server's stack), whole, streamed or spooled.
Before issue 20 the limit was whatever the decoder's recursion reached there."""

from __future__ import annotations

import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from core.errors import ReplayError
from core.formats import contextos as cx
from core.formats.contextos import reader as cx_reader

HERE = Path(__file__).parent / "fixtures" / "contextos"


def deep(depth: int, pad: int = 0) -> bytes:
    """pass.trace.json with ``depth`` nested arrays in its first tool call's args (and a
    ``pad``-character string in its second: past the size read whole, it is streamed)."""
    doc = json.loads((HERE / "pass.trace.json").read_bytes())
    doc["tool_envelopes"][0]["call"]["args"] = "__DEEP__"
    doc["tool_envelopes"][1]["call"]["args"] = "x" * pad
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace('"__DEEP__"', "[" * depth + "]" * depth).encode()


def outcome(data: bytes) -> tuple[str, str]:
    try:
        trace = cx.parse(io.BytesIO(data), "t.json")
    except ReplayError as exc:
        return exc.code, exc.message
    return "read", str(len(trace.envelopes))


def on_a_small_thread(data: bytes) -> tuple[str, str]:
    """On a thread with a 256 KiB stack (the main thread has 8 MiB)."""
    result: list[Any] = []
    old = threading.stack_size(256 * 1024)
    try:
        thread = threading.Thread(target=lambda: result.append(outcome(data)))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    return result[0]


def deep_in_the_stack(data: bytes) -> tuple[str, str]:
    """With all but ~60 frames of the recursion limit used by callers."""

    def down(n: int) -> tuple[str, str]:
        return down(n - 1) if n else outcome(data)

    used = len(_frames())
    return down(sys.getrecursionlimit() - used - 60)


def _frames() -> list[Any]:
    frame, out = sys._getframe(), []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


WHERE = ["main", "small thread", "deep stack"]
RUN = {"main": outcome, "small thread": on_a_small_thread, "deep stack": deep_in_the_stack}


def refusal(column: int) -> tuple[str, str]:
    return (
        "MALFORMED_TRACE",
        f"t.json: nesting deeper than 64 levels at line 1 column {column} "
        "(/tool_envelopes/0/call/args" + "/0" * 60 + ")",
    )


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("pad", [0, 300_000], ids=["whole", "streamed"])
def test_the_limit_is_the_same_on_every_thread_and_stack(where, pad):
    run = RUN[where]
    # the document, tool_envelopes, the envelope, call, then args: the arrays start at 5
    assert run(deep(59, pad)) == ("read", "2")  # 63 levels
    assert run(deep(60, pad)) == ("read", "2")  # 64 levels: the limit
    assert run(deep(61, pad)) == refusal(654)
    assert run(deep(900, pad)) == refusal(654)  # once accepted or not, by the stack
    assert run(deep(50_000, pad)) == refusal(654)


def test_a_deep_envelope_is_refused_before_it_is_spooled_and_read_back(monkeypatch):
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    monkeypatch.setattr(cx_reader, "SPOOL_AFTER_BYTES", 10)
    assert outcome(deep(60)) == ("read", "2")
    assert on_a_small_thread(deep(900)) == refusal(654)


def test_a_deep_head_value_names_its_pointer():
    doc = json.loads((HERE / "pass.trace.json").read_bytes())
    doc["decision_record"]["outputs"] = {"a": "__DEEP__"}
    text = json.dumps(doc, indent=2).replace('"__DEEP__"', "[" * 70 + "]" * 70)
    code, message = outcome(text.encode() + b" " * 300_000)
    assert code == "MALFORMED_TRACE"
    line = text[: text.index("[" * 70)].count("\n") + 1
    assert message.startswith(f"t.json: nesting deeper than 64 levels at line {line} column ")
    assert message.endswith("(/decision_record/outputs/a" + "/0" * 61 + ")")


def containers(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(map(containers, value.values()))
    if isinstance(value, list):
        return 1 + sum(map(containers, value))
    return 0


def test_a_value_with_more_containers_than_the_limit_is_refused_before_parsing(monkeypatch):
    monkeypatch.setattr(cx_reader, "MAX_CONTAINERS", 1000)
    doc = json.loads((HERE / "pass.trace.json").read_bytes())
    envelope = doc["tool_envelopes"][1]
    envelope["call"]["args"] = "__MANY__"
    room = 1000 - containers(envelope) - 1  # the envelope's own, and args' outer array

    def with_arrays(n: int) -> bytes:
        many = "[" + ",".join(["[]"] * n) + "]"
        return json.dumps(doc).replace('"__MANY__"', many).encode() + b" " * 300_000

    assert outcome(with_arrays(room + 1)) == (
        "MALFORMED_TRACE",
        "t.json: tool_envelopes[1] holds more than 1000 objects and arrays; refused before "
        "parsing it",
    )
    assert outcome(with_arrays(room)) == ("read", "2")  # 1000: the limit
