"""The verify endpoint and the upload page tell the truth about halts: a file whose trace is
halted is refused by ``POST /api/traces/verify/`` with FORCE_HALT_ACTIVE naming the halt, as a
replay would be, and the upload page says the stored trace's replays are halted."""

from __future__ import annotations

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from governance.models import Halt
from replay.models import Trace
from tests.console.conftest import trace_bytes
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def halt(ingest):
    """An admin's security incident against the trace id halts every copy of the trace."""
    from governance.services import security_incident_declare

    trace = ingest("broken_chain")  # a copy sharing the ok trace's id; "ok" itself is uploaded
    security_incident_declare(actor=persona("adam"), reason="key leaked", trace=trace.trace_id)
    return Halt.objects.active().get(payload__target_kind="trace")


def test_the_verify_endpoint_refuses_a_halted_trace_naming_the_halt(as_persona, halt):
    response = as_persona("alice").post(
        "/api/traces/verify/?filename=ok.trace.json",
        trace_bytes("ok"),
        content_type="application/octet-stream",
    )
    assert response.status_code == 200
    report = response.json()["report"]
    named = f"halt {halt.seq} on trace {halt.target_id}: {halt.reason}"
    assert (report["status"], report["error_code"]) == ("refused", "FORCE_HALT_ACTIVE")
    assert report["message"] == f"replay is halted until a council FORCE_HALT_CLEAR: {named}"
    assert [c for c in report["checks"] if c["name"] == "halts"] == [
        {"name": "halts", "ok": False, "detail": named}
    ]


def test_the_verify_endpoint_says_no_active_halt_after_reading_the_ledger(as_persona, trace_key):
    response = as_persona("alice").post(
        "/api/traces/verify/?filename=ok.trace.json",
        trace_bytes("ok"),
        content_type="application/octet-stream",
    )
    report = response.json()["report"]
    assert report["status"] == "ok"
    assert [c for c in report["checks"] if c["name"] == "halts"] == [
        {"name": "halts", "ok": True, "detail": "no active halt on the trace or its snapshots"}
    ]


def test_the_upload_page_says_the_stored_traces_replays_are_halted(as_persona, halt):
    response = as_persona("alice").post(
        "/traces/upload/",
        {"files": [SimpleUploadedFile("ok.trace.json", trace_bytes("ok"))]},
    )
    assert response.status_code == 200
    body = response.content.decode()
    stored = Trace.objects.get(filename="ok.trace.json")
    assert "no active halt" not in body
    assert (
        f'<p class="refusal" role="alert" id="halted-{stored.blob.sha256}">Replays of this '
        "trace are halted until a council FORCE_HALT_CLEAR: "
        f"<code>{halt.target_id}</code> — {html.escape(f'{halt.label}: {halt.reason}')}</p>"
    ) in body


def test_the_upload_report_says_the_upload_did_not_check_halts(as_persona, halt):
    response = as_persona("alice").post(
        "/api/traces/upload/?filename=ok.trace.json",
        trace_bytes("ok"),
        content_type="application/octet-stream",
    )
    assert response.status_code == 201
    report = response.json()["report"]
    assert report["status"] == "ok"
    assert [c for c in report["checks"] if c["name"] == "halts"] == [
        {"name": "halts", "ok": True, "detail": "not checked (offline, no ledger)"}
    ]
