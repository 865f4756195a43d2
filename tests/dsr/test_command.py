"""``manage.py dsr``: the same service from the shell, with offline signing through
``manage.py governance sign --payload``, and the exact refusal codes."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from core.ledger import codes, signing
from dsr import services
from dsr.models import LegalRequest
from governance.models import Vote
from tests.dsr.factories import enrol, opened, person, verified

pytestmark = pytest.mark.django_db


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    import sys

    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        call_command("dsr", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def test_open_reads_identifiers_from_stdin_and_prints_only_refs():
    person("lena")
    code, out, _ = run(
        "open",
        "--user",
        "lena",
        "--identifiers-file",
        "-",
        "--kind",
        "both",
        "--basis",
        "GDPR Art. 17",
        stdin="Jane.Doe@example.com\ncustomer-4711\n",
    )
    assert code == 0
    legal = LegalRequest.objects.get()
    assert out.startswith(f"legal request {legal.id} opened (seq {legal.opened_event_id}); ")
    assert "jane" not in out.lower()
    assert "customer-4711" not in out
    code, out, _ = run("show", str(legal.id))
    shown = json.loads(out)
    assert shown["subjects"] == legal.subject_refs
    assert shown["approvals"]["erasure"] == {
        "have": 0,
        "needed": 1,
        "role": "admin",
        "approvers": [],
    }


def test_a_malformed_request_is_refused_with_its_code():
    person("lena")
    code, _, err = run("open", "--user", "lena", "--kind", "access", "--basis", "b")
    assert code == 1
    assert err.strip() == f"{codes.DSR_INVALID}: {services.NO_SUBJECT_MESSAGE}"


def test_a_role_that_may_not_open_is_refused():
    person("frank")
    code, _, err = run(
        "open", "--user", "frank", "--identifier", "x", "--kind", "access", "--basis", "b"
    )
    assert code == 1
    assert err.startswith(f"{codes.REQUEST_ROLE}: frank may not dsr")


def test_offline_signing_and_the_four_eyes_refusals(tmp_path):
    bob = enrol("bob")
    key_file = tmp_path / "bob.pem"
    key_file.write_text(signing.private_key_to_pem(bob.private))
    legal = opened()
    payload_file, signed_file = tmp_path / "p.json", tmp_path / "s.json"
    assert run("payload", str(legal.id), "--purpose", "erasure", "--out", str(payload_file))[0] == 0
    call_command(
        "governance",
        "sign",
        "--key",
        str(key_file),
        "--payload",
        str(payload_file),
        "--out",
        str(signed_file),
        stdout=io.StringIO(),
    )
    approve = ("approve", str(legal.id), str(signed_file), "--purpose", "erasure")
    code, _, err = run(*approve, "--user", "bob")
    assert (code, err.split(":")[0]) == (1, codes.DSR_IDENTITY_UNVERIFIED)
    assert run("verify-identity", str(legal.id), "--user", "lena", "--method", "passport")[0] == 0
    # the payload signed before the identity check names no identity event: refused as stale
    code, _, err = run(*approve, "--user", "bob")
    assert code == 1
    assert err.startswith(f"{codes.APPROVAL_PAYLOAD_MISMATCH}: the signed identity_seq is 0, ")
    run("payload", str(legal.id), "--purpose", "erasure", "--out", str(payload_file))
    call_command(
        "governance",
        "sign",
        "--key",
        str(key_file),
        "--payload",
        str(payload_file),
        "--out",
        str(signed_file),
        stdout=io.StringIO(),
    )
    code, _, err = run(*approve, "--user", "lena")
    assert (code, err.split(":")[0]) == (1, codes.REQUEST_ROLE)  # legal may not approve at all
    code, out, err = run(*approve, "--user", "bob")
    assert code == 0, err
    assert out.startswith(f"erasure of legal request {legal.id} signed by bob")
    code, _, err = run(*approve, "--user", "bob")  # the same signed file: the same key
    assert (code, err.split(":")[0]) == (1, codes.APPROVAL_DUPLICATE_KEY)
    assert Vote.objects.count() == 1


def test_an_admin_cannot_approve_their_own_request_from_the_shell(tmp_path):
    bob = enrol("bob")
    legal = verified(opened(by="bob"))
    signed_file = tmp_path / "s.json"
    payload = services.approval_payload_for(request=legal, purpose="erasure")
    signed_file.write_text(json.dumps(bob.sign(payload)))
    code, _, err = run(
        "approve", str(legal.id), str(signed_file), "--purpose", "erasure", "--user", "bob"
    )
    assert code == 1
    assert err.strip() == f"{codes.DSR_SELF_APPROVAL}: " + services.SELF_APPROVAL_MESSAGE.format(
        user="bob", request=legal.id, purpose="erasure"
    )


def test_start_refuse_and_list():
    legal = opened()
    assert run("start", str(legal.id), "--user", "lena")[0] == 0
    code, out, _ = run("list", "--state", "in_progress")
    assert str(legal.id) in out
    code, _, err = run("start", str(legal.id), "--user", "lena")
    assert (code, err.split(":")[0]) == (1, codes.DSR_STATE)
    code, out, _ = run("refuse", str(legal.id), "--user", "lena", "--reason", "not the subject")
    assert code == 0
    assert out.strip() == f"legal request {legal.id}: refused (not the subject)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("start", "00000000-0000-0000-0000-000000000000", "--user", "nobody"),
            "no user named 'nobody'",
        ),
        (("show", "nope"), "no legal request nope"),
        (
            ("show", "00000000-0000-0000-0000-000000000000"),
            "no legal request 00000000-0000-0000-0000-000000000000",
        ),
    ],
    ids=["user", "request-not-an-id", "request"],
)
def test_an_unknown_name_is_a_usage_error_exiting_2(args, message):
    with pytest.raises(CommandError) as refused:
        call_command("dsr", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert (str(refused.value), refused.value.returncode) == (message, 2)
