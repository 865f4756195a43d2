"""MACE reflective logs exactly as MACE's writer persists them (files written by MACE's own
writer: ``tests/replay/fixtures/mace/writer/README.md``) through the upload page, the API and
the command line: verified with the registered ``reflective_log_key``, stored where they
verify or as tampered evidence (a refusal stores nothing), listed, opened, compared, and not
replayable, saying why."""

from __future__ import annotations

import io
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.errors import INTEGRITY_FAILURE, MALFORMED_TRACE, MISSING_SNAPSHOT, UNKNOWN_KEY
from core.formats import mace
from replay.keys import key_add_hmac
from replay.models import Trace
from replay.selectors import trace_missing
from replay.services import trace_ingest
from tests.console.formats import (
    assert_halted_alone,
    compare_page,
    event_types,
    governed,
    listed,
    replay_api,
    trace_page,
    upload_api,
    upload_page,
    verify_api,
)
from tests.replay import mace_reference as ref
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db

FORMAT = mace.FORMAT
WRITER = Path(__file__).parents[1] / "replay" / "fixtures" / "mace" / "writer"
CLEAN_ID = "19ec5ffdbeccb82fb3b2192d20a358d77cfd97e5729dc7a013f0befd41b862e4"
SIGNATURE_FAILS = "signature: HMAC-SHA256 by reflective_log_key does not verify"

#: file -> (code, message) of its verification with the registered key
VERDICTS = {
    "clean.json": (None, None),
    "edited_output.json": (
        INTEGRITY_FAILURE,
        "immutable_subpayload.final_output_text: the signed value is not the log's "
        "final_output.text",
    ),
    "edited_percept.json": (
        INTEGRITY_FAILURE,
        "immutable_subpayload.percept_text: the signed value is not the log's percept.text",
    ),
    "subpayload_consistent.json": (INTEGRITY_FAILURE, SIGNATURE_FAILS),
    "wrong_key.json": (INTEGRITY_FAILURE, SIGNATURE_FAILS),
    "placeholder_signature.json": (
        INTEGRITY_FAILURE,
        "signature: 'mock_signature' is a placeholder, not an HMAC-SHA256 signature "
        "(64 lower-case hex)",
    ),
    "fallback_secret.json": (
        INTEGRITY_FAILURE,
        "signature: made with MACE's development fallback secret "
        "('test_secret_for_reflective_log_key'), a placeholder key, not the registered key "
        "'reflective_log_key'",
    ),
    "reflective_sample.json": (
        INTEGRITY_FAILURE,
        "immutable_subpayload.percept_text is missing: MACE's writer signs log_id, "
        "percept_text, final_output_text, router_decision_id, so the log's percept.text is "
        "unsigned",
    ),
}
CASES = sorted(VERDICTS)


@pytest.fixture
def key(db):
    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))


def upload(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (WRITER / name).read_bytes())


def status_of(code: str | None) -> str:
    return "ok" if code is None else "tamper_detected"


def assert_report(report: dict, name: str) -> None:
    code, message = VERDICTS[name]
    assert (report["format"], report["status"], report["error_code"]) == (
        FORMAT,
        status_of(code),
        code,
    )
    if code is not None:
        assert report["message"] == message
    assert report["replayable"] is False


# --- the upload page -----------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_the_upload_page_verifies_and_stores_a_log_as_maces_writer_persists_it(
    as_persona, key, name
):
    code, message = VERDICTS[name]
    response = upload_page(as_persona("alice"), [upload(name)])
    body = response.content.decode()
    assert response.status_code == 200
    assert "MALFORMED_TRACE" not in body
    trace = Trace.objects.get()
    assert (trace.format, trace.filename, trace.last_status) == (FORMAT, name, status_of(code))
    # no "0 events, 0 steps": a log as MACE's writer persists it has neither; a tampered one
    # is not intact (never "replayable"), a clean one not replayable (no job seed, no snapshots)
    badge = (
        '<span class="badge no">not replayable</span>'
        if code is None
        else '<span class="badge not-intact" title="the file failed its integrity check'
    )
    assert (
        f'<a href="/traces/{trace.blob.sha256}/"><code>{trace.trace_id}</code></a>\n'
        f"        · {FORMAT}\n"
        f"        · {badge}"
    ) in body
    if code is None:
        assert '<span class="badge verdict-ok">ok</span>' in body
    else:
        assert (
            '<span class="badge verdict-tamper_detected">tamper_detected</span> '
            f'<code class="code">{code}</code> {message}'
        ).replace("'", "&#x27;") in body
    # stored alone: a tampered log is kept as evidence, with no snapshot
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 0}


def test_the_upload_page_refuses_a_log_whose_key_is_not_registered_and_stores_nothing(
    as_persona,
):
    response = upload_page(as_persona("alice"), [upload("clean.json")])
    body = response.content.decode()
    assert (
        '<p class="refusal" role="alert">Refused: <code class="code">UNKNOWN_KEY</code> '
        "signature: no HMAC-SHA256 key &#x27;reflective_log_key&#x27; in the "
        "verification-key registry; register MACE&#x27;s secret with `keys add-hmac "
        "reflective_log_key --secret-file F`"
    ) in body
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- the API -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_the_api_stores_a_log_as_maces_writer_persists_it(as_persona, key, name):
    response = upload_api(as_persona("alice"), upload(name))
    assert response.status_code == 201
    body = response.json()
    assert body["format"] == FORMAT
    assert_report(body["report"], name)
    trace = Trace.objects.get()
    assert (trace.trace_id, trace.job_id, trace.job_seed) == (
        json.loads((WRITER / name).read_bytes())["log_id"],
        "",
        "",
    )
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 0}


@pytest.mark.parametrize("name", CASES)
def test_the_api_verifies_a_log_as_maces_writer_persists_it_and_stores_nothing(
    as_persona, key, name
):
    response = verify_api(as_persona("alice"), upload(name))
    assert response.status_code == 200
    body = response.json()
    assert (body["format"], body["stored"]) == (FORMAT, False)
    assert_report(body["report"], name)
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_the_api_refuses_a_log_whose_key_is_not_registered(as_persona):
    response = upload_api(as_persona("alice"), upload("clean.json"))
    assert response.status_code == 400
    assert response.json()["error_code"] == UNKNOWN_KEY
    assert response.json()["message"] == (
        "signature: no HMAC-SHA256 key 'reflective_log_key' in the verification-key registry; "
        "register MACE's secret with `keys add-hmac reflective_log_key --secret-file F`"
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_the_api_refuses_a_malformed_writer_log(as_persona, key):
    log = json.loads((WRITER / "clean.json").read_bytes())
    del log["signature"]
    response = upload_api(
        as_persona("alice"), SimpleUploadedFile("bad.json", json.dumps(log).encode())
    )
    assert response.status_code == 400
    assert (response.json()["error_code"], response.json()["message"]) == (
        MALFORMED_TRACE,
        "bad.json: signature is missing",
    )
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- the command line ----------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_manage_py_verify_checks_a_log_as_maces_writer_persists_it(tmp_path, capsys, key, name):
    path = tmp_path / name
    shutil.copyfile(WRITER / name, path)
    code, _message = VERDICTS[name]
    if code is None:
        call_command("verify", str(path), "--json")
    else:
        with pytest.raises(SystemExit) as exited:
            call_command("verify", str(path), "--json")
        assert exited.value.code == 1
    assert_report(json.loads(capsys.readouterr().out), name)
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_manage_py_verify_names_a_key_the_registry_does_not_hold(tmp_path, capsys):
    path = tmp_path / "clean.json"
    shutil.copyfile(WRITER / "clean.json", path)
    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(path), "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["broke_at"]) == (
        "refused",
        UNKNOWN_KEY,
        "signature",
    )


def test_ingest_stores_it_as_not_replayable_and_replay_re_verifies_it(tmp_path, capsys, key):
    path = tmp_path / "clean.json"
    shutil.copyfile(WRITER / "clean.json", path)
    call_command("ingest", str(path))
    assert capsys.readouterr().out == f"{CLEAN_ID} {FORMAT} not-replayable ok\n"
    call_command("replay", CLEAN_ID, "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["replayable"], report["checks"][-1]["detail"]) == (
        "ok",
        False,
        mace.NOT_REPLAYABLE,
    )
    with pytest.raises(SystemExit) as exited:
        call_command("replay", CLEAN_ID, "--mode", "production", "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["error_code"], report["message"]) == (
        MISSING_SNAPSHOT,
        f"production replay refuses this log, {mace.NOT_REPLAYABLE}",
    )


def test_ingest_refuses_it_while_its_key_is_not_registered(tmp_path, capsys):
    path = tmp_path / "clean.json"
    shutil.copyfile(WRITER / "clean.json", path)
    with pytest.raises(CommandError, match="1 of 1 files refused"):
        call_command("ingest", str(path))
    assert "refused UNKNOWN_KEY: signature: no HMAC-SHA256 key" in capsys.readouterr().err
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


# --- stored: listed, opened, compared, re-verified -------------------------------------------


def stored(client, name: str) -> Trace:
    assert upload_api(client, upload(name)).status_code == 201
    return Trace.objects.get(filename=name)


def test_it_is_listed_as_not_replayable(as_persona, key):
    client = as_persona("alice")
    trace = stored(client, "clean.json")
    results, page = listed(client, FORMAT)
    assert [(t["trace_id"], t["verdict"], t["replayable"]) for t in results] == [
        (CLEAN_ID, "ok", False)
    ]
    assert f'href="/traces/{trace.blob.sha256}/"' in page
    assert '<span class="badge no">not replayable</span>' in page
    no = client.get("/api/traces/", {"replayable": "no"}).json()["results"]
    yes = client.get("/api/traces/", {"replayable": "yes"}).json()["results"]
    assert ([t["trace_id"] for t in no], yes) == ([CLEAN_ID], [])


def test_its_page_shows_what_it_recorded_and_why_it_is_not_replayable(as_persona, key):
    client = as_persona("alice")
    trace = stored(client, "clean.json")
    response = trace_page(client, trace)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<h2>A MACE reflective log</h2>" in body
    for name, value in [
        ("percept", "What is my name? \u2014 cafe\u0301 file"),
        ("agent outputs", "profile_agent: Your name is Ada."),
        ("final output", "Your name is Ada."),
        ("replayable", "no: no job seed, no snapshots (a log as MACE&#x27;s writer persists it)"),
    ]:
        assert f"<dt>{name}</dt><dd><code>{value}</code></dd>" in body
    assert '<li class="ok"><strong>signature</strong> HMAC-SHA256 by reflective_log_key' in body
    assert (
        '<li class="ok"><strong>replayable</strong> '
        + mace.NOT_REPLAYABLE.replace("'", "&#x27;")
        + "</li>"
    ) in body
    assert trace_missing(trace) == [
        f"snapshot:mace-{kind} (not named: a log as MACE's writer persists it has no job seed "
        "and no snapshots)"
        for kind in ref.KINDS
    ]
    assert "This trace is replayable" not in body
    assert "MALFORMED_TRACE" not in body


def test_two_stored_logs_compare_field_by_field(as_persona, key):
    client = as_persona("alice")
    clean = stored(client, "clean.json")
    edited = stored(client, "edited_output.json")
    response = compare_page(client, clean, edited)
    body = response.content.decode()
    assert response.status_code == 200
    assert (
        '<tr><td class="path"><code>/final_output/text</code></td><td>changed</td>'
        "<td><code>Your name is Ada.</code></td><td><code>Your name is Eve.</code></td></tr>"
    ) in body
    assert body.count('<td class="path">') == 1


def test_an_audit_replay_re_verifies_its_signature_and_says_it_is_not_replayable(
    as_persona, key, django_capture_on_commit_callbacks
):
    client = as_persona("alice")
    trace = stored(client, "clean.json")
    with django_capture_on_commit_callbacks(execute=True):
        assert replay_api(client, trace).status_code == 202
    run = trace.runs.get()
    assert (run.status, run.error_code, run.report["replayable"]) == ("ok", "", False)
    assert [c["name"] for c in run.report["checks"]] == [
        "format",
        "halts",
        "immutable_subpayload",
        "signature",
        "replayable",
    ]
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_re_verifying_a_stored_tampered_log_halts_that_file_alone(key):
    def ingest(name: str) -> Trace:
        return trace_ingest(source=io.BytesIO((WRITER / name).read_bytes()), filename=name).trace

    clean = ingest("clean.json")
    tampered = ingest("edited_output.json")
    assert (clean.trace_id, tampered.last_status) == (tampered.trace_id, "tamper_detected")
    run = governed(tampered)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "tamper_detected",
        INTEGRITY_FAILURE,
        "immutable_subpayload.final_output_text",
    )
    assert_halted_alone(tampered, clean)


def test_the_secret_mace_signs_with_is_registered_by_the_keys_command(tmp_path, capsys):
    """MACE reads its secret from MACE_KEY_reflective_log_key; the same bytes in a file,
    registered under the key id the log names, verify what MACE wrote."""
    secret = tmp_path / "reflective_log_key.secret"
    secret.write_bytes(ref.SECRET)
    call_command("keys", "add-hmac", "reflective_log_key", "--secret-file", str(secret))
    capsys.readouterr()
    path = tmp_path / "clean.json"
    shutil.copyfile(WRITER / "clean.json", path)
    call_command("verify", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["checks"][2]["detail"]) == (
        "ok",
        "HMAC-SHA256 by reflective_log_key over the immutable sub-payload verifies",
    )


def test_replay_of_a_path_re_verifies_it_and_says_it_is_not_replayable(tmp_path, capsys, key):
    path = tmp_path / "clean.json"
    shutil.copyfile(WRITER / "clean.json", path)
    call_command("replay", str(path), "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["replayable"]) == (FORMAT, "ok", False)
    assert report["checks"][-1] == {"name": "replayable", "ok": True, "detail": mace.NOT_REPLAYABLE}
    # replay PATH stores the file first, as for every format: the log alone, no snapshot
    assert stored_counts() == {"traces": 1, "blobs": 1, "snapshots": 0}
