"""/api/requests/: one set of endpoints for every kind of governed request (issue 19). Every
kind read, listed and voted on through them; every role on every endpoint (403 before 404);
the body matches the kind's own payload builder and refusals; the schema documents them."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from core.canonical import jcs
from core.ledger import codes, signing
from dsr import services as dsr_services
from governance import services as gov_services
from governance.models import Halt, RoleGrantRequest, Vote
from tests.console.personas import EVERYONE, persona

pytestmark = pytest.mark.django_db

MISSING = str(uuid.UUID(int=7))
JSON = "application/json"


@pytest.fixture
def world(replayed, ingest, signers):
    """One open request of every kind."""
    diverged = replayed("diverged", by="alice")
    replayed("broken_chain")
    fc = gov_services.force_continue_request_file(
        run=diverged, actor=persona("alice"), reason="drift in the router is known"
    )
    production = gov_services.production_replay_request_file(
        trace=ingest("ok"), actor=persona("alice"), reason="disaster recovery drill"
    )
    grant = gov_services.user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["legal", "council"], reason="elected"
    ).grant
    legal = legal_opened_and_checked(by="lena")
    halt = Halt.objects.get(payload__target_kind="blob")
    return {
        "force-continue": (fc, str(fc.id)),
        "production-replay": (production, str(production.id)),
        "role-grant": (grant, str(grant.id)),
        "halt-clear": (halt, str(halt.seq)),
        "legal-release": (legal, str(legal.id)),
        "legal-erasure": (legal, str(legal.id)),
    }


def legal_opened_and_checked(*, by):
    """A legal request for one subject's access and erasure, its identity checked, by ``by``."""
    legal = dsr_services.legal_request_open(
        actor=persona(by),
        identifiers=["jane.doe@example.com"],
        kind="both",
        legal_basis="GDPR Art. 15 and 17",
    )
    return dsr_services.legal_request_identity_verify(
        request=legal, actor=persona(by), method="passport seen"
    )


def payload_of(kind, asked, *, role="council", decision="approve", reason=""):
    """The kind's own payload builder, as the per-kind endpoints and pages use it."""
    if kind == "force-continue":
        return gov_services.force_continue_payload_for(
            request=asked, decision=decision, role=role, reason=reason
        )
    if kind == "production-replay":
        return gov_services.production_replay_payload_for(
            request=asked, decision=decision, reason=reason
        )
    if kind == "role-grant":
        return gov_services.role_grant_payload_for(request=asked, decision=decision, reason=reason)
    if kind == "halt-clear":
        return gov_services.halt_clear_payload_for(halt=asked, reason=reason)
    purpose = kind.removeprefix("legal-")
    return dsr_services.approval_payload_for(request=asked, purpose=purpose, reason=reason)


#: who may see each kind's requests, and who may sign them (the roles matrix)
SEE = {
    "force-continue": {"vera", "alice", "oscar", "adam", "cora", "lena"},
    "production-replay": {"vera", "alice", "oscar", "adam", "cora", "lena"},
    "role-grant": {"adam", "cora"},
    "halt-clear": {"vera", "alice", "oscar", "adam", "cora", "lena"},
    "legal-release": {"adam", "cora"},
    "legal-erasure": {"adam", "cora"},
}
SIGN = {
    "force-continue": {"adam", "cora"},
    "production-replay": {"cora"},
    "role-grant": {"cora"},
    "halt-clear": {"cora"},
    "legal-release": {"adam", "cora"},
    "legal-erasure": {"adam", "cora"},
}
KINDS = list(SEE)


def test_the_kinds_are_listed(as_persona):
    body = as_persona("vera").get("/api/requests/").json()
    assert [k["name"] for k in body] == KINDS
    halt = next(k for k in body if k["name"] == "halt-clear")
    assert halt == {
        "name": "halt-clear",
        "label": "Halt clear",
        "summary": "clear a halt on a stored file, a trace or a snapshot: a council quorum signs",
        "quorum": "2 council signature(s)",
        "signer_roles": ["council"],
    }


@pytest.mark.parametrize("name", EVERYONE)
def test_every_role_on_every_endpoint(world, as_persona, name):
    client = as_persona(name)
    for kind in KINDS:
        _, key = world[kind]
        listed = client.get(f"/api/requests/{kind}/")
        detail = client.get(f"/api/requests/{kind}/{key}/")
        missing_key = "999999" if kind == "halt-clear" else MISSING
        missing = client.get(f"/api/requests/{kind}/{missing_key}/")
        voted = client.post(f"/api/requests/{kind}/{missing_key}/votes/", {}, content_type=JSON)
        where = f"{kind} as {name}"
        if name in SEE[kind]:
            assert (listed.status_code, detail.status_code, missing.status_code) == (
                200,
                200,
                404,
            ), where
            assert [r["key"] for r in listed.json()] == [key], where
        else:
            assert (listed.status_code, detail.status_code, missing.status_code) == (
                403,
                403,
                403,
            ), where
            assert detail.json()["error_code"] == "PERMISSION_DENIED", where
        assert voted.status_code == (404 if name in SIGN[kind] and name in SEE[kind] else 403), (
            where
        )


@pytest.mark.parametrize("url", ["/api/requests/", "/api/requests/halt-clear/"])
def test_anonymous_gets_401(db, url):
    assert Client().get(url).status_code == 401
    assert Client().post("/api/requests/halt-clear/1/votes/", {}).status_code == 401


def test_a_kind_that_is_not_registered_is_not_found(as_persona):
    response = as_persona("cora").get("/api/requests/nope/")
    assert response.status_code == 404
    assert response.json()["error_code"] == "NOT_FOUND"


@pytest.mark.parametrize("kind", KINDS)
def test_the_detail_carries_the_kinds_own_payload_and_tally(world, as_persona, kind):
    asked, key = world[kind]
    signer = "adam" if kind.startswith("legal-") else "cora"
    body = as_persona(signer).get(f"/api/requests/{kind}/{key}/?reason=seen").json()
    role = "admin" if kind.startswith("legal-") else "council"
    expected = payload_of(kind, asked, role=role, reason="seen")
    assert body["payload"] == expected
    assert body["payload_jcs"] == jcs(expected).decode()
    assert (body["kind"], body["key"], body["state"], body["votes"]) == (kind, key, "pending", [])
    assert body["url"] == f"/requests/{kind}/{key}/"
    assert body["may_sign_as"] == [role]
    assert body["refusals"] == []
    needed = {
        "force-continue": {"admin": 1, "council": 2},
        "production-replay": {"council": 2},
        "role-grant": {"council": 2},
        "halt-clear": {"council": 2},
        "legal-release": {"admin": 1},
        "legal-erasure": {"admin": 1},
    }[kind]
    assert body["needed"] == needed


def test_the_refusals_say_why_you_may_not_sign(world, as_persona):
    _, key = world["legal-erasure"]
    body = as_persona("cora").get(f"/api/requests/legal-erasure/{key}/").json()
    assert body["may_sign_as"] == []
    assert body["refusals"] == [
        {
            "role": "admin",
            "error_code": codes.APPROVAL_ROLE,
            "message": "cora signed as admin but does not hold the admin role",
        }
    ]


def test_a_bad_decision_or_role_is_a_validation_error(world, as_persona):
    _, key = world["halt-clear"]
    response = as_persona("cora").get(f"/api/requests/halt-clear/{key}/?decision=deny")
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_INPUT"


def vote(client, kind, key, payload, *, member_key, name):
    key_row, private = member_key(name)
    return client.post(
        f"/api/requests/{kind}/{key}/votes/",
        {
            "payload": payload,
            "key_id": key_row.key_id,
            "alg": "ed25519",
            "signature": signing.sign(private, jcs(payload)),
        },
        content_type=JSON,
    )


def test_a_halt_is_cleared_by_two_council_votes(world, as_persona, member_key):
    halt, key = world["halt-clear"]
    payload = payload_of("halt-clear", halt)
    first = vote(as_persona("cora"), "halt-clear", key, payload, member_key=member_key, name="cora")
    assert first.status_code == 201
    body = first.json()
    assert [(v["approver"], v["role"]) for v in body["votes"]] == [("cora", "council")]
    assert body["needed"] == {"council": 1}
    assert body["refusals"][0]["error_code"] == codes.APPROVAL_DUPLICATE_PERSON
    again = vote(as_persona("cora"), "halt-clear", key, payload, member_key=member_key, name="cora")
    assert again.status_code == 409
    assert again.json()["error_code"] == codes.APPROVAL_DUPLICATE_PERSON
    second = vote(
        as_persona("colin"), "halt-clear", key, payload, member_key=member_key, name="colin"
    )
    assert second.status_code == 201
    assert second.json()["state"] == "cleared"
    assert second.json()["needed"] == {}
    assert not Halt.objects.active().filter(seq=halt.seq).exists()


def test_a_role_grant_is_approved_by_two_council_votes(world, as_persona, member_key):
    grant, key = world["role-grant"]
    payload = payload_of("role-grant", grant)
    for name in ("cora", "colin"):
        assert vote(
            as_persona(name), "role-grant", key, payload, member_key=member_key, name=name
        ).status_code == (201)
    grant.refresh_from_db()
    assert grant.state == RoleGrantRequest.State.APPROVED
    assert as_persona("cora").get(f"/api/requests/role-grant/{key}/").json()["state"] == "approved"


def test_a_legal_erasure_is_approved_once_and_only_with_its_own_payload(
    world, as_persona, member_key
):
    legal, key = world["legal-erasure"]
    release = payload_of("legal-release", legal)
    wrong = vote(
        as_persona("adam"), "legal-erasure", key, release, member_key=member_key, name="adam"
    )
    assert (wrong.status_code, wrong.json()["error_code"]) == (400, "APPROVAL_PAYLOAD_MISMATCH")
    assert not Vote.objects.exists()
    payload = payload_of("legal-erasure", legal)
    voted = vote(
        as_persona("adam"), "legal-erasure", key, payload, member_key=member_key, name="adam"
    )
    assert voted.status_code == 201
    assert voted.json()["state"] == "approved"
    assert [(v["approver"], v["role"]) for v in voted.json()["votes"]] == [("adam", "admin")]
    assert Vote.objects.get().request.kind == "legal-erasure"
    again = vote(
        as_persona("adam"), "legal-erasure", key, payload, member_key=member_key, name="adam"
    )
    # another key of adam's (``vote`` registers one): the legal code for the same person
    assert (again.status_code, again.json()["error_code"]) == (409, codes.DSR_ALREADY_APPROVED)


def test_a_signature_from_another_request_is_refused(world, as_persona, member_key):
    _, key = world["force-continue"]
    production, _ = world["production-replay"]
    other = payload_of("production-replay", production)
    response = vote(
        as_persona("cora"), "force-continue", key, other, member_key=member_key, name="cora"
    )
    assert (response.status_code, response.json()["error_code"]) == (
        400,
        codes.APPROVAL_OTHER_REQUEST,
    )
    assert as_persona("cora").get(f"/api/requests/force-continue/{key}/").json()["votes"] == []


def test_a_vote_in_a_role_not_held_is_refused_before_anything_is_read(world, as_persona):
    fc, key = world["force-continue"]
    payload = payload_of("force-continue", fc, role="admin")
    response = as_persona("cora").post(
        f"/api/requests/force-continue/{key}/votes/",
        {"payload": payload, "key_id": "k", "signature": "00"},
        content_type=JSON,
    )
    assert response.status_code == 403


def test_the_schema_documents_them(as_persona):
    schema = json.loads(
        as_persona("vera").get("/api/schema/", HTTP_ACCEPT="application/json").content
    )
    paths = schema["paths"]
    assert paths["/api/requests/"]["get"]["operationId"] == "request_kinds_list"
    assert paths["/api/requests/{kind}/"]["get"]["operationId"] == "requests_list"
    assert paths["/api/requests/{kind}/{key}/"]["get"]["operationId"] == "requests_retrieve"
    vote_op = paths["/api/requests/{kind}/{key}/votes/"]["post"]
    assert vote_op["operationId"] == "requests_vote"
    assert set(vote_op["responses"]) >= {"201", "400", "403", "404", "409"}
