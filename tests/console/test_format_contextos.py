"""ContextOS traces are stored traces like every format: uploaded with their pinned pack and
KG snapshot through the page, the API and `manage.py ingest`, listed (`?format=`), opened
(the format's panel), replayed as a governed replay (REPLAY_REQUEST / REPLAY_DIVERGENCE /
REPLAY_RESULT; an INTEGRITY_FAILURE halts that file until a council clears it) from the page,
the API and the CLI, and the report page shows the seven-field DecisionRecord diff."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from core.errors import INTEGRITY_FAILURE, MISSING_SNAPSHOT, RESULT_MISMATCH
from core.formats import contextos as cx
from governance.models import GovernanceEvent
from governance.selectors import halts_active_map
from replay.models import Snapshot, Trace
from replay.services import snapshot_remove, trace_upload_batch
from tests.console.formats import (
    assert_halted_alone,
    compare_page,
    event_types,
    first_stored,
    governed,
    ingest_file,
    listed,
    replay_api,
    replay_page,
    stored_as_input,
    stored_as_inputs,
    trace_page,
    upload_api,
    upload_of,
    upload_page,
    verify_api,
)
from tests.console.personas import EVERYONE
from tests.published import PUBLISHED
from tests.replay.helpers import register_golden_key, stored_counts

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "contextos"
PACK = FIXTURES / "refund-triage@1.4.0.pack.json"
KG = FIXTURES / "kg-snapshot.kg.json"
FORMAT = "contextos-trace"
#: the upload page's words for its pack and KG snapshot (its companion rule's)
CONTEXTOS_INPUT = "a ContextOS trace's pinned pack or KG snapshot"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
UPLOADERS = {"alice", "oscar", "adam"}


@pytest.fixture(autouse=True)
def _golden_key(db):
    register_golden_key()  # the key the fixtures' pack and KG snapshot are signed with


def batch(name: str, *inputs: Path):
    files = [(name, io.BytesIO((FIXTURES / name).read_bytes()))]
    files += [(p.name, io.BytesIO(p.read_bytes())) for p in inputs]
    return trace_upload_batch(files=files)


def store(name: str = "pass.trace.json", *inputs: Path) -> Trace:
    return first_stored(batch(name, *(inputs or (PACK, KG))))


# --- storing ---------------------------------------------------------------------------------


def test_it_stores_a_trace_with_the_pack_and_kg_snapshot_uploaded_beside_it():
    outcomes = batch("pass.trace.json", PACK, KG)
    assert [(o.filename, o.input_of) for o in outcomes] == [
        ("pass.trace.json", ""),
        (PACK.name, "pass.trace.json"),
        (KG.name, "pass.trace.json"),
    ]
    trace = outcomes[0].result.trace
    assert (trace.format, trace.trace_id, trace.job_id, trace.last_status) == (
        FORMAT,
        TRACE_ID,
        "refund:ord-1042",
        "ok",
    )
    pack_text, kg_text = PACK.read_text(), KG.read_text()
    from core.formats import native

    assert trace.required_snapshot_ids == [
        {
            "kind": "contextos-pack",
            "snapshot_id": native.snapshot_id_of(pack_text),
            "path": "refund-triage@1.4.0",
        },
        {
            "kind": "contextos-kg",
            "snapshot_id": native.snapshot_id_of(kg_text),
            "path": json.loads(kg_text)["snapshot_id"],
        },
    ]
    assert Snapshot.objects.get(kind="contextos-pack").body == pack_text
    assert trace.ingest_report["replayable"] is True
    assert trace.ingest_report["contextos"]["rule"] == "reference"
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 2}


def test_a_tampered_trace_is_stored_as_evidence_with_its_verdict():
    trace = store("tamper_result.trace.json")
    report = trace.ingest_report
    assert (trace.last_status, report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        1.5,
    )


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("version_2.trace.json", "UNSUPPORTED_SCHEMA_VERSION"),
        ("malformed_truncated.trace.json", "MALFORMED_TRACE"),
        ("malformed_null_outputs.trace.json", "MALFORMED_TRACE"),
    ],
)
def test_a_refused_trace_stores_nothing(name, code):
    outcomes = batch(name, PACK, KG)
    assert outcomes[0].error.code == code
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- pages ------------------------------------------------------------------------------------


def test_the_upload_page_stores_a_trace_dropped_with_its_pack_and_kg(as_persona):
    response = upload_page(
        as_persona("alice"), [upload_of(p) for p in (FIXTURES / "pass.trace.json", PACK, KG)]
    )
    body = response.content.decode()
    assert response.status_code == 200
    trace = Trace.objects.get()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>{TRACE_ID}</code></a>' in body
    assert body.count("Stored as an input of <code>pass.trace.json</code>") == 2
    assert stored_as_inputs(body) == [stored_as_input("pass.trace.json", CONTEXTOS_INPUT)] * 2


@pytest.mark.parametrize("name", EVERYONE)
def test_only_uploaders_may_upload_a_contextos_trace(as_persona, name):
    response = upload_page(as_persona(name), [upload_of(FIXTURES / "pass.trace.json")])
    if name in UPLOADERS:
        assert response.status_code == 200
        assert Trace.objects.filter(format=FORMAT).count() == 1
    else:
        assert response.status_code == 403
        assert Trace.objects.count() == 0


def test_the_list_filters_contextos_traces(as_persona):
    trace = store()
    native_trace = ingest_file(FIXTURES.parent / "golden" / "ok.trace.json")
    results, page = listed(as_persona("vera"), FORMAT)
    assert [t["trace_id"] for t in results] == [TRACE_ID]
    assert f'href="/traces/{trace.blob.sha256}/"' in page
    assert f'href="/traces/{native_trace.blob.sha256}/"' not in page


def test_the_trace_page_shows_the_contextos_panel_and_its_stored_inputs(as_persona):
    trace = store()
    body = trace_page(as_persona("vera"), trace).content.decode()
    assert "<h2>A ContextOS trace</h2>" in body
    assert "<dt>decision_key</dt><dd><code>refund:ord-1042</code></dd>" in body
    assert "<td><code>refund-triage@1.4.0</code></td>" in body
    assert body.count("<td>in the store</td>") == 2


def test_a_trace_is_replayed_through_the_page_and_the_report_shows_byte_equal(
    as_persona, django_capture_on_commit_callbacks
):
    trace = store()
    client = as_persona("alice")
    with django_capture_on_commit_callbacks(execute=True):
        response = replay_page(client, trace)
    assert response.status_code == 303
    run = trace.runs.get()
    assert (run.state, run.status, run.error_code) == ("done", "ok", "")
    assert [(c["name"], c["ok"]) for c in run.report["checks"]] == [
        ("format", True),
        ("halts", True),
        ("pack", True),
        ("kg_snapshot", True),
        ("chain", True),
        ("record", True),
        ("loop", True),
        ("decision_record", True),
    ]
    page = client.get(response["Location"]).content.decode()
    assert '<span class="badge" id="contextos-status">byte_equal</span>' in page
    record_hash = run.report["contextos"]["record_hash"]
    assert f'<code id="contextos-record-hash">{record_hash}</code>' in page
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_a_diverged_replay_shows_every_diverged_field_of_the_seven(
    as_persona, django_capture_on_commit_callbacks
):
    trace = store("diverged_resealed.trace.json")
    client = as_persona("alice")
    with django_capture_on_commit_callbacks(execute=True):
        response = replay_page(client, trace)
    run = trace.runs.get()
    assert (run.status, run.error_code) == ("diverged", RESULT_MISMATCH)
    page = client.get(response["Location"]).content.decode()
    assert '<span class="badge" id="contextos-status">diverged</span>' in page
    assert '<code id="contextos-diverged-at">outputs</code>' in page
    verdict = re.search(r'<dl class="facts" id="contextos-verdict">.*?</dl>', page, re.S)
    assert verdict is not None
    assert verdict[0] == (  # ContextOS's own part of the report, whole
        '<dl class="facts" id="contextos-verdict">\n'
        '    <dt>ContextOS status</dt><dd><span class="badge" id="contextos-status">diverged'
        "</span></dd>\n"
        '    <dt>Chain rule matched</dt><dd id="contextos-rule"><code>reference</code>: '
        "JSON.stringify(obj, Object.keys(obj).sort()) (seed 004&#x27;s canonical)</dd>\n"
        '    <dt>record_hash</dt><dd><code id="contextos-record-hash">sha256:'
        "c970602783be0c73bdc983326845b9337e9ab935b565206e2ce987e53bf3d6b2</code></dd>\n"
        '    <dt>diverged_at</dt><dd><code id="contextos-diverged-at">outputs</code> '
        "(diverged fields: <code>outputs</code>, <code>status</code>)</dd>\n"
        "  </dl>"
    )
    assert "(diverged fields: <code>outputs</code>, <code>status</code>)" in page
    assert '<article class="step-diff" id="diff-step-decision_record">' in page
    assert "<code>/outputs</code>" in page
    assert "<code>/status</code>" in page
    assert event_types()[-3:] == ["REPLAY_REQUEST", "REPLAY_DIVERGENCE", "REPLAY_RESULT"]
    divergence = GovernanceEvent.objects.get(type="REPLAY_DIVERGENCE")
    assert (divergence.payload["step"], divergence.payload["path"]) == (
        "decision_record",
        "/outputs",
    )


# --- API and CLI --------------------------------------------------------------------------


def test_the_api_stores_a_trace_with_its_inputs_and_replays_it(
    as_persona, django_capture_on_commit_callbacks
):
    client = as_persona("alice")
    response = upload_api(
        client, upload_of(FIXTURES / "pass.trace.json"), [upload_of(PACK), upload_of(KG)]
    )
    assert response.status_code == 201
    assert (response.json()["format"], response.json()["report"]["status"]) == (FORMAT, "ok")
    with django_capture_on_commit_callbacks(execute=True):
        replay = replay_api(client, Trace.objects.get())
    assert replay.status_code == 202
    run = Trace.objects.get().runs.get()
    report = client.get(f"/api/replays/{run.id}/report/").json()
    assert (report["status"], report["contextos"]["status"]) == ("ok", "byte_equal")


def test_the_api_verifies_a_trace_without_storing_it(as_persona):
    tampered = SimpleUploadedFile("t.json", (FIXTURES / "tamper_call_hash.trace.json").read_bytes())
    response = verify_api(as_persona("alice"), tampered)
    body = response.json()
    report = body.get("report", body)
    assert (report["format"], report["error_code"], report["broke_at"]) == (
        FORMAT,
        INTEGRITY_FAILURE,
        2,
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_ingest_stores_a_trace_with_the_pack_and_kg_beside_it_and_the_cli_replays_it(
    capsys, tmp_path
):
    for path in (FIXTURES / "pass.trace.json", PACK, KG):
        shutil.copy(path, tmp_path / path.name)
    call_command("ingest", str(tmp_path / "pass.trace.json"))
    assert capsys.readouterr().out == f"{TRACE_ID} {FORMAT} replayable ok\n"
    assert sorted(Snapshot.objects.values_list("kind", flat=True)) == [
        "contextos-kg",
        "contextos-pack",
    ]
    call_command("replay", TRACE_ID, "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["contextos"]["status"]) == (
        FORMAT,
        "ok",
        "byte_equal",
    )
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_ingest_takes_the_inputs_named_on_the_command_line(capsys, tmp_path):
    trace = tmp_path / "t" / "pass.trace.json"
    trace.parent.mkdir()
    shutil.copy(FIXTURES / "pass.trace.json", trace)
    call_command("ingest", str(trace), str(PACK), str(KG))
    assert capsys.readouterr().out.splitlines() == [
        f"{TRACE_ID} {FORMAT} replayable ok",
        f"{PACK.name} input of the contextos-trace traces given",
        f"{KG.name} input of the contextos-trace traces given",
    ]


def test_verify_checks_chain_and_record_without_the_inputs(capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(FIXTURES / "tamper_result.trace.json"), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["broke_at"]) == (
        FORMAT,
        "tamper_detected",
        1.5,
    )
    call_command("verify", str(FIXTURES / "pass.trace.json"), "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


# --- governance: retention, integrity failures halt ------------------------------------------


def test_a_pack_removed_from_the_store_refuses_the_replay_naming_it():
    trace = store()
    snapshot_remove(snapshot_id=trace.required_snapshot_ids[0]["snapshot_id"])
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "refused",
        MISSING_SNAPSHOT,
        "pack",
    )
    assert run.report["message"] == (
        "refusing to replay: the pack refund-triage@1.4.0 was not retained"
    )


def test_a_trace_stored_without_its_kg_snapshot_is_not_replayable(as_persona):
    from replay.selectors import trace_missing

    trace = store("pass.trace.json", PACK)
    assert trace.ingest_report["replayable"] is False
    kg_id = json.loads(KG.read_text())["snapshot_id"]
    assert trace_missing(trace) == [f"snapshot:contextos-kg {kg_id} (not retained)"]
    data = as_persona("vera").get("/api/traces/", {"replayable": "false"}).json()
    assert [t["trace_id"] for t in data["results"]] == [TRACE_ID]
    run = governed(trace)
    assert (run.error_code, run.report["broke_at"]) == (MISSING_SNAPSHOT, "kg_snapshot")


def test_an_integrity_failure_halts_the_file_until_the_council_clears_it():
    tampered = store("tamper_result.trace.json")
    clean = store("pass.trace.json")
    run = governed(tampered)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        1.5,
    )
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert (failure.payload["target_kind"], failure.payload["target_id"]) == (
        "blob",
        tampered.blob.sha256,
    )
    assert failure.payload["broke_at"] == 1.5
    want = cx.verify_chain(cx.loads((FIXTURES / "tamper_result.trace.json").read_bytes()))
    assert (failure.payload["expected"], failure.payload["observed"]) == (
        want.expected,
        want.observed,
    )
    assert_halted_alone(tampered, clean)


def test_a_pack_whose_envelope_hash_differs_is_an_integrity_failure():
    edited = FIXTURES / "inputs" / "edited" / PACK.name
    trace = store("pass.trace.json", edited, KG)
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "pack",
    )
    assert "INTEGRITY_FAILURE" in event_types()
    assert trace.blob.sha256 in halts_active_map()


def test_the_council_clears_the_halt_and_the_trace_replays_again(as_persona, member_key):
    from core.canonical import jcs
    from core.ledger.signing import sign
    from governance import services as gov_services
    from governance.models import Halt

    tampered = store("tamper_result.trace.json")
    assert governed(tampered).error_code == INTEGRITY_FAILURE
    halt = Halt.objects.active().get()
    assert halt.payload["target_id"] == tampered.blob.sha256
    for name in ("cora", "colin"):
        key, private = member_key(name)
        text = jcs(gov_services.halt_clear_payload_for(halt=halt)).decode()
        response = as_persona(name).post(
            f"/requests/halt-clear/{halt.seq}/",
            {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
        )
        assert response.status_code == 303
    assert not Halt.objects.active().exists()
    again = governed(tampered)  # no longer refused: the chain is checked, and still broken
    assert (again.error_code, again.report["broke_at"]) == (INTEGRITY_FAILURE, 1.5)


def test_two_runs_of_one_job_compare_field_by_field(as_persona):
    a = store("pass.trace.json")
    b = store("diverged_resealed.trace.json")
    assert a.job_id == b.job_id == "refund:ord-1042"
    client = as_persona("vera")
    body = compare_page(client, a, b).content.decode()
    assert '<td class="path"><code>/decision_record/status</code></td><td>changed</td>' in body
    assert (
        '<td class="path"><code>/decision_record/outputs/decision</code></td><td>changed</td>'
        in body
    )
    page = trace_page(client, a).content.decode()
    assert f'href="/traces/{a.blob.sha256}/compare/{b.blob.sha256}/"' in page


def test_the_plain_form_stores_an_ahd_run_and_a_contextos_trace_dropped_together(
    as_persona, settings
):
    settings.REPLAY_AHD_ROOT = ""
    checkout = PUBLISHED / "ahd" / "checkout"
    sidecar = checkout / "docs" / "evals" / "2026-04-21-swiss.replay.json"
    token = checkout / "tokens" / "swiss-editorial.yml"
    brief = checkout / "briefs" / "landing.yml"
    files = [sidecar, token, brief, FIXTURES / "pass.trace.json", PACK, KG]
    response = upload_page(as_persona("alice"), [upload_of(p) for p in files])
    assert response.status_code == 200
    stored = dict(Trace.objects.values_list("format", "last_status"))
    assert stored == {"ahd-replay": "ok", FORMAT: "ok"}
    assert sorted(Snapshot.objects.values_list("kind", flat=True)) == [
        "ahd-brief",
        "ahd-token",
        "contextos-kg",
        "contextos-pack",
    ]
