"""The governance command's offline signing: a payload file from the console page, a denial
with its reason, and a key file that is never overwritten by accident."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from governance import codes, services, signing
from governance.models import ForceContinueRequest, GovernanceEvent
from replay.canonical import jcs
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
