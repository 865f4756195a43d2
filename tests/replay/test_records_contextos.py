"""A ContextOS trace as the trace page's records (core/formats/contextos/view.py): in its
chain's order, its fields, the invoke, each tool envelope and the DecisionRecord with its
fields; no record holds the envelopes whole (a large trace's are spooled to disk and read back
one at a time); each record's value exactly what its location holds in the file, and no
argument or output in the page's index."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from core.formats.contextos import reader
from core.formats.contextos.adapter import ContextosFormat
from core.formats.protocol import VerifyContext
from core.replay import recordview
from core.replay.diff import pointer_get

FMT = ContextosFormat()
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "contextos"
#: every trace among the fixtures that parses (the malformed ones and schema_version 2 are
#: refused before any record)
TRACES = sorted(
    p
    for p in FIXTURES.glob("*.trace.json")
    if not p.name.startswith("malformed_") and p.name != "version_2.trace.json"
)
PASS = FIXTURES / "pass.trace.json"


def records_of(data: bytes) -> list[recordview.ViewRecord]:
    parsed = FMT.parse(io.BytesIO(data), "run.contextos.json", VerifyContext())
    return list(FMT.records(parsed))


def exact(value: Any) -> str:
    """A JSON value spelt out: equal only for the same types, numbers and key order."""
    return json.dumps(value, sort_keys=False)


def assert_values_at_locations(data: bytes, found: list[recordview.ViewRecord]) -> None:
    document = json.loads(data)
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


def test_a_trace_is_its_chain_in_order():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(PASS.read_bytes())]

    assert found == [
        ("field", "trace_id", "/trace_id", None),
        ("field", "pack_version", "/pack_version", None),
        ("field", "kg_snapshot_id", "/kg_snapshot_id", None),
        ("invoke", "invoke", "/invoke", None),
        ("tool envelope", "lookup_order req-7f3a-1", "/tool_envelopes/0", None),
        ("tool envelope", "check_history req-7f3a-2", "/tool_envelopes/1", None),
        ("decision record", "decision_record", "/decision_record", None),
        ("field", "decision_key", "/decision_record/decision_key", 6),
        ("field", "evidence_refs", "/decision_record/evidence_refs", 6),
        ("field", "policy_decisions", "/decision_record/policy_decisions", 6),
        ("field", "approvals", "/decision_record/approvals", 6),
        ("field", "lineage", "/decision_record/lineage", 6),
        ("field", "outputs", "/decision_record/outputs", 6),
        ("field", "status", "/decision_record/status", 6),
        ("field", "audit", "/audit", None),
    ]


def test_an_envelopes_row_keeps_its_capability_and_kinds_and_the_record_its_status():
    found = records_of(PASS.read_bytes())

    assert found[4].summary == {
        "type": "object",
        "entries": 2,
        "capability": "lookup_order",
        "call": "tool",
        "result": "ok",
    }
    assert found[6].summary == {"type": "object", "entries": 7, "status": "completed"}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_each_records_value_is_what_its_location_holds_in_the_file(path: Path):
    found = records_of(path.read_bytes())

    assert found
    assert_values_at_locations(path.read_bytes(), found)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_each_trace_builds_the_pages_index(path: Path):
    found = records_of(path.read_bytes())
    index = recordview.build(found)
    document = json.loads(path.read_bytes())

    assert index["count"] == len(found)
    assert index["kinds"].get("tool envelope", 0) == len(document["tool_envelopes"])
    assert recordview.value_at(records_of(path.read_bytes()), len(found) - 1) == found[-1]


def test_a_large_traces_envelopes_are_read_back_one_by_one_from_the_spool():
    document = json.loads(PASS.read_bytes())
    envelope = document["tool_envelopes"][0]
    document["tool_envelopes"] = []
    for i in range(3000):
        copied = copy.deepcopy(envelope)
        copied["call"]["call_id"] = copied["result"]["call_id"] = f"req-{i}"
        document["tool_envelopes"].append(copied)
    data = json.dumps(document, indent=1).encode()
    parsed = FMT.parse(io.BytesIO(data), "large.contextos.json", VerifyContext())
    assert len(data) > reader.SPOOL_AFTER_BYTES
    assert parsed.trace.envelopes.in_memory() is None  # spooled

    found = list(FMT.records(parsed))

    envelopes = [r for r in found if r.kind == "tool envelope"]
    assert [r.label for r in envelopes[:2]] == ["lookup_order req-0", "lookup_order req-1"]
    assert len(envelopes) == 3000
    assert envelopes[-1].location == "/tool_envelopes/2999"
    assert "/tool_envelopes" not in {r.location for r in found}
    assert_values_at_locations(data, found)
    assert recordview.value_at(FMT.records(parsed), 3000 + 3) == envelopes[-1]


def test_no_argument_or_output_reaches_the_pages_index():
    text = json.dumps(recordview.build(records_of(PASS.read_bytes())))

    for content in ("ord-1042", "cust-88", "refund:", "42.5", "acme", "runtime-key"):
        assert content not in text
