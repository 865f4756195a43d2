"""Two native traces compared record by record (core.formats.native.compare, pure): the
diverged demo run differs from the clean one at /steps/3/output/route, "search" against
"write", and its seal, listed last; both spellings and a gzip compare alike; a page of
changes stops reading once full."""

from __future__ import annotations

import copy
import gzip
import io

import pytest

from core.formats import native
from core.formats.native.compare import (
    SEAL_ALONE,
    Change,
    compare,
    compare_records,
)
from core.formats.native.demo import variants
from core.formats.native.recorder import reseal, signer_for
from core.replay.diff import MISSING
from core.replay.signatures import HMAC_SHA256

SIGNER = signer_for("compare-tests", HMAC_SHA256, b"compare tests key, a test vector")
DOCS = variants(SIGNER)


def opened(doc, spelling="json"):
    if spelling == "json":
        return native.open_native(io.BytesIO(native.dumps_document(doc)), "t.trace.json")
    data = b"".join(native.iter_jsonl(doc))
    if spelling == "jsonl.gz":
        return native.open_native(io.BytesIO(gzip.compress(data, mtime=0)), "t.trace.jsonl.gz")
    return native.open_native(io.BytesIO(data), "t.trace.jsonl")


def summary(comparison):
    return [(s.kind, s.path, s.title, [c.path for c in s.changes]) for s in comparison.sections]


SPELLINGS = [("json", "json"), ("json", "jsonl"), ("jsonl", "jsonl.gz"), ("jsonl.gz", "jsonl")]


@pytest.mark.parametrize(("left", "right"), SPELLINGS)
def test_the_diverged_run_differs_at_the_routing_step_then_at_its_seal(left, right):
    found = compare(opened(DOCS["ok"], left), opened(DOCS["diverged"], right))

    assert summary(found) == [
        (
            "step",
            "/steps/3",
            "step 3 (seq 3, route-1, router.decide@1)",
            ["/steps/3/output/route"],
        ),
        ("seal", "/seal", "seal", ["/seal/value"]),
    ]
    step = found.sections[0].changes[0]
    assert step == Change("/steps/3/output/route", "changed", "search", "write")
    seal = found.sections[1].changes[0]
    assert (seal.before, seal.after) == (
        DOCS["ok"]["seal"]["value"],
        DOCS["diverged"]["seal"]["value"],
    )
    assert (found.shown, found.more, found.seal_alone, found.stopped) == (1, False, False, None)


@pytest.mark.parametrize(("left", "right"), SPELLINGS)
def test_a_run_compared_with_itself_has_no_changes(left, right):
    found = compare(opened(DOCS["ok"], left), opened(DOCS["ok"], right))
    assert (found.sections, found.shown, found.more) == ([], 0, False)


@pytest.mark.parametrize(("left", "right"), SPELLINGS)
def test_an_edited_event_and_a_wrong_final_answer_are_named_in_reading_order(left, right):
    edited = copy.deepcopy(DOCS["ok"])
    edited["events"][2]["payload"]["note"] = "added later"
    edited["final_answer"]["answer"] = "search:0000000000000000"
    found = compare(opened(DOCS["ok"], left), opened(reseal(edited, SIGNER), right))

    assert summary(found) == [
        (
            "event",
            "/events/2",
            f"event 2 (seq 2, {DOCS['ok']['events'][2]['type']})",
            ["/events/2/payload/note"],
        ),
        ("final_answer", "/final_answer", "final answer", ["/final_answer/answer"]),
        ("seal", "/seal", "seal", ["/seal/value"]),
    ]
    note = found.sections[0].changes[0]
    assert (note.kind, note.before, note.after) == ("added", MISSING, "added later")


@pytest.mark.parametrize(("left", "right"), SPELLINGS)
def test_records_only_one_file_has_are_added_or_removed(left, right):
    shorter = copy.deepcopy(DOCS["ok"])
    del shorter["steps"][-1]
    del shorter["outputs"]["out-0002"]
    found = compare(opened(DOCS["ok"], left), opened(reseal(shorter, SIGNER), right))
    last = len(DOCS["ok"]["steps"]) - 1
    rows = [(c.path, c.kind) for c in found.changes]

    assert rows == [
        (f"/steps/{last}", "removed"),
        ("/outputs/out-0002", "removed"),
        ("/seal/value", "changed"),
    ]


def test_a_seal_that_differs_alone_is_said_to_differ_alone():
    other = copy.deepcopy(DOCS["ok"])
    other["seal"]["value"] = "0" * 64
    found = compare(opened(DOCS["ok"]), opened(other))
    assert summary(found) == [("seal", "/seal", "seal", ["/seal/value"])]
    assert found.seal_alone
    assert SEAL_ALONE.startswith("Only the seal differs")


def test_a_page_of_changes_stops_reading_once_it_is_full():
    edited = copy.deepcopy(DOCS["ok"])
    for event in edited["events"]:
        event["payload"]["page"] = event["seq"]
    read = {"a": 0, "b": 0}

    def counted(trace, side):
        for record in trace.records():
            read[side] += 1
            yield record

    a, b = opened(DOCS["ok"], "jsonl"), opened(edited, "jsonl")
    first = compare_records(a.header, b.header, counted(a, "a"), counted(b, "b"), limit=3)

    assert [c.path for c in first.changes] == [
        "/events/0/payload/page",
        "/events/1/payload/page",
        "/events/2/payload/page",
    ]
    assert (first.more, first.next_offset) == (True, 3)
    assert read["a"] == read["b"] == 4  # the fourth pair told that more follow
    second = compare(opened(DOCS["ok"]), opened(edited), offset=3, limit=3)
    assert [c.path for c in second.changes] == [f"/events/{i}/payload/page" for i in (3, 4, 5)]
    assert second.seal_alone is False


def test_an_event_missing_in_the_middle_pairs_the_rest_by_place():
    shorter = copy.deepcopy(DOCS["ok"])
    del shorter["events"][5]
    found = compare(opened(DOCS["ok"], "jsonl"), opened(shorter, "jsonl"))
    events = [c for c in found.changes if c.path.startswith("/events/")]
    last = len(DOCS["ok"]["events"]) - 1
    assert events[-1] == Change(f"/events/{last}", "removed", DOCS["ok"]["events"][last], MISSING)
    assert events[0].path == "/events/5/seq"
    assert [c.path for c in found.changes if not c.path.startswith("/events/")] == []


def test_two_jsonl_traces_parse_only_the_lines_that_differ(monkeypatch):
    from core.formats.native import compare as module

    parsed = []
    real = module._parsed

    def counting(line, lineno):
        parsed.append(lineno)
        return real(line, lineno)

    monkeypatch.setattr(module, "_parsed", counting)
    found = compare(opened(DOCS["ok"], "jsonl"), opened(DOCS["diverged"], "jsonl.gz"))
    step_line = 2 + len(DOCS["ok"]["events"]) + 3  # the header, the events, steps 0 to 3
    assert parsed == [step_line, step_line]
    assert [c.path for c in found.changes] == ["/steps/3/output/route", "/seal/value"]
