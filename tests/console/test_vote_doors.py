"""The old per-kind vote endpoints (``/api/force-continue/ID/approvals/`` and the like) pinned:
their status, exact JSON body and error code for a vote and for each refusal, so that moving
them onto the shared vote path (``/api/requests/<kind>/<key>/votes/``) changes no answer."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from core.canonical import jcs
from core.ledger import codes, signing
from governance import services as gov_services
from tests.console.personas import EVERYONE
from tests.console.test_requests_api import (  # noqa: F401  (world: the fixture)
    SIGN,
    legal_opened_and_checked,
    payload_of,
    world,
)

pytestmark = pytest.mark.django_db

JSON = "application/json"
MISSING = str(uuid.UUID(int=7))

#: kind -> (the old endpoint for a key, extra body fields, what a missing key is called)
DOORS = {
    "force-continue": ("/api/force-continue/{}/approvals/", {}, "force-continue request"),
    "production-replay": (
        "/api/production-requests/{}/approvals/",
        {},
        "production replay request",
    ),
    "role-grant": ("/api/role-grants/{}/approvals/", {}, "role grant"),
    "halt-clear": ("/api/halts/{}/approvals/", {}, "halt"),
    "legal-release": ("/api/legal-requests/{}/approvals/", {"purpose": "release"}, None),
    "legal-erasure": ("/api/legal-requests/{}/approvals/", {"purpose": "erasure"}, None),
}
#: the message of a 403 on each old endpoint (by kind, or for one person on one kind)
REFUSED_403 = {
    "force-continue": "your roles do not allow signing a force-continue",
    "production-replay": "your roles do not allow replay production approve",
    "role-grant": "your roles do not allow role grant approve",
    "halt-clear": "your roles do not allow halt clear",
    "legal-release": "your roles do not allow dsr approve",
    "legal-erasure": "your roles do not allow dsr approve",
}
SIGNER = {kind: "adam" if kind.startswith("legal-") else "cora" for kind in DOORS}
SIGNED_AS = {kind: "admin" if kind.startswith("legal-") else "council" for kind in DOORS}
KINDS = list(DOORS)


def post(client, kind, key, body):
    url, extra, _ = DOORS[kind]
    return client.post(url.format(key), {**body, **extra}, content_type=JSON)


def signed(kind, asked, member_key, name, **payload_args):
    payload = payload_of(kind, asked, role=SIGNED_AS[kind], **payload_args)
    key_row, private = member_key(name)
    return {
        "payload": payload,
        "key_id": key_row.key_id,
        "alg": "ed25519",
        "signature": signing.sign(private, jcs(payload)),
    }


def refusal(response):
    return response.status_code, response.json()["error_code"], response.json()["message"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_vote_answers_with_the_vote(world, as_persona, member_key, kind):  # noqa: F811
    asked, key = world[kind]
    name = SIGNER[kind]
    body = signed(kind, asked, member_key, name, reason="seen it")
    response = post(as_persona(name), kind, key, body)
    assert response.status_code == 201
    answer = response.json()
    assert answer.pop("created_at")
    assert isinstance(answer.pop("seq"), int)
    expected = {"approver": name, "role": SIGNED_AS[kind], "key_id": body["key_id"]}
    if kind.startswith("legal-"):
        expected["purpose"] = kind.removeprefix("legal-")
    else:
        expected |= {"decision": "approve", "reason": "seen it"}
    assert answer == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", EVERYONE)
def test_who_may_vote_and_403_before_404(world, as_persona, kind, name):  # noqa: F811
    _, key = world[kind]
    client = as_persona(name)
    missing_key = "999999" if kind == "halt-clear" else MISSING
    on_missing = post(client, kind, missing_key, {})
    on_garbage = post(client, kind, "999998" if kind == "halt-clear" else "not-a-uuid", {})
    on_real = post(client, kind, key, {})
    if name in SIGN[kind]:
        what = DOORS[kind][2]
        message = f"no such {what}" if what else "no such legal request"
        assert refusal(on_missing) == (404, "NOT_FOUND", message)
        assert refusal(on_garbage) == (404, "NOT_FOUND", message)
        assert (on_real.status_code, on_real.json()["error_code"]) == (400, "INVALID_INPUT")
        assert set(on_real.json()["fields"]) >= {"payload", "key_id", "signature"}
    else:
        for response in (on_missing, on_garbage, on_real):
            assert response.status_code == 403, (kind, name)
            assert response.json()["error_code"] == "PERMISSION_DENIED"
        assert on_missing.json() == on_real.json()
        assert on_real.json()["message"] == REFUSED_403.get((kind, name), REFUSED_403[kind])


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_person_twice_is_refused(world, as_persona, member_key, kind):  # noqa: F811
    asked, key = world[kind]
    name = SIGNER[kind]
    assert post(as_persona(name), kind, key, signed(kind, asked, member_key, name)).status_code == (
        201
    )
    again = post(as_persona(name), kind, key, signed(kind, asked, member_key, name))
    if kind.startswith("legal-"):
        assert refusal(again)[:2] == (409, codes.DSR_ALREADY_APPROVED)
    else:
        signed_what = f"halt {key}" if kind == "halt-clear" else f"request {key}"
        assert refusal(again) == (
            409,
            codes.APPROVAL_DUPLICATE_PERSON,
            f"{name} has already signed {signed_what}",
        )


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_signature_is_refused(world, as_persona, member_key, kind):  # noqa: F811
    asked, key = world[kind]
    name = SIGNER[kind]
    body = signed(kind, asked, member_key, name)
    body["signature"] = signing.sign(member_key(name)[1], b"something else")
    response = post(as_persona(name), kind, key, body)
    assert refusal(response) == (
        400,
        codes.APPROVAL_BAD_SIGNATURE,
        f"the signature does not verify with key {body['key_id']}",
    )


@pytest.mark.parametrize("kind", ["force-continue", "production-replay", "role-grant"])
def test_an_expired_request_is_refused(
    world,  # noqa: F811
    as_persona,
    member_key,
    monkeypatch,
    kind,
):
    asked, key = world[kind]
    name = SIGNER[kind]
    body = signed(kind, asked, member_key, name)
    client = as_persona(name)
    later = asked.expires_at + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    response = post(client, kind, key, body)
    assert refusal(response) == (
        409,
        codes.APPROVAL_EXPIRED,
        gov_services.APPROVAL_EXPIRED_MESSAGE.format(
            request=asked.id, expires_at=signing.format_time(asked.expires_at)
        ),
    )


def test_a_force_continue_vote_in_a_role_not_held_is_403(world, as_persona):  # noqa: F811
    fc, key = world["force-continue"]
    payload = payload_of("force-continue", fc, role="admin")
    body = {"payload": payload, "key_id": "k", "signature": "00"}
    response = post(as_persona("cora"), "force-continue", key, body)
    assert refusal(response)[:2] == (403, "PERMISSION_DENIED")


def test_a_legal_vote_by_whoever_opened_it_is_refused(as_persona, member_key, signers):
    legal = legal_opened_and_checked(by="adam")
    body = signed("legal-erasure", legal, member_key, "adam")
    response = post(as_persona("adam"), "legal-erasure", str(legal.id), body)
    assert refusal(response) == (
        403,
        codes.DSR_SELF_APPROVAL,
        f"adam opened legal request {legal.id} and cannot approve its erasure",
    )


def test_a_purpose_the_legal_request_does_not_have_is_refused(as_persona, member_key, signers):
    """Not a 404 as on the shared page: the old endpoint names the request and its kind."""
    from dsr import services as dsr_services
    from tests.console.personas import persona

    legal = dsr_services.legal_request_open(
        actor=persona("lena"), identifiers=["jane@example.com"], kind="access", legal_basis="15"
    )
    body = signed("legal-release", legal, member_key, "adam")
    response = post(as_persona("adam"), "legal-erasure", str(legal.id), body)
    assert refusal(response) == (
        400,
        codes.DSR_INVALID,
        dsr_services.PURPOSE_KIND_MESSAGE.format(
            request=legal.id, kind="access", purpose="erasure"
        ),
    )
