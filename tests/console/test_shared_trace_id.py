"""A replay by a trace id several stored files carry is refused, never guessed: through
`manage.py replay`, the API and a production replay request, AMBIGUOUS_TRACE_ID with a message
naming each copy (upload id, sha256, format, file name, uploaded at) and how to pick one; a
copy picked by upload:ID or by its sha256 replays."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from core.errors import AMBIGUOUS_TRACE_ID
from governance.models import GovernanceEvent
from replay.models import ReplayRun

pytestmark = pytest.mark.django_db


def stamp(trace):
    return trace.created_at.isoformat().replace("+00:00", "Z")


def expected_message(*newest_first):
    trace_id = newest_first[0].trace_id
    copies = "; ".join(
        f"upload:{t.pk} (sha256 {t.blob.sha256}, replay-trace, {t.filename}, uploaded {stamp(t)})"
        for t in newest_first
    )
    return (
        f"trace id {trace_id} is carried by {len(newest_first)} stored files, so which one to "
        "replay is not said; pick one by its upload id (upload:ID) or its sha256: " + copies
    )


def expected_copies(*newest_first):
    return [
        {
            "upload_id": f"upload:{t.pk}",
            "sha256": t.blob.sha256,
            "format": "replay-trace",
            "filename": t.filename,
            "uploaded_at": stamp(t),
        }
        for t in newest_first
    ]


@pytest.fixture
def two_copies(ingest):
    """The clean demo run and its diverged copy: one trace id, two stored files."""
    ok, diverged = ingest("ok"), ingest("diverged")
    assert ok.trace_id == diverged.trace_id
    return ok, diverged


def test_the_command_refuses_a_shared_trace_id_naming_each_copy(two_copies, capsys):
    ok, diverged = two_copies
    with pytest.raises(SystemExit) as exited:
        call_command("replay", ok.trace_id, "--json")
    assert exited.value.code == 2
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["authoritative"]) == (
        "refused",
        AMBIGUOUS_TRACE_ID,
        False,
    )
    assert report["message"] == expected_message(diverged, ok)
    assert report["detail"]["copies"] == expected_copies(diverged, ok)
    assert (
        ReplayRun.objects.count(),
        GovernanceEvent.objects.filter(type="REPLAY_REQUEST").count(),
    ) == (0, 0)


def test_the_command_without_json_says_the_same_in_words(two_copies, capsys):
    ok, diverged = two_copies
    with pytest.raises(SystemExit):
        call_command("replay", ok.trace_id)
    out = capsys.readouterr().out
    assert out.startswith(f"refused {AMBIGUOUS_TRACE_ID}: {expected_message(diverged, ok)}")


@pytest.mark.parametrize("pick", ["upload", "sha256"])
def test_the_command_replays_the_copy_picked_by_upload_id_or_sha256(two_copies, capsys, pick):
    ok, diverged = two_copies
    ref = f"upload:{diverged.pk}" if pick == "upload" else diverged.blob.sha256
    with pytest.raises(SystemExit) as exited:
        call_command("replay", ref, "--json")
    assert exited.value.code == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"]) == ("diverged", "REPLAY_DIVERGENCE")
    assert ReplayRun.objects.get().trace == diverged
    call_command("replay", f"upload:{ok.pk}", "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_a_trace_id_one_file_carries_still_replays(ingest, capsys):
    ok = ingest("ok")
    call_command("replay", ok.trace_id, "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_the_api_refuses_a_shared_trace_id_with_400_and_the_copies(two_copies, as_persona):
    ok, diverged = two_copies
    client = as_persona("alice")
    response = client.post(
        "/api/replays/", {"trace": ok.trace_id, "mode": "audit"}, content_type="application/json"
    )
    assert response.status_code == 400
    body = response.json()
    assert (body["error_code"], body["message"]) == (
        AMBIGUOUS_TRACE_ID,
        expected_message(diverged, ok),
    )
    assert body["detail"] == {
        "trace_id": ok.trace_id,
        "count": 2,
        "copies": expected_copies(diverged, ok),
    }
    assert ReplayRun.objects.count() == 0
    listed = client.get(f"/api/traces/{diverged.blob.sha256}/").json()
    assert listed["upload_id"] == f"upload:{diverged.pk}"
    picked = client.post(
        "/api/replays/",
        {"trace": listed["upload_id"], "mode": "audit"},
        content_type="application/json",
    )
    assert picked.status_code == 202
    assert ReplayRun.objects.get().trace == diverged


def test_a_production_request_by_a_shared_trace_id_is_refused_too(two_copies, as_persona):
    ok, diverged = two_copies
    response = as_persona("alice").post(
        f"/api/traces/{ok.trace_id}/production-requests/",
        {"reason": "quarterly audit"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert (response.json()["error_code"], response.json()["message"]) == (
        AMBIGUOUS_TRACE_ID,
        expected_message(diverged, ok),
    )


def test_the_trace_page_shows_the_upload_id(two_copies, as_persona):
    ok, _ = two_copies
    body = as_persona("vera").get(f"/traces/{ok.blob.sha256}/").content.decode()
    assert f'<code id="upload-id">upload:{ok.pk}</code>' in body


def test_the_replay_form_posted_with_a_shared_trace_id_is_refused_naming_each_copy(
    two_copies, as_persona
):
    ok, diverged = two_copies
    response = as_persona("alice").post(f"/traces/{ok.trace_id}/replay/", {"mode": "audit"})
    assert response.status_code == 400
    body = response.content.decode()
    assert AMBIGUOUS_TRACE_ID in body
    for copy in (ok, diverged):
        assert f"upload:{copy.pk} (sha256 {copy.blob.sha256}, replay-trace, {copy.filename}" in body
    assert ReplayRun.objects.count() == 0
    picked = as_persona("alice").post(f"/traces/{ok.blob.sha256}/replay/", {"mode": "audit"})
    assert picked.status_code == 303


def test_the_trace_page_lists_the_other_copies_by_upload_id(two_copies, as_persona):
    ok, diverged = two_copies
    body = as_persona("vera").get(f"/traces/{ok.blob.sha256}/").content.decode()
    notice = body[
        body.index('id="other-copies"') : body.index("</p>", body.index('id="other-copies"'))
    ]
    assert f"diverged.trace.json</a> (<code>upload:{diverged.pk}</code>, diverged)" in notice
    assert "A replay by trace id is refused (AMBIGUOUS_TRACE_ID)" in notice


# --- replay --resume: the run by its id, its file as a replay names one ------------------------


@pytest.fixture
def diverged_run(two_copies):
    """A finished, governed audit replay of the diverged copy (it stops at its divergence)."""
    from governance.services import replay_request, replay_run_govern
    from tests.console.personas import persona

    _, diverged = two_copies
    run = replay_request(trace=diverged, mode="audit", actor=persona("alice"), enqueue=False)
    run = replay_run_govern(run_id=run.id)
    assert (run.status, run.error_code) == ("diverged", "REPLAY_DIVERGENCE")
    return run


def resumed(capsys, *args: str) -> tuple[int, dict]:
    """`manage.py replay ARGS --json`: (exit code, the report printed)."""
    with pytest.raises(SystemExit) as exited:
        call_command("replay", *args, "--json")
    return exited.value.code, json.loads(capsys.readouterr().out)


def attempts() -> int:
    """Resumes the ledger logged (each refused one is FORCE_CONTINUE_REFUSED)."""
    return GovernanceEvent.objects.filter(type="FORCE_CONTINUE_REFUSED").count()


def test_resume_refuses_a_shared_trace_id_naming_each_copy(two_copies, diverged_run, capsys):
    ok, diverged = two_copies

    code, report = resumed(capsys, ok.trace_id, "--resume", str(diverged_run.id))

    assert code == 2
    assert (report["status"], report["error_code"], report["authoritative"]) == (
        "refused",
        AMBIGUOUS_TRACE_ID,
        False,
    )
    assert (report["trace_id"], report["mode"]) == (ok.trace_id, "audit")
    assert report["message"] == expected_message(diverged, ok)
    assert report["detail"]["copies"] == expected_copies(diverged, ok)
    assert (ReplayRun.objects.count(), attempts()) == (1, 0)  # nothing ran, nothing logged


@pytest.mark.parametrize("named", ["run id", "upload", "sha256", "run id spelt as 32 hex"])
def test_resume_takes_the_run_by_its_id_or_its_file_by_upload_id_or_sha256(
    two_copies, diverged_run, capsys, named
):
    _, diverged = two_copies
    target = {
        "run id": str(diverged_run.id),
        "upload": f"upload:{diverged.pk}",
        "sha256": diverged.blob.sha256,
        "run id spelt as 32 hex": diverged_run.id.hex,
    }[named]

    code, report = resumed(capsys, target, "--resume", str(diverged_run.id))

    # the run was found and resumed: without an approved force-continue, that is refused
    assert (code, report["error_code"]) == (1, "FORCE_CONTINUE_REQUIRED")
    assert attempts() == 1


def test_resume_without_a_run_id_resumes_the_run_the_target_names(diverged_run, capsys):
    code, report = resumed(capsys, str(diverged_run.id), "--resume")

    assert (code, report["error_code"]) == (1, "FORCE_CONTINUE_REQUIRED")
    assert f"continuing replay {diverged_run.id} past step" in report["message"]
    assert attempts() == 1


def test_resume_refuses_a_target_naming_another_file(two_copies, diverged_run):
    ok, diverged = two_copies

    with pytest.raises(CommandError) as refused:
        call_command("replay", f"upload:{ok.pk}", "--resume", str(diverged_run.id))

    assert (refused.value.returncode, str(refused.value)) == (
        2,
        f"replay {diverged_run.id} is of upload:{diverged.pk} (trace {diverged.trace_id}), not "
        f"upload:{ok.pk}: name it by the run's id, upload:{diverged.pk}, its sha256 or its "
        "trace id",
    )
    assert attempts() == 0


def test_resume_refuses_a_run_that_does_not_exist(two_copies, diverged_run):
    ok, _ = two_copies
    nobody = "00000000-0000-0000-0000-000000000000"

    with pytest.raises(CommandError) as refused:
        call_command("replay", ok.trace_id, "--resume", nobody)
    assert (refused.value.returncode, str(refused.value)) == (2, f"{nobody}: no such replay run")

    with pytest.raises(CommandError) as refused:
        call_command("replay", ok.trace_id, "--resume")
    assert (refused.value.returncode, str(refused.value)) == (
        2,
        f"{ok.trace_id}: no such replay run (--resume without RUN_ID resumes the run TARGET "
        "names by its id)",
    )
    assert attempts() == 0
