"""/api/legal-requests/: every role on every endpoint, the exact refusal codes, the schema."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from core.canonical import jcs
from core.ledger import codes, signing
from dsr import services
from dsr.models import LegalRequest
from governance.models import Vote
from tests.console.personas import EVERYONE, client_for, persona

pytestmark = pytest.mark.django_db

LIST_ROLES = {"lena", "adam", "cora"}
ACT_ROLES = {"lena", "adam"}
APPROVE_ROLES = {"adam", "cora"}


@pytest.fixture
def legal(signers):
    return services.legal_request_open(
        actor=persona("lena"),
        identifiers=["jane.doe@example.com"],
        kind="both",
        legal_basis="GDPR Art. 15 and 17",
    )


def signed(key, private, legal, purpose, reason=""):
    payload = services.approval_payload_for(request=legal, purpose=purpose, reason=reason)
    return {
        "purpose": purpose,
        "payload": payload,
        "key_id": key.key_id,
        "alg": "ed25519",
        "signature": signing.sign(private, jcs(payload)),
    }


@pytest.mark.parametrize("name", EVERYONE)
def test_list_and_detail_per_role(name, legal):
    client = client_for(name)
    listed = client.get(reverse("api-legal-request-list"))
    detail = client.get(reverse("api-legal-request-detail", args=[legal.id]))
    expected = 200 if name in LIST_ROLES else 403
    assert (listed.status_code, detail.status_code) == (expected, expected)
    if expected == 200:
        assert listed.json()[0]["id"] == str(legal.id)
        assert detail.json()["subjects"] == legal.subject_refs
        assert "jane" not in detail.content.decode().lower()


@pytest.mark.parametrize("name", EVERYONE)
def test_open_per_role(name, signers):
    response = client_for(name).post(
        reverse("api-legal-request-list"),
        {"identifiers": ["a@example.com"], "kind": "access", "legal_basis": "Art. 15"},
        content_type="application/json",
    )
    assert response.status_code == (201 if name in ACT_ROLES else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_identity_and_transition_per_role(name, legal):
    client = client_for(name)
    identity = client.post(
        reverse("api-legal-request-identity", args=[legal.id]),
        {"method": "passport"},
        content_type="application/json",
    )
    assert identity.status_code == (200 if name in ACT_ROLES else 403)
    start = client.post(
        reverse("api-legal-request-transition", args=[legal.id]),
        {"action": "start"},
        content_type="application/json",
    )
    assert start.status_code == (200 if name in ACT_ROLES else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_approve_per_role_refused_before_identity(name, legal):
    response = client_for(name).post(
        reverse("api-legal-request-approve", args=[legal.id]),
        {"purpose": "erasure", "payload": {}, "key_id": "k", "signature": "00"},
        content_type="application/json",
    )
    if name in APPROVE_ROLES:
        assert response.status_code == 409
        assert response.json()["error_code"] == codes.DSR_IDENTITY_UNVERIFIED
    else:
        assert response.status_code == 403


def test_a_legal_user_gets_the_same_403_for_an_existing_and_a_missing_request(legal):
    client = client_for("lena")
    body = {"purpose": "erasure", "payload": {}, "key_id": "k", "signature": "00"}
    there = client.post(
        reverse("api-legal-request-approve", args=[legal.id]), body, content_type="application/json"
    )
    missing = client.post(
        reverse("api-legal-request-approve", args=[uuid.uuid4()]),
        body,
        content_type="application/json",
    )
    assert there.status_code == missing.status_code == 403
    assert there.json() == missing.json()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"identifiers": [], "kind": "access", "legal_basis": "b"}, services.NO_SUBJECT_MESSAGE),
        ({"identifiers": ["x"], "kind": "access", "legal_basis": ""}, services.NO_BASIS_MESSAGE),
        (
            {"identifiers": ["x"], "kind": "access", "legal_basis": "b", "due_date": "2001-01-01"},
            None,
        ),
    ],
)
def test_a_malformed_request_is_a_precise_400(body, message, signers):
    response = client_for("lena").post(
        reverse("api-legal-request-list"), body, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error_code"] == codes.DSR_INVALID
    if message:
        assert response.json()["message"] == message
    assert not LegalRequest.objects.exists()


def test_the_four_eyes_flow_over_the_api(legal, member_key):
    key, private = member_key("adam")
    lena, adam = client_for("lena"), client_for("adam")
    detail = adam.get(
        reverse("api-legal-request-detail", args=[legal.id]), {"purpose": "release"}
    ).json()
    assert detail["payload"] == services.approval_payload_for(request=legal, purpose="release")
    assert detail["payload_jcs"] == jcs(detail["payload"]).decode()
    lena.post(
        reverse("api-legal-request-identity", args=[legal.id]),
        {"method": "passport"},
        content_type="application/json",
    )
    legal.refresh_from_db()
    url = reverse("api-legal-request-approve", args=[legal.id])
    created = adam.post(
        url, signed(key, private, legal, "release"), content_type="application/json"
    )
    assert created.status_code == 201
    assert created.json()["purpose"] == "release"
    assert created.json()["approver"] == "adam"
    twice = adam.post(url, signed(key, private, legal, "release"), content_type="application/json")
    # the same key again: named as a duplicate key, as every kind's votes are
    assert (twice.status_code, twice.json()["error_code"]) == (409, codes.APPROVAL_DUPLICATE_KEY)
    after = lena.get(reverse("api-legal-request-detail", args=[legal.id])).json()
    assert after["approvals"][0] == {
        "purpose": "release",
        "role": "admin",
        "have": 1,
        "needed": 1,
        "complete": True,
        "approvers": ["adam"],
    }
    assert Vote.objects.count() == 1


def test_the_schema_names_the_legal_request_endpoints(signers):
    schema = client_for("lena").get(reverse("schema"), {"format": "json"}).json()
    for path in (
        "/api/legal-requests/",
        "/api/legal-requests/{request_id}/",
        "/api/legal-requests/{request_id}/identity/",
        "/api/legal-requests/{request_id}/transition/",
        "/api/legal-requests/{request_id}/approvals/",
    ):
        assert path in schema["paths"]
