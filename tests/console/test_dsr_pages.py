"""The DSR pages: every role on every page, a request opened, its identity recorded, an
approval signed in the page (and refused before the identity check, by the requester, twice)."""

from __future__ import annotations

import html
import json
import uuid

import pytest
from django.urls import reverse

from core.canonical import jcs
from core.ledger import codes, signing
from dsr import services
from dsr.models import LegalRequest
from governance.models import GovernanceEvent, Vote
from tests.console.personas import EVERYONE, client_for, persona

pytestmark = pytest.mark.django_db

LIST_ROLES = {"lena", "adam", "cora"}  # legal and admin (DSR); council signs where configured
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


@pytest.fixture
def checked(legal):
    return services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )


def document_for(key, private, legal, purpose, reason=""):
    payload = services.approval_payload_for(request=legal, purpose=purpose, reason=reason)
    return {
        "payload": json.dumps(payload),
        "key_id": key.key_id,
        "signature": signing.sign(private, jcs(payload)),
    }


@pytest.mark.parametrize("name", EVERYONE)
def test_the_list_is_for_legal_admin_and_council(name, legal):
    response = client_for(name).get(reverse("dsr-list"))
    assert response.status_code == (200 if name in LIST_ROLES else 403)
    if name in LIST_ROLES:
        body = response.content.decode()
        assert str(legal.id) in body
        assert "jane" not in body.lower()
        assert "day(s) left" in body


@pytest.mark.parametrize("name", EVERYONE)
def test_the_open_form_is_for_legal_and_admin(name):
    response = client_for(name).get(reverse("dsr-open"))
    assert response.status_code == (200 if name in ACT_ROLES else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_the_request_page_is_for_legal_admin_and_council(name, legal):
    response = client_for(name).get(reverse("dsr-detail", args=[legal.id]))
    assert response.status_code == (200 if name in LIST_ROLES else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_the_approval_page_is_for_admin_and_council(name, checked):
    response = client_for(name).get(reverse("request-detail", args=["legal-erasure", checked.id]))
    assert response.status_code == (200 if name in APPROVE_ROLES else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_identity_and_transitions_are_for_legal_and_admin(name, legal):
    client = client_for(name)
    identity = client.post(reverse("dsr-identity", args=[legal.id]), {"method": "passport"})
    assert identity.status_code == (303 if name in ACT_ROLES else 403)


def test_a_legal_user_asking_for_an_approval_gets_the_same_403_whether_it_exists_or_not(legal):
    client = client_for("lena")
    there = client.get(reverse("request-detail", args=["legal-erasure", legal.id]))
    missing = client.get(reverse("request-detail", args=["legal-erasure", uuid.uuid4()]))
    assert there.status_code == missing.status_code == 403
    assert str(legal.id) not in there.content.decode()
    posted = client.post(reverse("request-detail", args=["legal-erasure", uuid.uuid4()]), {})
    assert posted.status_code == 403


def test_legal_opens_a_request_in_the_page_and_it_is_in_the_ledger(signers):
    client = client_for("lena")
    response = client.post(
        reverse("dsr-open"),
        {
            "identifiers": "Jane.Doe@example.com\n\ncustomer-4711\n",
            "kind": "access",
            "legal_basis": "GDPR Art. 15",
            "due_date": "",
        },
    )
    assert response.status_code == 303
    legal = LegalRequest.objects.get()
    assert response["Location"] == reverse("dsr-detail", args=[legal.id])
    assert len(legal.subject_refs) == 2
    page = client.get(response["Location"]).content.decode()
    assert legal.subject_refs[0] in page
    assert "customer-4711" not in page
    assert GovernanceEvent.objects.filter(type=codes.DSR_OPENED).count() == 1


def test_a_malformed_request_is_refused_in_the_page(signers):
    response = client_for("lena").post(
        reverse("dsr-open"),
        {"identifiers": "jane@example.com", "kind": "access", "legal_basis": "", "due_date": ""},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert codes.DSR_INVALID in body
    assert services.NO_BASIS_MESSAGE in body
    past = client_for("lena").post(
        reverse("dsr-open"),
        {"identifiers": "j", "kind": "access", "legal_basis": "b", "due_date": "2001-01-01"},
    )
    assert past.status_code == 400
    assert "the due date 2001-01-01 is in the past" in html.unescape(past.content.decode())
    assert not LegalRequest.objects.exists()


def test_an_approval_before_the_identity_check_is_refused_in_the_page(legal, member_key):
    key, private = member_key("adam")
    client = client_for("adam")
    page = client.get(reverse("request-detail", args=["legal-erasure", legal.id])).content.decode()
    assert codes.DSR_IDENTITY_UNVERIFIED in page  # said up front
    response = client.post(
        reverse("request-detail", args=["legal-erasure", legal.id]),
        document_for(key, private, legal, "erasure"),
    )
    assert response.status_code == 409
    assert codes.DSR_IDENTITY_UNVERIFIED in response.content.decode()
    assert not Vote.objects.exists()


def test_an_admin_signs_the_erasure_in_the_page_once(checked, member_key):
    key, private = member_key("adam")
    client = client_for("adam")
    page = client.get(
        reverse("request-detail", args=["legal-erasure", checked.id])
    ).content.decode()
    payload = services.approval_payload_for(request=checked, purpose="erasure")
    assert html.escape(jcs(payload).decode(), quote=False) in page.replace("&quot;", '"')
    assert 'id="erasure-plan"' in page
    response = client.post(
        reverse("request-detail", args=["legal-erasure", checked.id]),
        document_for(key, private, checked, "erasure"),
    )
    assert response.status_code == 303
    approval = Vote.objects.get()
    assert (approval.approver.username, approval.payload["purpose"], approval.role) == (
        "adam",
        "erasure",
        "admin",
    )
    again = client.post(
        reverse("request-detail", args=["legal-erasure", checked.id]),
        document_for(key, private, checked, "erasure"),
    )
    assert again.status_code == 409
    assert codes.APPROVAL_DUPLICATE_KEY in again.content.decode()  # the same key again
    detail = client.get(reverse("dsr-detail", args=[checked.id])).content.decode()
    assert "approved</span> by adam" in detail


def test_the_request_page_offers_no_signing_to_a_council_member_who_signed(
    checked, member_key, settings
):
    """With a council quorum of two, the first signer is told she signed, while the other
    council member is still offered the approval page."""
    settings.DSR_APPROVAL_BY = "council"
    key, private = member_key("cora")
    cora = client_for("cora")
    response = cora.post(
        reverse("request-detail", args=["legal-erasure", checked.id]),
        document_for(key, private, checked, "erasure"),
    )
    assert response.status_code == 303
    mine = cora.get(reverse("dsr-detail", args=[checked.id])).content.decode()
    assert 'id="approve-erasure-link"' not in mine
    assert '<span class="badge" id="approve-erasure-yours">you signed</span>' in mine
    theirs = client_for("colin").get(reverse("dsr-detail", args=[checked.id])).content.decode()
    assert 'id="approve-erasure-link"' in theirs
    assert 'id="approve-erasure-yours"' not in theirs


def test_the_requester_cannot_approve_in_the_page(signers, member_key):
    key, private = member_key("adam")
    legal = services.legal_request_open(
        actor=persona("adam"), identifiers=["x@example.com"], kind="erasure", legal_basis="b"
    )
    legal = services.legal_request_identity_verify(request=legal, actor=persona("lena"), method="m")
    client = client_for("adam")
    response = client.post(
        reverse("request-detail", args=["legal-erasure", legal.id]),
        document_for(key, private, legal, "erasure"),
    )
    assert response.status_code == 403
    assert codes.DSR_SELF_APPROVAL in response.content.decode()


def test_transitions_in_the_page(legal):
    client = client_for("lena")
    assert (
        client.post(reverse("dsr-transition", args=[legal.id]), {"action": "start"}).status_code
        == 303
    )
    legal.refresh_from_db()
    assert legal.state == "in_progress"
    fulfil = client.post(reverse("dsr-transition", args=[legal.id]), {"action": "fulfil"})
    assert fulfil.status_code == 409
    assert codes.DSR_STATE in fulfil.content.decode()
    refuse = client.post(
        reverse("dsr-transition", args=[legal.id]),
        {"action": "refuse", "reason": "not the subject"},
    )
    assert refuse.status_code == 303
    legal.refresh_from_db()
    assert (legal.state, legal.refusal_reason) == ("refused", "not the subject")


def test_navigation_shows_legal_requests_to_legal_only_among_the_plain_roles(signers):
    assert "Legal requests" in client_for("lena").get(reverse("trace-list")).content.decode()
    assert "Legal requests" not in client_for("vera").get(reverse("trace-list")).content.decode()


def test_a_council_member_is_told_up_front_that_the_deployment_wants_an_admin(checked):
    page = client_for("cora").get(reverse("request-detail", args=["legal-erasure", checked.id]))
    assert page.status_code == 200
    blocker = html.unescape(page.content.decode())
    assert (
        f"{codes.APPROVAL_ROLE}: cora signed as admin but does not hold the admin role" in blocker
    )
