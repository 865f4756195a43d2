"""A Verist snapshot or baseline as the trace page's records (core/formats/verist/view.py): the
snapshot's fields, its input's entries, its artifacts and what its step output and commands
recorded; a baseline's envelope fields around the snapshot's, which no record holds whole;
each record's value exactly what its location holds in the file, and no input or output value
in the page's index."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from core.formats.protocol import VerifyContext
from core.formats.verist.adapter import VeristFormat
from core.replay import recordview
from core.replay.diff import pointer_get

FMT = VeristFormat()
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "verist"
#: every fixture that parses (hash_values.json is a list of vectors, unsupported.baseline.json
#: is refused)
FILES = sorted(
    p
    for p in FIXTURES.glob("*.json")
    if p.name not in ("hash_values.json", "unsupported.baseline.json")
)
BASELINE = FIXTURES / "pass.baseline.json"
HASH_ONLY = FIXTURES / "hash_only.snapshot.json"


def records_of(data: bytes) -> list[recordview.ViewRecord]:
    return list(FMT.records(FMT.parse(io.BytesIO(data), "file.json", VerifyContext())))


def exact(value: Any) -> str:
    """A JSON value spelt out: equal only for the same types, numbers and key order."""
    return json.dumps(value, sort_keys=False)


def test_a_baseline_is_its_envelope_around_the_snapshots_fields_and_artifacts():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(BASELINE.read_bytes())]

    assert found == [
        ("field", "format", "/format", None),
        ("field", "workflowId", "/snapshot/workflowId", None),
        ("field", "workflowVersion", "/snapshot/workflowVersion", None),
        ("field", "stepName", "/snapshot/stepName", None),
        ("field", "input", "/snapshot/input", None),
        ("input", "documentId", "/snapshot/input/documentId", 4),
        ("input", "text", "/snapshot/input/text", 4),
        ("input", "tags", "/snapshot/input/tags", 4),
        ("input", "weights", "/snapshot/input/weights", 4),
        ("input", "note", "/snapshot/input/note", 4),
        ("field", "inputHash", "/snapshot/inputHash", None),
        ("field", "artifacts", "/snapshot/artifacts", None),
        ("artifact", "llm-output", "/snapshot/artifacts/0", 11),
        ("artifact", "step-output", "/snapshot/artifacts/1", 11),
        ("output", "output", "/snapshot/artifacts/1/content/output", 13),
        ("output", "events", "/snapshot/artifacts/1/content/events", 13),
        ("artifact", "step-commands", "/snapshot/artifacts/2", 11),
        ("command", "emit", "/snapshot/artifacts/2/content/0", 16),
        ("field", "capturedAt", "/snapshot/capturedAt", None),
        ("field", "metadata", "/metadata", None),
    ]
    assert "" not in {r.location for r in records_of(BASELINE.read_bytes())}


def test_a_hash_only_artifact_says_so_and_has_no_parts():
    found = records_of(HASH_ONLY.read_bytes())
    artifacts = [(r.label, r.location, r.summary) for r in found if r.kind == "artifact"]

    assert artifacts == [
        (
            "step-output (hash-only)",
            "/artifacts/0",
            {
                "type": "object",
                "entries": 2,
                "hash": "sha256:f5b27debb973725e87090de73e95f92c217e7ad480146ac473fc6d8b45ec5386",
                "content": "hash-only",
            },
        ),
        (
            "step-commands",
            "/artifacts/1",
            {
                "type": "object",
                "entries": 3,
                "hash": "sha256:3abfb2c0827000b6e30b4739c9bd0c3fa04fb623221df8d8d64408b5da2a6237",
                "content": "kept",
            },
        ),
    ]
    assert [r.kind for r in found].count("output") == 0
    assert [(r.kind, r.location, r.parent) for r in found if r.kind == "command"] == [
        ("command", "/artifacts/1/content/0", 12)
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_records_value_is_what_its_location_holds_in_the_file(path: Path):
    document = json.loads(path.read_bytes())
    found = records_of(path.read_bytes())

    assert found
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_fixture_builds_the_pages_index(path: Path):
    found = records_of(path.read_bytes())
    index = recordview.build(found)

    assert index["count"] == len(found)
    document = json.loads(path.read_bytes())
    snapshot = document.get("snapshot", document)
    assert index["kinds"].get("artifact", 0) == len(snapshot["artifacts"])
    assert recordview.value_at(records_of(path.read_bytes()), len(found) - 1) == found[-1]


def test_no_input_or_output_value_reaches_the_pages_index():
    index = recordview.build(records_of(BASELINE.read_bytes()))
    text = json.dumps(index, ensure_ascii=False)

    for content in ("Refund request", "doc-123", "Refund: yes", "review.requested", "audit"):
        assert content not in text
