"""An AHD replay sidecar as the trace page's records (core/formats/ahd/view.py): its fields in
file order, its token and brief as the inputs the run hashed, each model after ``models``;
each record's value exactly what its location holds in the sidecar, and no argument of
``argv`` in the page's index.

The sidecars are read from tests/fixtures/published/ahd/checkout (Ad-Astra-Computing/ahd at
f0ed5672ebb6, FSL-1.1-Apache-2.0)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from core.formats.ahd.adapter import AhdFormat
from core.formats.protocol import VerifyContext
from core.replay import recordview
from core.replay.diff import pointer_get
from tests.published import AHD_CHECKOUT

FMT = AhdFormat()
SIDECARS = sorted((AHD_CHECKOUT / "docs" / "evals").glob("*.replay.json"))
SWISS = AHD_CHECKOUT / "docs" / "evals" / "2026-04-21-swiss.replay.json"
SWISS_TOKEN = "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1"


def records_of(data: bytes) -> list[recordview.ViewRecord]:
    parsed = FMT.parse(io.BytesIO(data), "run.replay.json", VerifyContext())
    return list(FMT.records(parsed))


def exact(value: Any) -> str:
    """A JSON value spelt out: equal only for the same types, numbers and key order."""
    return json.dumps(value, sort_keys=False)


def test_a_sidecar_is_its_fields_its_inputs_and_its_models():
    found = [(r.kind, r.label, r.location, r.parent) for r in records_of(SWISS.read_bytes())]

    assert found == [
        ("field", "schema_version", "/schema_version", None),
        ("field", "kind", "/kind", None),
        ("field", "ahd_version", "/ahd_version", None),
        ("field", "ahd_commit", "/ahd_commit", None),
        ("field", "git_dirty", "/git_dirty", None),
        ("field", "node_version", "/node_version", None),
        ("field", "platform", "/platform", None),
        ("field", "invoked_at", "/invoked_at", None),
        ("field", "argv", "/argv", None),
        ("input", "token tokens/swiss-editorial.yml", "/token", None),
        ("input", "brief briefs/landing.yml", "/brief", None),
        ("field", "sampling", "/sampling", None),
        ("field", "models", "/models", None),
        ("model", "cf:@cf/meta/llama-3.3-70b-instruct-fp8-fast", "/models/0", 12),
        ("model", "cf:@cf/meta/llama-4-scout-17b-16e-instruct", "/models/1", 12),
        ("model", "cf:@cf/qwen/qwen2.5-coder-32b-instruct", "/models/2", 12),
        ("model", "cf:@cf/mistralai/mistral-small-3.1-24b-instruct", "/models/3", 12),
        ("model", "claude-opus-4-7", "/models/4", 12),
        ("field", "conditions", "/conditions", None),
        ("field", "backfilled", "/backfilled", None),
    ]


def test_an_inputs_row_keeps_its_hash_and_a_models_its_provider():
    by_location = {r.location: r.summary for r in records_of(SWISS.read_bytes())}

    assert by_location["/token"] == {"type": "object", "entries": 2, "hash": SWISS_TOKEN}
    assert by_location["/models/4"] == {
        "type": "object",
        "entries": 3,
        "provider": "anthropic",
        "requests": 0,
    }


def test_a_critique_run_without_a_brief_lists_it_as_a_field():
    document = json.loads(SWISS.read_bytes())
    document.update(kind="critique", brief=None)
    found = records_of(json.dumps(document).encode())

    brief = next(r for r in found if r.location == "/brief")
    assert (brief.kind, brief.label, brief.value) == ("field", "brief", None)


@pytest.mark.parametrize("path", SIDECARS, ids=lambda p: p.name)
def test_each_records_value_is_what_its_location_holds_in_the_sidecar(path: Path):
    document = json.loads(path.read_bytes())
    found = records_of(path.read_bytes())

    assert [r.location for r in found if r.parent is None] == [f"/{k}" for k in document]
    for record in found:
        assert exact(pointer_get(document, record.location)) == exact(record.value)


@pytest.mark.parametrize("path", SIDECARS, ids=lambda p: p.name)
def test_each_sidecar_builds_the_pages_index(path: Path):
    found = records_of(path.read_bytes())
    index = recordview.build(found)

    assert index["count"] == len(found)
    assert index["kinds"]["input"] == 2
    assert index["kinds"].get("model", 0) == len(json.loads(path.read_bytes())["models"])
    assert recordview.value_at(records_of(path.read_bytes()), len(found) - 1) == found[-1]


def test_no_argument_of_argv_reaches_the_pages_index():
    document = json.loads(SWISS.read_bytes())
    document["argv"] = ["eval", "--prompt", "Ada Lovelace's private notes"]
    text = json.dumps(recordview.build(records_of(json.dumps(document).encode())))

    assert "Ada Lovelace" not in text
    assert "--prompt" not in text
