"""AHD sidecars and Paxman artifacts are stored traces like native ones: uploaded through the
page, the API and `manage.py ingest`, listed (`?format=`), opened (the format's panel), and
re-verified by a governed replay (REPLAY_REQUEST / REPLAY_RESULT; an integrity failure halts
that file only). An AHD run keeps the token and brief it was uploaded with, so re-verifying
never needs a server checkout."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from core.errors import (
    HASH_MISMATCH,
    INTEGRITY_FAILURE,
    MALFORMED_TRACE,
    MISSING_SNAPSHOT,
    ReplayError,
)
from core.formats import AHD, PAXMAN, native
from governance.models import GovernanceEvent
from replay.models import Snapshot, Trace
from replay.services import trace_ingest, trace_upload_batch
from tests.console.formats import (
    api_client,
    assert_halted_alone,
    compare_page,
    event_types,
    first_stored,
    governed,
    ingest_file,
    listed,
    replay_api,
    replay_page,
    replayed_by_page_and_api,
    stored_as_input,
    stored_as_inputs,
    trace_page,
    upload_api,
    upload_of,
    upload_page,
    uploads,
)
from tests.published import PUBLISHED
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db

SHARED = PUBLISHED
CHECKOUT = SHARED / "ahd" / "checkout"
EVALS = CHECKOUT / "docs" / "evals"
SWISS = "2026-04-21-swiss.replay.json"
#: the upload page's words for its inputs (its companion rule's)
AHD_INPUT = "a file the AHD sidecar names, or an archive of them"
IMAGE = "2026-04-21-editorial-image.replay.json"
TOKEN = CHECKOUT / "tokens" / "swiss-editorial.yml"
BRIEF = CHECKOUT / "briefs" / "landing.yml"
PAXMAN_FILES = sorted((SHARED / "paxman").glob("*.json"))
MONEY = SHARED / "paxman" / "money_unresolved.json"


@pytest.fixture(autouse=True)
def _no_server_checkout(settings):
    settings.REPLAY_AHD_ROOT = ""


def swiss_files():
    return [
        (SWISS, io.BytesIO((EVALS / SWISS).read_bytes())),
        (TOKEN.name, io.BytesIO(TOKEN.read_bytes())),
        (BRIEF.name, io.BytesIO(BRIEF.read_bytes())),
    ]


def store_swiss():
    return first_stored(trace_upload_batch(files=swiss_files()))


# --- storing -------------------------------------------------------------------------------


def test_it_stores_an_ahd_sidecar_with_the_token_and_brief_it_names():
    outcomes = trace_upload_batch(files=swiss_files())
    assert [(o.filename, o.input_of) for o in outcomes] == [
        (SWISS, ""),
        (TOKEN.name, SWISS),
        (BRIEF.name, SWISS),
    ]
    trace = outcomes[0].result.trace
    assert (trace.format, trace.trace_id, trace.job_id, trace.last_status) == (
        AHD,
        "2026-04-21-swiss",
        "briefs/landing.yml",
        "ok",
    )
    token_text = TOKEN.read_text("utf-8")
    brief_text = BRIEF.read_text("utf-8")
    assert trace.required_snapshot_ids == [
        {
            "kind": "ahd-token",
            "snapshot_id": native.snapshot_id_of(token_text),
            "path": "tokens/swiss-editorial.yml",
        },
        {
            "kind": "ahd-brief",
            "snapshot_id": native.snapshot_id_of(brief_text),
            "path": "briefs/landing.yml",
        },
    ]
    assert Snapshot.objects.get(kind="ahd-token").body == token_text
    assert [c["name"] for c in trace.ingest_report["checks"]] == [
        "format",
        "root",
        "token",
        "brief",
    ]
    assert trace.ingest_report["checks"][1]["detail"] == (
        "checkout root <uploaded inputs> (the files uploaded with the sidecar)"
    )
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_it_refuses_an_ahd_upload_whose_named_inputs_are_missing_and_says_which():
    files = [(SWISS, io.BytesIO((EVALS / SWISS).read_bytes())), (TOKEN.name, io.BytesIO(b"x"))]
    outcomes = trace_upload_batch(files=files)
    error = outcomes[0].error
    assert (error.code, error.message, error.broke_at) == (
        MISSING_SNAPSHOT,
        f"{SWISS} names inputs that were not uploaded with it: brief briefs/landing.yml; "
        "upload the sidecar together with every file it names",
        "brief",
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_it_refuses_a_sidecar_alone_without_a_checkout_and_stores_nothing():
    with pytest.raises(ReplayError) as refused:
        trace_ingest(source=io.BytesIO((EVALS / SWISS).read_bytes()), filename=SWISS)
    assert refused.value.code == MISSING_SNAPSHOT
    assert refused.value.message == (
        f"{SWISS}: this server keeps no AHD checkout to re-hash the token "
        "tokens/swiss-editorial.yml and the brief briefs/landing.yml against; set "
        "REPLAY_AHD_ROOT to the checkout they come from, or run "
        f"`manage.py verify {SWISS} --root CHECKOUT` where they are"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_a_sidecar_alone_takes_its_inputs_from_the_servers_checkout_and_keeps_them(settings):
    settings.REPLAY_AHD_ROOT = str(CHECKOUT)
    trace = trace_ingest(source=io.BytesIO((EVALS / IMAGE).read_bytes()), filename=IMAGE).trace
    assert trace.last_status == "ok"
    kinds = sorted(Snapshot.objects.values_list("kind", flat=True))
    assert kinds == ["ahd-brief", "ahd-token"]
    settings.REPLAY_AHD_ROOT = ""  # re-verifying needs no checkout any more
    run = governed(trace)
    assert (run.status, run.error_code) == ("ok", "")


def test_an_edited_input_uploaded_with_the_sidecar_is_stored_as_tampered_evidence():
    files = swiss_files()
    files[1] = (TOKEN.name, io.BytesIO(TOKEN.read_bytes() + b"\nextra: 1\n"))
    trace = trace_upload_batch(files=files)[0].result.trace
    report = trace.ingest_report
    assert (trace.last_status, report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "token",
    )
    assert report["expected"] == (
        "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1"
    )


def test_a_recorded_path_leading_out_of_the_upload_is_refused_and_nothing_is_stored():
    doc = json.loads((EVALS / SWISS).read_text())
    doc["token"]["path"] = "../../../../etc/swiss-editorial.yml"
    outcomes = trace_upload_batch(
        files=[
            ("evil.replay.json", io.BytesIO(json.dumps(doc).encode())),
            (TOKEN.name, io.BytesIO(TOKEN.read_bytes())),
            (BRIEF.name, io.BytesIO(BRIEF.read_bytes())),
        ]
    )
    error = outcomes[0].error
    assert (error.code, error.message, error.broke_at) == (
        "MALFORMED_TRACE",
        "token: the recorded path ../../../../etc/swiss-editorial.yml is outside the "
        "checkout; not read",
        "token",
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


@pytest.mark.parametrize("path", PAXMAN_FILES, ids=lambda p: p.stem)
def test_it_stores_the_published_paxman_artifacts(path):
    trace = ingest_file(path)
    assert (trace.format, trace.last_status, trace.runtime_name) == (PAXMAN, "ok", "paxman")
    assert trace.trace_id == trace.blob.sha256  # the artifacts record no id
    assert trace.job_id == json.loads(path.read_bytes())["contract_id"]


# --- pages, API, CLI ----------------------------------------------------------------------


def test_the_upload_page_stores_a_sidecar_dropped_with_its_inputs(as_persona):
    response = upload_page(
        as_persona("alice"), [upload_of(p) for p in (EVALS / SWISS, TOKEN, BRIEF)]
    )
    body = response.content.decode()
    assert response.status_code == 200
    trace = Trace.objects.get()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>2026-04-21-swiss</code></a>' in body
    assert body.count(f"Stored as an input of <code>{SWISS}</code>") == 2
    assert stored_as_inputs(body) == [stored_as_input(SWISS, AHD_INPUT)] * 2


def test_the_list_filters_stored_files_by_format(as_persona):
    store_swiss()
    ingest_file(MONEY)
    client = as_persona("alice")
    for fmt in (AHD, PAXMAN):
        results, page = listed(client, fmt)
        assert [t["format"] for t in results] == [fmt]
        sha = Trace.objects.get(format=fmt).blob.sha256
        assert f'href="/traces/{sha}/"' in page


def test_the_trace_page_of_an_ahd_run_shows_its_panel_and_stored_inputs(as_persona):
    trace = store_swiss()
    response = trace_page(as_persona("alice"), trace)
    body = response.content.decode()
    assert response.status_code == 200
    assert '<section class="card" id="format-panel">' in body
    assert "<h2>An AHD replay sidecar</h2>" in body
    assert (
        "<dt>ahd_commit</dt><dd><code>4813e2c5a429bde5fe19f2d11891af13fd325cc3</code></dd>" in body
    )
    assert "<td><code>tokens/swiss-editorial.yml</code></td>" in body
    assert body.count("<td>in the store</td>") == 2
    assert '<li class="ok"><strong>token</strong> hash matches sha256:380a3d83' in body


def test_the_trace_page_of_a_paxman_artifact_shows_its_panel(as_persona):
    trace = ingest_file(MONEY)
    body = trace_page(as_persona("alice"), trace).content.decode()
    assert "<h2>A Paxman execution artifact</h2>" in body
    assert "<dt>contract_id</dt><dd><code>with-money-v1</code></dd>" in body
    assert '<li class="ok"><strong>hash</strong> replay_hash' in body


def test_an_ahd_run_is_re_verified_through_the_page_as_a_governed_replay(
    as_persona, django_capture_on_commit_callbacks
):
    trace = store_swiss()
    with django_capture_on_commit_callbacks(execute=True):
        response = replay_page(as_persona("alice"), trace)
    assert response.status_code == 303
    run = trace.runs.get()
    assert (run.state, run.status, run.error_code) == ("done", "ok", "")
    assert [(c["name"], c["ok"]) for c in run.report["checks"]] == [
        ("format", True),
        ("halts", True),
        ("root", True),
        ("token", True),
        ("brief", True),
    ]
    assert run.report["checks"][2]["detail"] == (
        "checkout root <stored inputs> (the inputs stored with this run)"
    )
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_the_api_stores_a_sidecar_with_its_inputs_and_replays_it(
    as_persona, django_capture_on_commit_callbacks
):
    client = as_persona("alice")
    response = upload_api(client, upload_of(EVALS / SWISS), [upload_of(TOKEN), upload_of(BRIEF)])
    assert response.status_code == 201
    assert (response.json()["format"], response.json()["report"]["status"]) == (AHD, "ok")
    with django_capture_on_commit_callbacks(execute=True):
        replay = replay_api(client, Trace.objects.get())
    assert replay.status_code == 202
    run = Trace.objects.get().runs.get()
    assert (run.status, run.error_code) == ("ok", "")


def test_the_api_refuses_a_sidecar_whose_inputs_were_not_uploaded(as_persona):
    response = upload_api(as_persona("alice"), upload_of(EVALS / SWISS), [upload_of(TOKEN)])
    assert response.status_code == 400
    assert response.json()["error_code"] == MISSING_SNAPSHOT
    assert response.json()["message"] == (
        f"{SWISS} names inputs that were not uploaded with it: brief briefs/landing.yml; "
        "upload the sidecar together with every file it names"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_the_api_stores_a_paxman_artifact():
    response = upload_api(api_client("alice"), upload_of(MONEY))
    assert response.status_code == 201
    body = response.json()
    assert (body["format"], body["verdict"], body["job_id"], body["trace_id"]) == (
        PAXMAN,
        "ok",
        "with-money-v1",
        "3242369f53763afb0f325608d4a5fb323996548f95666b77fa9d0325235ed924",
    )


def paxman_without(field: str) -> bytes:
    doc = json.loads(MONEY.read_bytes())
    del doc[field]
    return json.dumps(doc).encode()


def test_the_api_refuses_a_paxman_artifact_missing_a_field_naming_it_and_stores_nothing():
    response = upload_api(
        api_client("alice"), uploads([("money.json", paxman_without("evidence"))])[0]
    )

    assert response.status_code == 400
    body = response.json()
    assert body["error_code"] == MALFORMED_TRACE
    assert body["message"] == "artifact.evidence: required"
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_verify_refuses_a_paxman_artifact_missing_a_field_naming_it(tmp_path, capsys):
    path = tmp_path / "money.json"
    path.write_bytes(paxman_without("diagnostics"))

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")

    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["message"]) == (
        "refused",
        MALFORMED_TRACE,
        "artifact.diagnostics: required",
    )
    assert report["authoritative"] is False


def test_ingest_stores_a_sidecar_with_the_inputs_of_the_checkout_it_sits_in(capsys):
    call_command("ingest", str(EVALS / SWISS))
    out = capsys.readouterr().out
    assert out == "2026-04-21-swiss ahd-replay replayable ok\n"
    assert sorted(Snapshot.objects.values_list("kind", flat=True)) == ["ahd-brief", "ahd-token"]


def test_ingest_stores_a_paxman_artifact_and_the_cli_replays_it(capsys):
    call_command("ingest", str(MONEY))
    trace = Trace.objects.get()
    assert capsys.readouterr().out == f"{trace.trace_id} paxman-artifact replayable ok\n"
    call_command("replay", trace.blob.sha256, "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["error_code"]) == (PAXMAN, "ok", None)
    assert GovernanceEvent.objects.filter(type="REPLAY_RESULT").count() == 1


# --- tampering halts that file only --------------------------------------------------------


def test_a_tampered_stored_ahd_input_is_an_integrity_failure_that_halts_only_that_file(
    settings,
):
    swiss = store_swiss()
    settings.REPLAY_AHD_ROOT = str(CHECKOUT)
    image_trace = ingest_file(EVALS / IMAGE)
    settings.REPLAY_AHD_ROOT = ""
    token_id = swiss.required_snapshot_ids[0]["snapshot_id"]
    Snapshot.objects.filter(snapshot_id=token_id).update(body="a: 1\n")
    run = governed(swiss)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "token",
    )
    assert run.report["message"] == (
        "token: token contents have changed since the run; re-hash differs"
    )
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert (failure.payload["target_kind"], failure.payload["target_id"]) == (
        "blob",
        swiss.blob.sha256,
    )
    assert (failure.payload["expected"], failure.payload["observed"]) == (
        "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1",
        "sha256:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862",
    )
    assert_halted_alone(swiss, image_trace)


def test_a_tampered_paxman_artifact_is_refused_with_hash_mismatch_and_halts_only_that_file():
    doc = json.loads(MONEY.read_bytes())
    doc["contract_id"] = "with-money-v2"
    tampered = trace_ingest(source=io.BytesIO(json.dumps(doc).encode()), filename="t.json").trace
    clean = ingest_file(MONEY)
    assert tampered.ingest_report["error_code"] == HASH_MISMATCH
    run = governed(tampered)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "refused",
        HASH_MISMATCH,
        "replay_hash",
    )
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert failure.payload["error_code"] == HASH_MISMATCH
    assert failure.payload["target_id"] == tampered.blob.sha256
    assert_halted_alone(tampered, clean)
    assert GovernanceEvent.objects.filter(type="INTEGRITY_FAILURE").count() == 1


def test_an_input_removed_from_the_store_is_missing_unless_the_servers_checkout_has_it(settings):
    from replay.services import snapshot_remove

    trace = store_swiss()
    brief_id = trace.required_snapshot_ids[1]["snapshot_id"]
    assert snapshot_remove(snapshot_id=brief_id) == 1
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "refused",
        MISSING_SNAPSHOT,
        "brief",
    )
    assert run.report["message"] == (
        "brief: brief file not found at <stored inputs>/briefs/landing.yml"
    )
    settings.REPLAY_AHD_ROOT = str(CHECKOUT)
    again = governed(trace)
    assert (again.status, again.report["checks"][2]["detail"]) == (
        "ok",
        "checkout root <stored inputs> (the inputs stored with this run, and from REPLAY_AHD_ROOT)",
    )


# --- comparing two runs of one job ----------------------------------------------------------


def test_two_stored_runs_of_one_ahd_brief_compare_field_by_field(as_persona):
    first = store_swiss()
    doc = json.loads((EVALS / SWISS).read_bytes())
    doc["invoked_at"] = "2026-04-22T08:00:00.000Z"
    doc["sampling"]["n"] = 3
    files = swiss_files()
    files[0] = ("2026-04-22-swiss.replay.json", io.BytesIO(json.dumps(doc).encode()))
    second = trace_upload_batch(files=files)[0].result.trace
    client = as_persona("alice")
    page = trace_page(client, first).content.decode()
    assert f'href="/traces/{first.blob.sha256}/compare/{second.blob.sha256}/"' in page
    response = compare_page(client, first, second)
    body = response.content.decode()
    assert response.status_code == 200
    rows = [
        '<tr><td class="path"><code>/invoked_at</code></td><td>changed</td>'
        "<td><code>2026-04-21T21:48:00.597Z</code></td>"
        "<td><code>2026-04-22T08:00:00.000Z</code></td></tr>",
        '<tr><td class="path"><code>/sampling/n</code></td><td>changed</td>'
        "<td><code>5</code></td><td><code>3</code></td></tr>",
    ]
    assert [r in body for r in rows] == [True, True]
    assert body.count('<td class="path">') == 2


def test_two_paxman_artifacts_of_one_contract_compare_and_other_formats_do_not(as_persona):
    a = ingest_file(SHARED / "paxman" / "empty_input_unresolved.json")
    b = ingest_file(SHARED / "paxman" / "invoice_unresolved_dict_dsl.json")
    client = as_persona("alice")
    body = compare_page(client, a, b).content.decode()
    assert '<td class="path"><code>/replay_hash</code></td><td>changed</td>' in body
    swiss = store_swiss()
    response = compare_page(client, a, swiss)
    assert response.status_code == 400
    assert (
        f"{SWISS} is ahd-replay, not paxman-artifact: only two files of the same format compare."
        in response.content.decode()
    )


def test_a_paxman_artifact_is_re_verified_through_the_page_and_the_api(
    as_persona, django_capture_on_commit_callbacks
):
    trace = ingest_file(MONEY)
    runs = replayed_by_page_and_api(as_persona("alice"), trace, django_capture_on_commit_callbacks)
    assert [c["name"] for c in runs[0].report["checks"]] == [
        "type",
        "halts",
        "version",
        "capabilities",
        "hash",
        "contract",
        "rehydration",
    ]
    assert GovernanceEvent.objects.filter(type="REPLAY_RESULT").count() == 2


def test_the_cli_re_verifies_a_stored_ahd_run_by_its_trace_id(capsys):
    trace = store_swiss()
    call_command("replay", "2026-04-21-swiss", "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["error_code"]) == (AHD, "ok", None)
    assert trace.runs.get().status == "ok"
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]
