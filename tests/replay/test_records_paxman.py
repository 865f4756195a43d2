"""A Paxman artifact as the trace page's records (core/formats/paxman/view.py): its fields in
file order, each followed by its entries (field results, evidence, diagnostics, the plan's
field plans), each record's value exactly what its location holds in the file, and no
resolved value in the page's index.

The published goldens are read from tests/fixtures/published/paxman (nexusnv/paxman at
bc5d79bc9568, MIT)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from core.formats.paxman.adapter import PaxmanFormat
from core.formats.protocol import VerifyContext
from core.replay import recordview
from core.replay.diff import pointer_get
from tests.published import PAXMAN

FMT = PaxmanFormat()
GOLDENS = sorted(PAXMAN.glob("*.json"))
MONEY = PAXMAN / "money_unresolved.json"


def records_of(data: bytes) -> list[recordview.ViewRecord]:
    return list(FMT.records(FMT.parse(io.BytesIO(data), "artifact.json", VerifyContext())))


def exact(value: Any) -> str:
    """A JSON value spelt out: equal only for the same types, numbers and key order."""
    return json.dumps(value, sort_keys=False)


def test_an_artifact_is_its_fields_each_followed_by_its_entries():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(MONEY.read_bytes())]

    assert found == [
        ("field", "capability_versions", "/capability_versions", None),
        ("field", "contract_id", "/contract_id", None),
        ("field", "diagnostics", "/diagnostics", None),
        ("diagnostic", "CAPABILITY_OK amount", "/diagnostics/0", 2),
        ("diagnostic", "CAPABILITY_OK notes", "/diagnostics/1", 2),
        ("diagnostic", "CAPABILITY_OK amount", "/diagnostics/2", 2),
        ("field", "evidence", "/evidence", None),
        ("field", "execution_plan", "/execution_plan", None),
        ("field plan", "field_with-money-v1_amount", "/execution_plan/field_plans/0", 7),
        ("field plan", "field_with-money-v1_notes", "/execution_plan/field_plans/1", 7),
        ("diagnostic", "FIELD_UNRESOLVED amount", "/execution_plan/diagnostics/0", 7),
        ("field", "field_results", "/field_results", None),
        ("field result", "amount (UNRESOLVED)", "/field_results/amount", 11),
        ("field result", "notes (UNRESOLVED)", "/field_results/notes", 11),
        ("field", "metadata", "/metadata", None),
        ("field", "normalized_data", "/normalized_data", None),
        ("field", "paxman_version", "/paxman_version", None),
        ("field", "planner_version", "/planner_version", None),
        ("field", "replay_hash", "/replay_hash", None),
        ("field", "statistics", "/statistics", None),
        ("field", "status", "/status", None),
        ("field", "unresolved_fields", "/unresolved_fields", None),
    ]


def test_a_rows_summary_says_types_counts_and_statuses():
    by_location = {r.location: r.summary for r in records_of(MONEY.read_bytes())}

    assert by_location["/field_results/amount"] == {
        "type": "object",
        "entries": 6,
        "status": "UNRESOLVED",
        "confidence": "UNTRUSTED",
        "candidates": 0,
        "evidence_refs": 0,
    }
    assert by_location["/diagnostics/0"] == {
        "type": "object",
        "entries": 4,
        "severity": "INFO",
        "code": "CAPABILITY_OK",
    }
    assert by_location["/unresolved_fields"] == {"type": "array", "items": 2}
    assert by_location["/status"] == {"type": "string"}


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_each_records_value_is_what_its_location_holds_in_the_file(path: Path):
    document = json.loads(path.read_bytes())
    found = records_of(path.read_bytes())

    assert found
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_each_golden_builds_the_pages_index(path: Path):
    found = records_of(path.read_bytes())
    index = recordview.build(found)

    assert index["count"] == len(found)
    assert index["kinds"]["field"] == len(json.loads(path.read_bytes()))
    assert recordview.value_at(records_of(path.read_bytes()), len(found) - 1) == found[-1]


def test_a_field_path_with_a_slash_or_a_tilde_is_escaped_in_its_location():
    document = json.loads(MONEY.read_bytes())
    result = dict(document["field_results"]["amount"], field_path="a/b~c")
    document["field_results"] = {"a/b~c": result}
    found = records_of(json.dumps(document).encode())

    (entry,) = [r for r in found if r.kind == "field result"]
    assert (entry.label, entry.location) == ("a/b~c (UNRESOLVED)", "/field_results/a~1b~0c")
    assert pointer_get(document, entry.location) == result


def test_no_resolved_value_reaches_the_pages_index():
    document = json.loads(MONEY.read_bytes())
    document["field_results"]["amount"].update(status="SUCCESS", value="Ada Lovelace, 42 EUR")
    document["normalized_data"] = {"amount": "Ada Lovelace, 42 EUR"}
    index = recordview.build(records_of(json.dumps(document).encode()))

    assert "Ada Lovelace" not in json.dumps(index)
    assert ["field result", "amount (SUCCESS)"] in [row[:2] for row in index["records"]]


def test_a_label_past_its_length_is_cut():
    document = json.loads(MONEY.read_bytes())
    long_path = "x" * 500
    document["field_results"] = {long_path: {"field_path": long_path}}
    (entry,) = [r for r in records_of(json.dumps(document).encode()) if r.kind == "field result"]

    assert len(entry.label) == 120
    assert entry.label.endswith("\u2026")
    assert entry.location == "/field_results/" + long_path


def test_an_entry_of_any_shape_is_a_record_named_by_its_id_or_its_place():
    document = json.loads(MONEY.read_bytes())
    document["evidence"] = [{"evidence_id": "ev-1", "capability": "regex"}, 3, "text"]
    found = records_of(json.dumps(document).encode())

    evidence = [(r.label, r.location, r.summary) for r in found if r.kind == "evidence item"]
    assert evidence == [
        ("ev-1", "/evidence/0", {"type": "object", "entries": 2}),
        ("evidence item 1", "/evidence/1", {"type": "number"}),
        ("evidence item 2", "/evidence/2", {"type": "string"}),
    ]
