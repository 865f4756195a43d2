"""A MACE reflective log as the trace page's records (core/formats/mace/view.py): the log
entry's fields in file order, each list's entries (iterations, events, agent outputs, votes,
memory reads...) after their field; each record's value exactly what its location holds in
the file, and no percept, output text or memory key in the page's index."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from core.formats.mace.adapter import MaceFormat
from core.formats.protocol import VerifyContext
from core.replay import recordview
from core.replay.diff import pointer_get
from tests.replay import mace_reference as ref

FMT = MaceFormat()
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mace"
#: every log among the fixtures (the files named by a snapshot id are snapshot files)
LOGS = [FIXTURES / "log_s1.json", *sorted((FIXTURES / "writer").glob("*.json"))]
LOG_S1 = FIXTURES / "log_s1.json"
CLEAN = FIXTURES / "writer" / "clean.json"


def records_of(data: bytes) -> list[recordview.ViewRecord]:
    return list(FMT.records(FMT.parse(io.BytesIO(data), "log.json", VerifyContext())))


def exact(value: Any) -> str:
    """A JSON value spelt out: equal only for the same types, numbers and key order."""
    return json.dumps(value, sort_keys=False)


def test_a_log_is_its_fields_each_list_followed_by_its_entries():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(LOG_S1.read_bytes())]

    assert found == [
        ("field", "log_id", "/log_id", None),
        ("field", "timestamp", "/timestamp", None),
        ("field", "job_id", "/job_id", None),
        ("field", "job_seed", "/job_seed", None),
        ("field", "percept", "/percept", None),
        ("field", "router_decision", "/router_decision", None),
        ("field", "iteration_trace", "/iteration_trace", None),
        ("iteration", "it_0", "/iteration_trace/0", 6),
        ("iteration", "it_1", "/iteration_trace/1", 6),
        ("field", "agent_outputs", "/agent_outputs", None),
        ("agent output", "out_s1_0", "/agent_outputs/0", 9),
        ("agent output", "out_s1_1", "/agent_outputs/1", 9),
        ("field", "council_votes", "/council_votes", None),
        ("field", "event_refs", "/event_refs", None),
        ("event", "1 apt_event", "/event_refs/0", 13),
        ("event", "2 action_request", "/event_refs/1", 13),
        ("event", "3 episodic_write", "/event_refs/2", 13),
        ("field", "brainstate_before", "/brainstate_before", None),
        ("field", "brainstate_after", "/brainstate_after", None),
        ("field", "final_output", "/final_output", None),
        ("field", "random_seed", "/random_seed", None),
        ("field", "model_versions", "/model_versions", None),
        ("field", "REPLAYABLE", "/REPLAYABLE", None),
        ("field", "selfrep_snapshot_id", "/selfrep_snapshot_id", None),
        ("field", "brainstate_snapshot_id", "/brainstate_snapshot_id", None),
        ("field", "router_snapshot_id", "/router_snapshot_id", None),
        ("field", "privacy_snapshot_id", "/privacy_snapshot_id", None),
        ("field", "governance_snapshot_id", "/governance_snapshot_id", None),
        ("field", "immutable_subpayload", "/immutable_subpayload", None),
        ("field", "signature", "/signature", None),
        ("field", "signature_key_id", "/signature_key_id", None),
    ]


def test_an_events_row_keeps_its_index_type_and_id():
    event = next(r for r in records_of(LOG_S1.read_bytes()) if r.kind == "event")

    assert event.summary == {
        "type": "object",
        "entries": 3,
        "sequence_index": 1,
        "event_type": "apt_event",
        "event_id": "1c645defc0106cc58761de31f07d80a7d106a8462ab4760eecf8e5e52bbbc0fe",
    }


def test_a_writers_log_lists_its_votes_and_memory_by_position_not_by_key():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(CLEAN.read_bytes())]
    entries = [row for row in found if row[0] != "field"]

    assert entries == [
        ("agent output", "profile_agent", "/agent_outputs/0", 0),
        ("vote", "profile_agent", "/council_votes/0", 5),
        ("memory read", "memory read 0", "/memory_reads/0", 12),
        ("memory write", "memory write 0", "/memory_writes/0", 14),
    ]
    vote = next(r for r in records_of(CLEAN.read_bytes()) if r.kind == "vote")
    assert vote.summary["approve"] is True


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_each_records_value_is_what_its_location_holds_in_the_file(path: Path):
    document = json.loads(path.read_bytes())
    found = records_of(path.read_bytes())

    assert [r.location for r in found if r.parent is None] == [f"/{k}" for k in document]
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


def test_a_reference_job_s_log_holds_its_values_at_their_locations():
    data = ref.dumps(ref.job(iterations=5)["log"])
    document = json.loads(data)
    found = records_of(data)

    assert [r.kind for r in found].count("iteration") == 5
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_each_log_builds_the_pages_index(path: Path):
    found = records_of(path.read_bytes())
    index = recordview.build(found)

    assert index["count"] == len(found)
    assert index["kinds"]["field"] == len(json.loads(path.read_bytes()))
    assert recordview.value_at(records_of(path.read_bytes()), len(found) - 1) == found[-1]


def test_no_percept_output_or_memory_key_reaches_the_pages_index():
    for path in (LOG_S1, CLEAN):
        text = json.dumps(recordview.build(records_of(path.read_bytes())), ensure_ascii=False)
        for content in ("Hello world", "answer 0", "Your name is Ada", "user/profile", "Hello!"):
            assert content not in text
