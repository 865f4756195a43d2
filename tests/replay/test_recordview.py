"""The one records view every format's trace page reads (core.replay.recordview)."""

from __future__ import annotations

import itertools
import json

import pytest

from core.replay import recordview
from core.replay.recordview import ViewRecord


def _tree() -> list[ViewRecord]:
    return [
        ViewRecord("span", "root", "/spans/0", {"a": 1}, None, {"kind": "agent"}),
        ViewRecord("span", "call", "/spans/2", {"b": 2}, 0, {"kind": "model"}),
        ViewRecord("span", "tool", "/spans/1", {"c": 3}, 1, {"kind": "tool"}, (10, 5)),
        ViewRecord("event", "late", "/events/0", 4, None),
    ]


def test_the_index_keeps_every_record_but_no_value():
    index = recordview.build(_tree())
    assert index["view"] == "records"
    assert recordview.is_view(index)
    assert index["count"] == 4
    assert index["kinds"] == {"span": 3, "event": 1}
    assert index["records"] == [
        ["span", "root", "/spans/0", None, 0, {"kind": "agent"}, None],
        ["span", "call", "/spans/2", 0, 1, {"kind": "model"}, None],
        ["span", "tool", "/spans/1", 1, 2, {"kind": "tool"}, [10, 5]],
        ["event", "late", "/events/0", None, 0, {}, None],
    ]
    # no value reaches the index (erasure and redaction act on the stored file alone)
    text = json.dumps(index)
    assert '"a": 1' not in text
    assert '"b": 2' not in text
    assert index["buckets"] == [
        {"first": i, "last": i, "count": 1, "types": {k: 1}}
        for i, k in enumerate(["span", "span", "span", "event"])
    ]


def test_a_native_index_is_not_a_records_view():
    assert not recordview.is_view({"version": 1, "encoding": "json", "events": 3})


@pytest.mark.parametrize("parent", [1, 5, -1, "0"])
def test_a_parent_that_is_not_an_earlier_record_is_refused(parent):
    records = [ViewRecord("x", "a", "/0"), ViewRecord("x", "b", "/1", parent=parent)]
    with pytest.raises(recordview.ViewError, match=f"record 1 names parent {parent!r}"):
        recordview.build(records)


def test_buckets_split_many_records_into_at_most_two_hundred_runs():
    index = recordview.build(ViewRecord("span", str(i), f"/{i}") for i in range(1001))
    buckets = index["buckets"]
    assert len(buckets) == recordview.BUCKETS
    assert sum(b["count"] for b in buckets) == 1001
    assert buckets[0]["first"] == 0
    assert buckets[-1]["last"] == 1000
    assert all(a["last"] + 1 == b["first"] for a, b in itertools.pairwise(buckets))


def test_progress_is_said_every_ten_thousand_records():
    seen: list[int] = []
    recordview.build((ViewRecord("s", "", "") for _ in range(25_000)), seen.append)
    assert seen == [10_000, 20_000]


def test_a_window_is_a_slice_by_position_with_what_lies_around_it():
    index = recordview.build(_tree())
    first = recordview.window(index, start=0, limit=2)
    assert [r["label"] for r in first.rows] == ["root", "call"]
    assert first.rows[1] == {
        "extent": None,
        "position": 1,
        "kind": "span",
        "label": "call",
        "location": "/spans/2",
        "parent": 0,
        "depth": 1,
        "indent": "\u2003",
        "summary": {"kind": "model"},
    }
    assert (first.has_before, first.has_after) == (False, True)
    last = recordview.window(index, start=2, limit=2)
    assert [r["position"] for r in last.rows] == [2, 3]
    assert (last.has_before, last.has_after) == (True, False)
    # a start past the end shows the last record, not an empty page
    assert [r["position"] for r in recordview.window(index, start=99, limit=2).rows] == [3]
    assert recordview.window(recordview.build([]), start=5).rows == []


def test_the_index_keeps_a_format_s_header_facts_and_each_record_s_extent():
    index = recordview.build(_tree(), facts={"spans": "3"})
    assert index["facts"] == {"spans": "3"}
    assert recordview.build(_tree())["facts"] == {}
    assert recordview.extent_of(index, 2) == (10, 5)
    assert recordview.extent_of(index, 1) is None
    assert recordview.extent_of(index, 4) is None
    assert recordview.extent_of(index, -1) is None


def test_the_value_of_one_record_is_read_from_the_records_again():
    assert recordview.value_at(_tree(), 2).value == {"c": 3}
    assert recordview.value_at(_tree(), 4) is None
    assert recordview.value_at(_tree(), -1) is None
