"""A drifted trace (a step output with a key the runtime no longer produces) is stored,
verified and shown on every surface: the upload page, the upload and verify endpoints, the
report page and the report endpoint, with the absent side spelled one way."""

from __future__ import annotations

import copy
import functools
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from replay.models import ReplayRun, Trace
from tests.console.conftest import TRACE_KEY_ID, TRACE_SECRET

pytestmark = pytest.mark.django_db

ABSENT_AFTER = {
    "step": 3,
    "step_id": "route-1",
    "path": "/reason",
    "before": "cheapest",
    "after": None,
    "absent": "after",
}
MESSAGE = "step 3 (route-1, router.decide@1): the recomputed output differs from the recorded one"


def edited_ok_trace(edit) -> bytes:
    """The demo's `ok` trace edited by `edit(document)`, re-sealed as a runtime would."""
    from core.formats import native
    from core.formats.native.demo import variants
    from core.formats.native.recorder import reseal, signer_for
    from core.replay.signatures import HMAC_SHA256

    signer = signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET)
    document = copy.deepcopy(variants(signer)["ok"])
    edit(document)
    return native.dumps_document(reseal(document, signer))


@functools.cache
def drifted_bytes() -> bytes:
    """Step 3's output gained a key the runtime no longer produces."""
    return edited_ok_trace(lambda d: d["steps"][3]["output"].update(reason="cheapest"))


def uploaded_and_replayed(client, data: bytes, capture) -> str:
    """Upload over the API, run an audit replay (its task on commit); the run's id."""
    client.post(
        "/api/traces/upload/?filename=t.trace.json", data, content_type="application/octet-stream"
    )
    with capture(execute=True):
        started = client.post(
            "/api/replays/",
            {"trace": Trace.objects.get().blob.sha256, "mode": "audit"},
            content_type="application/json",
        )
    return started.json()["id"]


def test_alice_uploads_a_drifted_trace_on_the_page_and_it_is_stored(as_persona, trace_key):
    response = as_persona("alice").post(
        "/traces/upload/",
        {"files": [SimpleUploadedFile("drifted.trace.json", drifted_bytes())]},
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert body.count('class="upload-outcome accepted"') == 1
    assert (
        '<span class="badge verdict-diverged">diverged</span> '
        f'<code class="code">REPLAY_DIVERGENCE</code> {MESSAGE}'
    ) in body
    trace = Trace.objects.get(filename="drifted.trace.json")
    assert trace.ingest_report["divergences"] == [ABSENT_AFTER]


def test_the_upload_endpoint_stores_a_drifted_trace_with_its_report(as_persona, trace_key):
    response = as_persona("alice").post(
        "/api/traces/upload/?filename=drifted.trace.json",
        drifted_bytes(),
        content_type="application/octet-stream",
    )

    assert response.status_code == 201
    body = response.json()
    assert body["verdict"] == "diverged"
    assert body["report"]["message"] == MESSAGE
    assert body["report"]["divergences"] == [ABSENT_AFTER]


def test_the_verify_endpoint_reports_a_drifted_trace(as_persona, trace_key):
    response = as_persona("alice").post(
        "/api/traces/verify/?filename=drifted.trace.json",
        drifted_bytes(),
        content_type="application/octet-stream",
    )

    assert response.status_code == 200
    report = response.json()["report"]
    assert (report["status"], report["error_code"]) == ("diverged", "REPLAY_DIVERGENCE")
    assert report["divergences"] == [ABSENT_AFTER]
    assert not Trace.objects.exists()


def test_the_report_page_shows_the_absent_side_apart_from_null(
    as_persona, trace_key, django_capture_on_commit_callbacks
):
    client = as_persona("alice")
    client.post(
        "/api/traces/upload/?filename=drifted.trace.json",
        drifted_bytes(),
        content_type="application/octet-stream",
    )
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            "/api/replays/",
            {"trace": Trace.objects.get().blob.sha256, "mode": "audit"},
            content_type="application/json",
        )
    run_id = started.json()["id"]

    report = client.get(f"/api/replays/{run_id}/report/").json()
    assert report["divergences"] == [ABSENT_AFTER]
    assert report == ReplayRun.objects.get(id=run_id).report

    body = client.get(f"/runs/{run_id}/").content.decode()
    diff = body[body.index('id="divergences"') :]
    assert '<td class="path"><code>/reason</code> <span class="hint">removed</span></td>' in diff
    assert (
        '<td class="before kind-removed"><div class="value"><pre>&quot;cheapest&quot;</pre></div>'
    ) in diff
    assert '<td class="after kind-removed"><span class="absent">(absent)</span>' in diff
    assert "<pre>null</pre>" not in diff

    download = client.get(f"/runs/{run_id}/report.json")
    assert json.loads(download.content)["divergences"] == [ABSENT_AFTER]


def test_a_recorded_null_is_shown_as_null_not_absent(as_persona, replayed):
    run = replayed("diverged")
    report = copy.deepcopy(run.report)
    report["divergences"] = [dict(report["divergences"][0], before=None)]
    ReplayRun.objects.filter(id=run.id).update(report=report)

    body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
    diff = body[body.index('id="divergences"') :]
    assert '<td class="before kind-changed"><div class="value"><pre>null</pre></div>' in diff
    assert "(absent)" not in diff


def test_the_page_reads_a_stored_report_that_leaves_the_absent_key_out(as_persona, replayed):
    run = replayed("diverged")
    report = copy.deepcopy(run.report)
    divergence = dict(report["divergences"][0])
    del divergence["after"]
    report["divergences"] = [divergence]
    ReplayRun.objects.filter(id=run.id).update(report=report)

    body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
    assert '<td class="after kind-removed"><span class="absent">(absent)</span>' in body


def test_a_sandbox_report_names_each_substituted_output(as_persona, replayed):
    run = replayed("unpersisted", mode="sandbox")

    body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()

    assert [s["output_ref"] for s in run.report["substituted"]] == [
        "out-0000",
        "out-0001",
        "out-0002",
    ]
    assert (
        '<p class="notice" id="substituted">Sandbox mocks stood in for outputs that were not '
        "persisted, and fed the steps that consumed them: <code>out-0000</code> (step 1, same "
        "hash as recorded), <code>out-0001</code> (step 4, same hash as recorded), "
        "<code>out-0002</code> (step 7, same hash as recorded)</p>"
    ) in body


def test_the_report_page_says_which_values_were_equal_only_within_epsilon(
    as_persona, trace_key, django_capture_on_commit_callbacks
):
    recorded = {}

    def one_unit_up(document):
        scores = document["steps"][3]["output"]["scores"]
        recorded["math"] = scores["math"]
        scores["math"] = float(f"{scores['math'] + 1e-9:.9f}")
        recorded["edited"] = scores["math"]

    client = as_persona("alice")
    run_id = uploaded_and_replayed(
        client, edited_ok_trace(one_unit_up), django_capture_on_commit_callbacks
    )

    report = client.get(f"/api/replays/{run_id}/report/").json()
    assert (report["status"], report["divergences"]) == ("ok", [])
    assert report["within_epsilon"] == [
        {
            "step": 3,
            "step_id": "route-1",
            "path": "/scores/math",
            "before": recorded["edited"],
            "after": recorded["math"],
        }
    ]
    body = client.get(f"/runs/{run_id}/").content.decode()
    assert (
        '<p class="notice" id="within-epsilon">Equal only within NUMERIC_EPSILON (1e-9), not '
        f"byte for byte: step 3 <code>/scores/math</code> recorded <code>{recorded['edited']}"
        f"</code>, recomputed <code>{recorded['math']}</code></p>"
    ) in body


def test_a_sandbox_report_stored_before_substitutions_had_steps_still_renders(as_persona, replayed):
    run = replayed("unpersisted", mode="sandbox")
    report = copy.deepcopy(run.report)
    report["substituted"] = ["out-0000", "out-0001"]  # the older spelling: refs only
    ReplayRun.objects.filter(id=run.id).update(report=report)

    body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()

    assert (
        "fed the steps that consumed them: <code>out-0000</code>, <code>out-0001</code></p>"
    ) in body
