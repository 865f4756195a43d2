"""The trace index (core/replay/traceindex.py): marks every STRIDE-th record at its byte offset,
buckets the events, stops at its byte budget, and reads a window from the mark before it."""

from __future__ import annotations

import io
import json

import pytest

from core.replay import traceindex


def _jsonl(events: int, steps: int = 0) -> bytes:
    lines = [json.dumps({"format": "replay-trace"})]
    lines += [
        json.dumps({"record": "event", "seq": i, "type": "tick" if i % 2 else "obs"})
        for i in range(events)
    ]
    lines += [json.dumps({"record": "step", "seq": i, "step_id": f"s{i}"}) for i in range(steps)]
    return ("\n".join(lines) + "\n").encode()


class _Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.lines = 0

    def readline(self, size: int | None = -1) -> bytes:
        self.lines += 1
        return super().readline(size)


def test_it_marks_every_stride_th_event_at_its_line_offset():
    data = _jsonl(200, 3)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))

    assert (index["events"], index["steps"], index["cut_short"]) == (200, 3, False)
    assert [m[0] for m in index["event_marks"]] == [0, 64, 128, 192]
    for seq, offset in index["event_marks"]:
        line = data[offset : data.index(b"\n", offset)]
        assert json.loads(line)["seq"] == seq
    assert index["step_marks"] == [[0, data.index(b'{"record": "step"')]]
    assert index["end"] == len(data)


def test_it_buckets_the_events_with_their_counts_by_type():
    data = _jsonl(1000)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))

    buckets = index["buckets"]
    assert len(buckets) == traceindex.BUCKETS
    assert buckets[0] == {"first": 0, "last": 4, "count": 5, "types": {"obs": 3, "tick": 2}}
    assert buckets[-1]["last"] == 999
    assert sum(b["count"] for b in buckets) == 1000


def test_it_stops_at_its_budget_and_says_so():
    data = _jsonl(100)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data) // 2)

    assert index["cut_short"] is True
    assert 0 < index["events"] < 100
    assert index["end"] <= len(data) // 2


def test_a_window_after_a_seq_reads_from_the_mark_before_it():
    data = _jsonl(5000)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))
    opened: list[_Counting] = []

    def open_stream() -> _Counting:
        opened.append(_Counting(data))
        return opened[-1]

    window = traceindex.read_window(index, open_stream, "event", after=4899, limit=50)

    assert [e["seq"] for e in window.records] == list(range(4900, 4950))
    assert (window.has_before, window.has_after) == (True, True)
    assert window.parsed <= 50 + 1 + traceindex.STRIDE
    assert opened[0].lines <= 50 + 1 + traceindex.STRIDE + 1


def test_a_window_before_a_seq_is_the_records_just_before_it():
    data = _jsonl(300)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))

    window = traceindex.read_window(index, lambda: io.BytesIO(data), "event", before=200, limit=10)

    assert [e["seq"] for e in window.records] == list(range(190, 200))
    assert (window.has_before, window.has_after) == (True, True)


def test_the_first_and_last_windows_have_no_link_outward():
    data = _jsonl(30)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))

    window = traceindex.read_window(index, lambda: io.BytesIO(data), "event", limit=50)

    assert len(window.records) == 30
    assert (window.has_before, window.has_after) == (False, False)


def test_it_says_when_the_stored_file_does_not_match_its_index():
    data = _jsonl(100)
    index = traceindex.build_jsonl(io.BytesIO(data), budget=len(data))
    other = data.replace(b'{"record": "event", "seq": 70', b'{not json, "seq": 70')

    with pytest.raises(traceindex.IndexMismatch, match=r"^a line of the stored file is not JSON"):
        traceindex.read_window(index, lambda: io.BytesIO(other), "event", after=69, limit=5)


def test_a_document_index_walks_the_records():
    records = [("event", {"seq": i, "type": "t"}) for i in range(100)]
    index = traceindex.build_records(records)

    window = traceindex.read_window(
        index, None, "event", after=89, limit=5, records=lambda: iter(records)
    )

    assert index["encoding"] == "json"
    assert [e["seq"] for e in window.records] == [90, 91, 92, 93, 94]
