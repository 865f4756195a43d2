"""The legal request service: open, verify identity, four-eyes approvals, refuse, fulfil."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from core.canonical import jcs
from core.ledger import codes, signing
from dsr import services
from dsr.models import LegalRequest
from governance import ledger
from governance import services as gov_services
from governance.models import GovernanceEvent, Vote
from tests.dsr.factories import enrol, opened, person, signed, verified

pytestmark = pytest.mark.django_db

RELEASE, ERASURE = signing.DSR_RELEASE, signing.DSR_ERASURE


def refused(code: str, message: str | None = None):
    class _Ctx:
        def __enter__(self):
            self.raised = pytest.raises(codes.GovernanceError)
            self.info = self.raised.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.raised.__exit__(*exc)
            assert self.info.value.code == code, self.info.value
            if message is not None:
                assert self.info.value.message == message
            return handled

    return _Ctx()


def test_open_stores_only_opaque_refs_and_appends_a_signed_dsr_opened():
    request = opened(identifiers=("  Jane.Doe@Example.com ", "jane.doe@example.com", "+44 1"))
    assert len(request.subject_refs) == 2  # the e-mail address is one subject, case aside
    assert all(ref.startswith("subj_") and len(ref) == 31 for ref in request.subject_refs)
    event = GovernanceEvent.objects.get(seq=request.opened_event_id)
    assert event.type == codes.DSR_OPENED
    assert event.payload == {
        "request_id": str(request.id),
        "subjects": request.subject_refs,
        "kind": "both",
        "legal_basis": "GDPR Art. 15 and 17",
        "due_date": request.due_date.isoformat(),
        "requested_by": "lena",
    }
    body = jcs(event.payload).decode()
    first, second = request.subject_refs
    assert body == (
        f'{{"due_date":"{request.due_date.isoformat()}","kind":"both",'
        f'"legal_basis":"GDPR Art. 15 and 17","request_id":"{request.id}",'
        f'"requested_by":"lena","subjects":["{first}","{second}"]}}'
    )
    assert "jane" not in body.lower()
    assert "+44" not in body
    row = str(next(iter(LegalRequest.objects.values().filter(pk=request.pk)))).lower()
    assert "jane" not in row
    assert "+44" not in row
    assert request.state == LegalRequest.State.OPEN
    assert ledger.verify().ok


def test_the_due_date_defaults_to_one_month_and_counts_down():
    request = opened()
    today = timezone.localdate()
    assert request.due_date == services.default_due_date(today)
    assert 28 <= request.days_left(today) <= 31


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"identifiers": []}, services.NO_SUBJECT_MESSAGE),
        ({"identifiers": ["  "]}, services.NO_SUBJECT_MESSAGE),
        ({"legal_basis": ""}, services.NO_BASIS_MESSAGE),
        ({"legal_basis": "   "}, services.NO_BASIS_MESSAGE),
        ({"kind": "delete"}, services.KIND_MESSAGE.format(kind="delete")),
        ({"due_date": "tomorrow"}, services.DUE_FORMAT_MESSAGE.format(due="tomorrow")),
    ],
)
def test_a_malformed_request_is_refused_precisely_and_nothing_is_stored(kwargs, message):
    args = {
        "actor": person("lena"),
        "identifiers": ["jane@example.com"],
        "kind": "access",
        "legal_basis": "GDPR Art. 15",
        **kwargs,
    }
    before = GovernanceEvent.objects.count()
    with refused(codes.DSR_INVALID, message):
        services.legal_request_open(**args)
    assert LegalRequest.objects.count() == 0
    assert GovernanceEvent.objects.count() == before


def test_a_due_date_in_the_past_is_refused():
    today = timezone.localdate()
    yesterday = today - timedelta(days=1)
    message = services.DUE_PAST_MESSAGE.format(due=yesterday.isoformat(), today=today.isoformat())
    with refused(codes.DSR_INVALID, message):
        services.legal_request_open(
            actor=person("lena"),
            identifiers=["x"],
            kind="access",
            legal_basis="b",
            due_date=yesterday.isoformat(),
        )


def test_identity_verification_records_method_who_and_when_once():
    request = verified(opened(), by="luke")
    event = GovernanceEvent.objects.get(seq=request.identity_event_id)
    assert event.type == codes.DSR_IDENTITY_VERIFIED
    assert event.payload == {
        "request_id": str(request.id),
        "subjects": request.subject_refs,
        "method": "passport checked by video call",
        "verified_by": "luke",
    }
    assert request.identity_verified_by.username == "luke"
    assert request.identity_verified_at == event.created_at
    with refused(codes.DSR_STATE):
        verified(request)


def test_an_approval_before_the_identity_is_verified_is_refused():
    bob = enrol("bob")
    request = opened()
    message = services.IDENTITY_UNVERIFIED_MESSAGE.format(request=request.id)
    with refused(codes.DSR_IDENTITY_UNVERIFIED, message):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=bob.user,
            document=signed(bob, request, ERASURE),
        )
    assert not Vote.objects.exists()


def test_the_requester_cannot_approve_their_own_request():
    bob = enrol("bob")
    request = verified(opened(by="bob"))
    message = services.SELF_APPROVAL_MESSAGE.format(user="bob", request=request.id, purpose=ERASURE)
    with refused(codes.DSR_SELF_APPROVAL, message):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=bob.user,
            document=signed(bob, request, ERASURE),
        )


def test_an_admin_signature_approves_and_a_second_is_refused():
    bob, grace = enrol("bob"), enrol("grace")
    request = verified(opened())
    approval = services.legal_request_approve(
        request=request, purpose=ERASURE, approver=bob.user, document=signed(bob, request, ERASURE)
    )
    event = approval.event
    assert event.type == codes.DSR_APPROVAL
    assert event.actor_key_id == bob.key.key_id
    assert signing.verify(
        signing.public_key_of(bob.private), jcs(event.payload), event.actor_signature
    )
    assert event.payload["type"] == signing.DSR_APPROVAL_TYPE
    assert event.payload["identity_seq"] == request.identity_event_id
    assert services.approval_status(request=request, purpose=ERASURE).complete
    assert not services.approval_status(request=request, purpose=RELEASE).complete
    # the same key again: the duplicate key is named first, as every kind's votes do
    with refused(
        codes.APPROVAL_DUPLICATE_KEY,
        gov_services.APPROVAL_DUPLICATE_KEY_MESSAGE.format(
            key_id=bob.key.key_id, subject=f"legal request {request.id}"
        ),
    ):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=bob.user,
            document=signed(bob, request, ERASURE),
        )
    again = enrol("bob")  # another key of bob's: the person has approved already
    with refused(
        codes.DSR_ALREADY_APPROVED,
        services.ALREADY_APPROVED_MESSAGE.format(user="bob", request=request.id, purpose=ERASURE),
    ):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=again.user,
            document=signed(again, request, ERASURE),
        )
    with refused(
        codes.DSR_ALREADY_APPROVED,
        services.APPROVAL_COMPLETE_MESSAGE.format(request=request.id, purpose=ERASURE),
    ):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=grace.user,
            document=signed(grace, request, ERASURE),
        )
    assert Vote.objects.count() == 1
    assert ledger.verify().ok


def test_a_signature_over_another_request_or_a_tampered_payload_is_refused():
    bob = enrol("bob")
    first, second = verified(opened()), verified(opened(identifiers=("other@example.com",)))
    with refused(codes.APPROVAL_OTHER_REQUEST):
        services.legal_request_approve(
            request=second, purpose=ERASURE, approver=bob.user, document=signed(bob, first, ERASURE)
        )
    document = signed(bob, first, ERASURE)
    document["payload"]["subjects"] = ["subj_AAAAAAAAAAAAAAAAAAAAAAAAAA"]
    with refused(codes.APPROVAL_BAD_SIGNATURE):
        services.legal_request_approve(
            request=first, purpose=ERASURE, approver=bob.user, document=document
        )
    payload = services.approval_payload_for(request=first, purpose=ERASURE)
    payload["kind"] = "access"
    with refused(codes.APPROVAL_PAYLOAD_MISMATCH):
        services.legal_request_approve(
            request=first, purpose=ERASURE, approver=bob.user, document=bob.sign(payload)
        )
    assert not Vote.objects.exists()


def test_a_purpose_the_kind_does_not_have_is_refused():
    bob = enrol("bob")
    request = verified(opened(kind="access"))
    message = services.PURPOSE_KIND_MESSAGE.format(
        request=request.id, kind="access", purpose=ERASURE
    )
    with refused(codes.DSR_INVALID, message):
        services.legal_request_approve(
            request=request, purpose=ERASURE, approver=bob.user, document={}
        )


def test_legal_staff_cannot_sign_as_admin():
    luke_key = enrol("luke")  # a legal user with a confirmed key still lacks the admin role
    request = verified(opened())
    with refused(codes.APPROVAL_ROLE):
        services.legal_request_approve(
            request=request,
            purpose=ERASURE,
            approver=luke_key.user,
            document=signed(luke_key, request, ERASURE),
        )


@override_settings(DSR_APPROVAL_BY="council", GOVERNANCE_COUNCIL_QUORUM=2)
def test_where_the_deployment_says_so_a_council_quorum_approves():
    bob, carol, dave = enrol("bob"), enrol("carol"), enrol("dave")
    request = verified(opened())
    payload = services.approval_payload_for(request=request, purpose=RELEASE)
    assert payload["role"] == "council"
    with refused(codes.APPROVAL_ROLE):  # an admin alone does not count here
        services.legal_request_approve(
            request=request,
            purpose=RELEASE,
            approver=bob.user,
            document=signed(bob, request, RELEASE),
        )
    services.legal_request_approve(
        request=request,
        purpose=RELEASE,
        approver=carol.user,
        document=signed(carol, request, RELEASE),
    )
    status = services.approval_status(request=request, purpose=RELEASE)
    assert (status.have, status.needed, status.complete) == (1, 2, False)
    assert status.missing == "1 council approval(s)"
    services.legal_request_approve(
        request=request,
        purpose=RELEASE,
        approver=dave.user,
        document=signed(dave, request, RELEASE),
    )
    assert services.approval_status(request=request, purpose=RELEASE).complete


def test_states_move_open_in_progress_and_refused_with_a_reason():
    request = opened()
    with refused(codes.DSR_INVALID, services.REFUSAL_REASON_MESSAGE):
        services.legal_request_refuse(request=request, actor=person("luke"), reason=" ")
    request = services.legal_request_start(request=request, actor=person("luke"))
    assert request.state == LegalRequest.State.IN_PROGRESS
    started = GovernanceEvent.objects.filter(type=codes.DSR_STATE_CHANGED).get()
    expected = f'{{"by":"luke","from":"open","request_id":"{request.id}","to":"in_progress"}}'
    assert jcs(started.payload) == expected.encode()
    with refused(
        codes.DSR_STATE,
        services.STATE_MESSAGE.format(request=request.id, state="in progress", action="be started"),
    ):
        services.legal_request_start(request=request, actor=person("luke"))
    request = services.legal_request_refuse(
        request=request, actor=person("luke"), reason="the requester is not the subject"
    )
    assert request.state == LegalRequest.State.REFUSED
    closed = GovernanceEvent.objects.get(seq=request.closed_event_id)
    assert closed.type == codes.DSR_CLOSED
    assert closed.payload["outcome"] == "refused"
    assert closed.payload["reason"] == "the requester is not the subject"
    with refused(codes.DSR_STATE):
        services.legal_request_refuse(request=request, actor=person("luke"), reason="again")
    with refused(codes.DSR_STATE):
        verified(request)
    assert ledger.verify().ok


def test_fulfilment_waits_for_what_was_asked():
    request = services.legal_request_start(request=opened(kind="erasure"), actor=person("lena"))
    with refused(
        codes.DSR_STATE,
        services.FULFIL_MESSAGE.format(request=request.id, what="erasure is executed"),
    ):
        services.legal_request_fulfil(request=request, actor=person("lena"))
