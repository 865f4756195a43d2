"""MACE reflective logs are stored traces like the others: uploaded with their snapshot files
through the page, the API and `manage.py ingest`, listed (`?format=`), opened (the panel:
iterations and router decisions), compared, and re-verified by a governed replay
(REPLAY_REQUEST / REPLAY_RESULT; an integrity failure appends INTEGRITY_FAILURE and halts the
file until the council clears it). Files are made by MACE's reference rules
(``tests/replay/mace_reference.py``)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.errors import (
    FORCE_HALT_ACTIVE,
    INTEGRITY_FAILURE,
    MISSING_SNAPSHOT,
    UNKNOWN_KEY,
)
from core.formats import mace
from governance.models import GovernanceEvent
from governance.selectors import halts_active_map
from governance.services import replay_request, replay_run_govern
from replay.keys import key_add_hmac
from replay.models import Snapshot, Trace
from replay.services import snapshot_remove, trace_upload_batch
from tests.console.formats import (
    assert_halted_alone,
    compare_page,
    event_types,
    first_stored,
    governed,
    listed,
    replay_api,
    stored_as_input,
    stored_as_inputs,
    trace_page,
    upload_api,
    upload_page,
    uploads,
    verify_api,
)
from tests.console.personas import persona
from tests.replay import mace_reference as ref
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db

FORMAT = mace.FORMAT
MACE_INPUT = "a MACE log's snapshot"  # the upload page's words, its companion rule's


def register_key():
    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))


@pytest.fixture
def key(db):
    register_key()


def snapshot_files(made):
    return [(f"{s['snapshot_id']}.json", ref.dumps(s)) for s in made["snapshots"].values()]


def batch(made, name="log_s1.json"):
    files = [(name, io.BytesIO(ref.dumps(made["log"])))]
    files += [(n, io.BytesIO(d)) for n, d in snapshot_files(made)]
    return trace_upload_batch(files=files)


def store(made, name="log_s1.json"):
    return first_stored(batch(made, name))


def log_file(made):
    return SimpleUploadedFile("log_s1.json", ref.dumps(made["log"]))


# --- storing -------------------------------------------------------------------------------


def test_it_stores_a_log_with_the_snapshot_files_it_names(key):
    made = ref.job()
    outcomes = batch(made)
    names = [n for n, _ in snapshot_files(made)]
    assert [(o.filename, o.input_of) for o in outcomes] == [("log_s1.json", "")] + [
        (n, "log_s1.json") for n in names
    ]
    trace = outcomes[0].result.trace
    assert (trace.format, trace.trace_id, trace.job_id, trace.job_seed, trace.last_status) == (
        FORMAT,
        "log_s1",
        "job_s1",
        "s1",
        "ok",
    )
    assert (trace.step_count, trace.event_count, trace.runtime_name) == (2, 3, "mace")
    assert trace.required_snapshot_ids == [
        {
            "kind": f"mace-{k}",
            "snapshot_id": made["snapshots"][k]["snapshot_id"],
            "path": f"{made['snapshots'][k]['snapshot_id']}.json",
        }
        for k in ref.KINDS
    ]
    router = Snapshot.objects.get(kind="mace-router")
    assert router.body == made["snapshots"]["router"]
    assert router.signature == {
        "alg": "hmac-sha256",
        "key_id": ref.KEY_ID,
        "value": made["snapshots"]["router"]["signature"],
    }
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 5}


def test_it_refuses_a_log_uploaded_without_its_snapshots_and_stores_nothing(key):
    made = ref.job()
    outcomes = trace_upload_batch(files=[("log_s1.json", io.BytesIO(ref.dumps(made["log"])))])
    error = outcomes[0].error
    assert error.code == MISSING_SNAPSHOT
    sid = made["snapshots"]["selfrep"]["snapshot_id"]
    assert error.message == (
        f"selfrep_snapshot_id: snapshot file {sid}.json is not there (5 of 5 missing: "
        "selfrep, brainstate, router, privacy, governance)"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_the_upload_page_stores_a_log_dropped_with_its_snapshots(as_persona, key):
    made = ref.job()
    pairs = [("log_s1.json", ref.dumps(made["log"])), *snapshot_files(made)]
    response = upload_page(as_persona("alice"), uploads(pairs))
    body = response.content.decode()
    assert response.status_code == 200
    trace = Trace.objects.get()
    assert f'<a href="/traces/{trace.blob.sha256}/"><code>log_s1</code></a>' in body
    assert body.count("Stored as an input of <code>log_s1.json</code>") == 5
    assert stored_as_inputs(body) == [stored_as_input("log_s1.json", MACE_INPUT)] * 5


def test_the_list_filters_stored_files_by_format(as_persona, key):
    store(ref.job())
    client = as_persona("alice")
    results, page = listed(client, FORMAT)
    assert [(t["format"], t["trace_id"]) for t in results] == [(FORMAT, "log_s1")]
    assert client.get("/api/traces/", {"format": "paxman-artifact"}).json()["results"] == []
    assert f'href="/traces/{Trace.objects.get().blob.sha256}/"' in page


def test_the_trace_page_shows_iterations_router_decisions_and_stored_snapshots(as_persona, key):
    made = ref.job()
    trace = store(made)
    response = trace_page(as_persona("alice"), trace)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<h2>A MACE reflective log</h2>" in body
    assert "<dt>iterations</dt><dd><code>2</code></dd>" in body
    assert (
        "<dt>router decisions per iteration</dt><dd><code>it_0: dec_s1_0 -&gt; profile_agent; "
        "it_1: dec_s1_1 -&gt; profile_agent</code></dd>"
    ) in body
    assert body.count("<td>in the store</td>") == 5
    assert '<li class="ok"><strong>signature</strong> HMAC-SHA256 by reflective_log_key' in body


# --- the API -------------------------------------------------------------------------------


def test_the_api_stores_a_log_with_its_snapshots_and_replays_it(
    as_persona, key, django_capture_on_commit_callbacks
):
    made = ref.job()
    client = as_persona("alice")
    response = upload_api(client, log_file(made), uploads(snapshot_files(made)))
    assert response.status_code == 201
    assert (response.json()["format"], response.json()["report"]["status"]) == (FORMAT, "ok")
    with django_capture_on_commit_callbacks(execute=True):
        replay = replay_api(client, Trace.objects.get())
    assert replay.status_code == 202
    run = Trace.objects.get().runs.get()
    assert (run.status, run.error_code) == ("ok", "")
    assert [c["name"] for c in run.report["checks"]] == [
        "format",
        "halts",
        "required_snapshots",
        "snapshots",
        "event_ids",
        "immutable_subpayload",
        "signature",
        "replayable",
    ]
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_the_api_refuses_a_log_whose_snapshots_were_not_uploaded(as_persona, key):
    made = ref.job()
    response = upload_api(as_persona("alice"), log_file(made), uploads(snapshot_files(made)[:4]))
    assert response.status_code == 400
    assert response.json()["error_code"] == MISSING_SNAPSHOT
    sid = made["snapshots"]["governance"]["snapshot_id"]
    assert response.json()["message"] == (
        f"governance_snapshot_id: snapshot file {sid}.json is not there (1 of 5 missing: "
        "governance)"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_a_log_whose_key_is_not_registered_is_refused_until_the_key_is(as_persona):
    made = ref.job()
    client = as_persona("alice")

    def upload():
        return upload_api(client, log_file(made), uploads(snapshot_files(made)))

    refused = upload()
    assert refused.status_code == 400
    assert refused.json()["error_code"] == UNKNOWN_KEY
    assert refused.json()["message"] == (
        "selfrep_snapshot.signature: no HMAC-SHA256 key 'reflective_log_key' in the "
        "verification-key registry; register MACE's secret with `keys add-hmac "
        "reflective_log_key --secret-file F`"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    register_key()
    stored = upload()
    assert stored.status_code == 201
    assert stored.json()["report"]["status"] == "ok"
    assert governed(Trace.objects.get()).status == "ok"


def test_a_badly_signed_snapshot_is_not_stored_so_it_cannot_shadow_a_good_copy(key):
    bad = ref.job()
    bad["snapshots"]["router"]["signature"] = "mock_signature"
    tampered = store(bad, "bad.json")
    assert tampered.ingest_report["broke_at"] == "router_snapshot.signature"
    assert not Snapshot.objects.filter(kind="mace-router").exists()
    assert Snapshot.objects.filter(kind__startswith="mace-").count() == 4
    # re-verifying reads the store, where the badly signed copy was never kept
    run = governed(tampered)
    assert (run.error_code, run.report["broke_at"]) == (MISSING_SNAPSHOT, "router_snapshot_id")
    other = ref.job()
    other["log"]["timestamp"] = "2025-01-02T12:00:00Z"  # another log naming the same snapshots
    good = store(other, "good.json")
    assert good.last_status == "ok"
    assert Snapshot.objects.get(kind="mace-router").body == other["snapshots"]["router"]
    assert governed(good).status == "ok"


# --- the CLI -------------------------------------------------------------------------------


def test_ingest_reads_the_snapshot_files_beside_a_log_and_the_cli_replays_it(tmp_path, capsys, key):
    path = ref.write(tmp_path, ref.job())
    call_command("ingest", str(path))
    assert capsys.readouterr().out == f"log_s1 {FORMAT} replayable ok\n"
    assert Snapshot.objects.filter(kind__startswith="mace-").count() == 5
    call_command("replay", "log_s1", "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["error_code"]) == (FORMAT, "ok", None)
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_verify_checks_a_log_on_disk_without_storing_it(tmp_path, capsys, key):
    made = ref.job()
    made["log"]["final_output"]["text"] = "Goodbye!"
    path = ref.write(tmp_path, made)
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["error_code"], report["broke_at"]) == (
        FORMAT,
        INTEGRITY_FAILURE,
        "immutable_subpayload.final_output_text",
    )
    assert (report["expected"], report["observed"]) == ("Goodbye!", "Hello!")
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}
    ok = ref.write(tmp_path / "ok", ref.job())
    call_command("verify", str(ok), "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_ingest_refuses_a_log_whose_snapshots_are_not_beside_it(tmp_path, capsys, key):
    made = ref.job()
    path = tmp_path / "log.json"
    path.write_bytes(ref.dumps(made["log"]))
    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(path))
    assert "refused MISSING_SNAPSHOT: selfrep_snapshot_id" in capsys.readouterr().err
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_replay_path_reads_the_snapshot_files_beside_a_log_as_ingest_does(tmp_path, capsys, key):
    path = ref.write(tmp_path, ref.job())

    call_command("replay", str(path), "--json")

    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["error_code"]) == (FORMAT, "ok", None)
    assert report["authoritative"] is True
    assert Snapshot.objects.filter(kind__startswith="mace-").count() == 5


def test_replay_path_of_a_log_without_its_snapshots_is_refused_and_not_authoritative(
    tmp_path, capsys, key
):
    made = ref.job()
    path = tmp_path / "log.json"
    path.write_bytes(ref.dumps(made["log"]))

    with pytest.raises(SystemExit) as exited:
        call_command("replay", str(path), "--json")

    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["authoritative"]) == (
        "refused",
        MISSING_SNAPSHOT,
        False,
    )
    sid = made["log"]["selfrep_snapshot_id"]
    assert report["message"] == (
        f"selfrep_snapshot_id: snapshot file {sid}.json is not there (5 of 5 missing: "
        "selfrep, brainstate, router, privacy, governance)"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- governance: integrity failures halt ----------------------------------------------------


def test_a_placeholder_signature_is_an_integrity_failure_that_halts_only_that_file(key):
    made = ref.job()
    made["log"]["signature"] = "mock_signature"
    tampered = store(made, "placeholder.json")
    clean = store(ref.job("s2"), "log_s2.json")
    assert tampered.ingest_report["error_code"] == INTEGRITY_FAILURE
    assert tampered.last_status == "tamper_detected"
    run = governed(tampered)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "signature",
    )
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert (failure.payload["target_kind"], failure.payload["target_id"]) == (
        "blob",
        tampered.blob.sha256,
    )
    assert (failure.payload["broke_at"], failure.payload["observed"]) == (
        "signature",
        "mock_signature",
    )
    assert failure.payload["expected"] == ref.sign_payload(made["log"]["immutable_subpayload"])
    assert_halted_alone(tampered, clean)
    assert GovernanceEvent.objects.filter(type="INTEGRITY_FAILURE").count() == 1


def test_a_snapshot_rewritten_in_the_store_halts_every_log_that_names_it(key):
    made = ref.job()
    trace = store(made)
    other = ref.job()
    other["log"]["timestamp"] = "2025-01-02T12:00:00Z"  # another log naming the same snapshots
    sibling = store(other, "log_s1_b.json")
    unrelated = store(ref.job("s2"), "log_s2.json")
    sid = made["snapshots"]["router"]["snapshot_id"]
    body = dict(made["snapshots"]["router"], body={"depth_level": 9, "memory_strategy": "x"})
    Snapshot.objects.filter(snapshot_id=sid).update(body=body)
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "router_snapshot.config_hash",
    )
    assert run.report["expected"] == ref.sha256_hex(ref.canonical_json_serialize(body["body"]))
    assert run.report["observed"] == made["snapshots"]["router"]["config_hash"]
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert (failure.payload["target_kind"], failure.payload["target_id"]) == ("snapshot", sid)
    assert failure.payload["snapshot_id"] == sid
    assert sid in halts_active_map()
    assert governed(trace).error_code == FORCE_HALT_ACTIVE
    assert governed(sibling).error_code == FORCE_HALT_ACTIVE
    assert governed(unrelated).status == "ok"


def test_a_log_whose_own_signature_fails_halts_that_file_not_its_snapshots(key):
    made = ref.job()
    made["log"]["signature"] = ref.sign_payload(made["log"]["immutable_subpayload"], b"x" * 32)
    trace = store(made)
    run = governed(trace)
    assert (run.error_code, run.report["broke_at"]) == (INTEGRITY_FAILURE, "signature")
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert (failure.payload["target_kind"], failure.payload["target_id"]) == (
        "blob",
        trace.blob.sha256,
    )
    assert failure.payload["snapshot_id"] is None


def test_a_snapshot_removed_from_the_store_makes_the_log_missing_a_snapshot(key):
    made = ref.job()
    trace = store(made)
    sid = made["snapshots"]["privacy"]["snapshot_id"]
    assert snapshot_remove(snapshot_id=sid) == 1
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "refused",
        MISSING_SNAPSHOT,
        "privacy_snapshot_id",
    )


# --- comparing two logs of one job ----------------------------------------------------------


def test_two_stored_logs_of_one_job_compare_field_by_field(as_persona, key):
    first = store(ref.job())
    other = ref.job()
    other["log"]["final_output"]["text"] = "Hi!"
    ref.sign_log(other["log"])
    second = store(other, "log_s1_again.json")
    client = as_persona("alice")
    response = compare_page(client, first, second)
    body = response.content.decode()
    assert response.status_code == 200
    assert (
        '<tr><td class="path"><code>/final_output/text</code></td><td>changed</td>'
        "<td><code>Hello!</code></td><td><code>Hi!</code></td></tr>"
    ) in body
    assert body.count('<td class="path">') == 3  # the text, the signed copy, the signature


# --- roles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vera", "cora", "lena", "nora"])
def test_roles_without_upload_cannot_store_a_mace_log(as_persona, key, name):
    made = ref.job()
    pairs = [("log_s1.json", ref.dumps(made["log"])), *snapshot_files(made)]
    page = upload_page(as_persona(name), uploads(pairs))
    api = upload_api(as_persona(name), log_file(made), uploads(snapshot_files(made)))
    assert (page.status_code, api.status_code) == (403, 403)
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_the_api_verifies_a_log_with_its_snapshots_and_stores_nothing(as_persona, key):
    made = ref.job()
    made["log"]["signature"] = "PLACEHOLDER"
    response = verify_api(as_persona("alice"), log_file(made), uploads(snapshot_files(made)))
    assert response.status_code == 200
    body = response.json()
    assert (body["format"], body["stored"]) == (FORMAT, False)
    report = body["report"]
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "signature",
    )
    assert (report["expected"], report["observed"]) == (
        ref.sign_payload(made["log"]["immutable_subpayload"]),
        "PLACEHOLDER",
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- force-continue (seed 003 REPLAY-05, REPLAY-06) ------------------------------------------


def test_a_diverging_production_replay_continues_only_with_an_approved_force_continue(
    key, django_capture_on_commit_callbacks
):
    from core.errors import FORCE_CONTINUE_REQUIRED, REPLAY_DIVERGENCE, ReplayError
    from governance import services
    from tests.governance.factories import approve, enrol

    bob, carol, dave = enrol("bob"), enrol("carol"), enrol("dave")
    made = ref.job()
    made["log"]["agent_outputs"][1]["output"]["text"] = "answer 1 tampered"
    trace = store(made)
    assert trace.last_status == "ok"  # audit mode compares no persisted output
    sam = persona("sam")
    run = replay_run_govern(
        run_id=replay_request(trace=trace, mode="production", actor=sam, enqueue=False).id
    )
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "diverged",
        REPLAY_DIVERGENCE,
        1,
    )
    divergence = GovernanceEvent.objects.get(type="REPLAY_DIVERGENCE")
    assert (divergence.payload["step"], divergence.payload["path"]) == (
        1,
        "/iteration_trace/1/agent_output/text",
    )
    with pytest.raises(ReplayError) as refused:
        services.force_continue_resume(run=run, actor=sam)
    assert refused.value.code == FORCE_CONTINUE_REQUIRED
    request = services.force_continue_request_file(
        run=run, actor=sam, reason="the persisted output was re-exported by hand"
    )
    with django_capture_on_commit_callbacks(execute=True):
        for signer, role in ((bob, "admin"), (carol, "council"), (dave, "council")):
            services.approval_record(
                request=request, approver=signer.user, document=approve(signer, request, role=role)
            )
    request.refresh_from_db()
    resumed = request.resumed_run
    resumed.refresh_from_db()
    assert resumed.continue_past == [1]
    assert (resumed.state, resumed.status, resumed.authoritative) == ("done", "ok", False)
    assert resumed.report["force_continued"] is True
    assert resumed.report["divergences"][0]["force_continued"] is True
