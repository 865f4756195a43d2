"""The governance command's offline signing: a payload file from the console page, a denial
with its reason, and a key file that is never overwritten by accident."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.canonical import jcs
from core.ledger import codes, signing
from governance import services
from governance.models import ForceContinueRequest, GovernanceEvent
from tests.governance.factories import filed_request, person

pytestmark = pytest.mark.django_db


def manage(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def carol_key(tmp_path):
    """carol's key file, made offline, its public half registered and confirmed."""
    path = tmp_path / "carol.pem"
    for name in ("carol", "grace"):
        person(name)
    assert manage("governance", "keygen", "--out", str(path))[0] == 0
    code, key_id, _ = manage(
        "governance", "register-key", "--user", "carol", "--public-key", str(path)
    )
    assert code == 0
    assert manage("governance", "confirm-key", key_id.strip(), "--admin", "grace")[0] == 0
    return path


def test_keygen_never_overwrites_a_key_file(carol_key):
    before = carol_key.read_text()
    with pytest.raises(CommandError, match="exists"):
        call_command("governance", "keygen", "--out", str(carol_key))
    assert carol_key.read_text() == before
    assert (carol_key.stat().st_mode & 0o777) == 0o600


def test_a_member_signs_a_denial_offline_from_the_payload_the_page_shows(carol_key, tmp_path):
    request = filed_request(by="alice")
    shown = services.force_continue_payload_for(request=request, decision="approve", role="council")
    page_payload = tmp_path / "payload.json"
    page_payload.write_text(json.dumps(shown))
    signed = tmp_path / "signed.json"

    code, _, _ = manage(
        "governance",
        "sign",
        "--key",
        str(carol_key),
        "--payload",
        str(page_payload),
        "--deny",
        "--reason",
        "the divergence is a real bug",
        "--out",
        str(signed),
    )
    assert code == 0
    document = json.loads(signed.read_text())
    assert document["payload"] == {
        **shown,
        "decision": "deny",
        "reason": "the divergence is a real bug",
    }
    code, out, _ = manage("governance", "record-approval", str(signed), "--user", "carol")
    assert code == 0
    assert out.strip() == (f"recorded deny by carol as council; request {request.id} is rejected")
    request.refresh_from_db()
    assert request.state == ForceContinueRequest.State.REJECTED
    denial = GovernanceEvent.objects.get(type=codes.FORCE_CONTINUE_APPROVAL)
    assert denial.actor_signature == document["signature"]
    assert signing.verify(
        signing.public_key_of(signing.private_key_from_text(carol_key.read_text())),
        jcs(denial.payload),
        denial.actor_signature,
    )


def test_a_refused_approval_exits_1_with_its_code(carol_key, tmp_path):
    services.user_roles_change(
        actor=person("bob"), user=person("carol"), roles=["council", "auditor"]
    )
    request = filed_request(by="carol")  # carol cannot approve her own request
    signed = tmp_path / "signed.json"
    manage(
        "governance",
        "sign",
        "--key",
        str(carol_key),
        "--request",
        str(request.id),
        "--out",
        str(signed),
    )
    code, _, err = manage("governance", "record-approval", str(signed), "--user", "carol")
    assert code == 1
    assert err.strip() == "APPROVAL_SELF: " + services.APPROVAL_SELF_MESSAGE.format(
        user="carol", request=request.id
    )


def test_verify_says_ok_in_words():
    services.pii_access_record(actor=None, trace_id="t", fields=[], reason="r")
    code, out, _ = manage("governance", "verify")
    head = GovernanceEvent.objects.get(seq=2).hash
    assert (code, out.strip()) == (0, f"ok: 2 events verify; head {head}")


@pytest.mark.usefixtures("stored_traces")
def test_a_production_replay_asked_signed_and_recorded_from_the_command_line(
    carol_key, tmp_path, settings, django_capture_on_commit_callbacks
):
    from replay.models import ReplayRun
    from tests.governance.conftest import ingest

    settings.GOVERNANCE_COUNCIL_QUORUM = 1
    person("alice")
    trace = ingest("ok")
    code, out, err = manage(
        "governance", "request-production", trace.trace_id, "--user", "alice", "--reason", "drill"
    )
    assert (code, err) == (0, "")
    request_id = out.strip()
    signed = tmp_path / "signed.json"
    code, _, _ = manage(
        "governance",
        "sign",
        "--key",
        str(carol_key),
        "--production",
        request_id,
        "--out",
        str(signed),
    )
    assert code == 0
    document = json.loads(signed.read_text())
    assert document["payload"]["type"] == signing.PRODUCTION_REPLAY_APPROVAL_TYPE
    assert document["payload"]["trace_sha256"] == trace.blob.sha256
    with django_capture_on_commit_callbacks(execute=True):
        code, out, _ = manage("governance", "record-approval", str(signed), "--user", "carol")
    assert code == 0
    run = ReplayRun.objects.get(mode="production")
    assert out.strip() == (
        f"recorded approve by carol; production replay request {request_id} is approved; "
        f"production replay {run.id}"
    )
    run.refresh_from_db()
    assert (run.state, run.status, run.requested_by.username) == ("done", "ok", "alice")


def test_asking_for_an_unknown_trace_is_a_usage_error():
    person("alice")
    with pytest.raises(CommandError, match="no stored trace nope"):
        call_command("governance", "request-production", "nope", "--user", "alice", "--reason", "r")


def test_asking_without_the_role_exits_1_with_its_code(stored_traces):
    from tests.governance.conftest import ingest

    trace = ingest("ok")
    person("frank")
    code, _, err = manage(
        "governance", "request-production", trace.blob.sha256, "--user", "frank", "--reason", "r"
    )
    assert code == 1
    assert err.strip() == "REQUEST_ROLE: " + services.PRODUCTION_ROLE_MESSAGE.format(user="frank")
