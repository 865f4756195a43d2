"""Every report the engine can produce renders: the report page (its divergence table and
notices), the report endpoint and the JSON download, and the upload page's outcome, for
drifted traces Hypothesis makes (tests/replay/mutations.py)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ReplayError
from core.formats import default_registry, native
from core.formats.native import engine
from replay.models import ReplayRun
from tests.replay.helpers import golden_key_ring, register_golden_key
from tests.replay.mutations import drifted_documents

pytestmark = pytest.mark.django_db

PAGES = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def report_of(data: bytes, mode: str) -> dict:
    try:
        trace = native.open_native(io.BytesIO(data), "drifted.trace.json")
    except ReplayError as exc:
        return {"status": "refused", "error_code": exc.code, "message": exc.message}
    keys = golden_key_ring()
    return engine.replay(trace, mode=mode, registry=default_registry(), keys=keys).to_json()


@pytest.fixture
def golden_key(db):
    return register_golden_key()


@pytest.fixture
def run(replayed):
    """One finished replay whose stored report each example replaces."""
    return replayed("ok")


@PAGES
@given(document=drifted_documents(), mode=st.sampled_from(engine.MODES))
def test_every_report_renders_on_the_report_page_and_the_report_endpoint(
    as_persona, run, document, mode
):
    data = native.dumps_document(document)
    report = report_of(data, mode)
    ReplayRun.objects.filter(id=run.id).update(report=report)
    client = as_persona("vera")

    page = client.get(f"/runs/{run.id}/")
    assert page.status_code == 200
    body = page.content.decode()
    for divergence in report.get("divergences", []):
        if "absent" in divergence:
            assert '<span class="absent">(absent)</span>' in body
    api = client.get(f"/api/replays/{run.id}/report/")
    assert api.status_code == 200
    assert api.json() == json.loads(json.dumps(report))
    download = client.get(f"/runs/{run.id}/report.json")
    assert json.loads(download.content) == api.json()


@PAGES
@given(document=drifted_documents())
def test_every_drifted_upload_gets_an_outcome_never_a_500(as_persona, golden_key, document):
    data = native.dumps_document(document)

    response = as_persona("alice").post(
        "/traces/upload/", {"files": [SimpleUploadedFile("drifted.trace.json", data)]}
    )

    assert response.status_code == 200
    assert response.content.decode().count('class="upload-outcome ') == 1
