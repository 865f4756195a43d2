"""Every kind of governed request through one module: filed, voted, tallied, approved, and
each refusal with its exact code and message.

The kinds are the registry's (``governance.requests.builtin.kinds()``): the test files each
one as its callers do, then signs, records and reads it only through what the kind module
offers (``payload_for``, ``record``, ``state_of``, ``votes``, ``detail``). Where a kind does
not have a refusal (a halt never expires), the expected outcome says so
(:data:`ACCEPTED`, with why): nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from core.canonical import jcs
from core.ledger import codes, signing
from dsr import services as dsr_services
from governance import membership, services
from governance.models import GovernanceEvent, Vote
from governance.requests.builtin import kinds
from governance.services import user_roles
from tests.dsr import factories as dsr_factories
from tests.governance.conftest import ingest
from tests.governance.factories import enrol, filed_request, person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]

KINDS = [
    "force-continue",
    "production-replay",
    "role-grant",
    "halt-clear",
    "legal-release",
    "legal-erasure",
]
REASON = "looked at it twice"


@pytest.fixture(autouse=True)
def _everyone():
    """Everyone holds their roles (per the ledger) before anything is filed."""
    for name in ("alice", "bob", "grace", "carol", "dave", "sam", "frank", "oscar", "lena"):
        person(name)


@dataclass(frozen=True)
class Accepted:
    """The kind has no such refusal: the vote is recorded (``why`` says why)."""

    why: str


ACCEPTED = Accepted


@dataclass
class Filed:
    """One filed request of some kind, as the kind module's pages see it."""

    kind: Any
    key: str
    #: how refusals name it ("request <id>", "halt <seq>", "legal request <id>")
    subject: str
    #: who filed it (for a halt, who declared the incident that set it)
    filer: str
    #: who signs it to approval, in order, each with the role they sign in
    signers: list[tuple[str, str]]
    #: the row itself (the kind's ``detail(key)``)
    row: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def fresh(self) -> Any:
        return self.kind.detail(self.key)

    def payload(self, role: str, *, row: Any = None, reason: str = REASON) -> dict[str, Any]:
        return self.kind.payload_for(
            row if row is not None else self.fresh(),
            decision=signing.APPROVE,
            role=role,
            reason=reason,
        )

    def record(self, user: Any, document: Any) -> Vote:
        return self.kind.record(self.fresh(), approver=user, document=document)


def _force_continue(*, second: bool = False) -> Filed:
    row = filed_request()
    return Filed(
        kinds().get("force-continue"),
        str(row.id),
        f"request {row.id}",
        "alice",
        [("bob", signing.ROLE_ADMIN), ("carol", "council"), ("dave", "council")],
        row,
    )


def _production_replay(*, second: bool = False) -> Filed:
    trace = ingest("ok") if not second else _the_trace()
    row = services.production_replay_request_file(
        trace=trace, actor=person("bob" if second else "alice"), reason="drill"
    )
    return Filed(
        kinds().get("production-replay"),
        str(row.id),
        f"request {row.id}",
        "bob" if second else "alice",
        [("carol", "council"), ("dave", "council")],
        row,
    )


def _the_trace() -> Any:
    from replay.models import Trace

    return Trace.objects.get()


def _role_grant(*, second: bool = False) -> Filed:
    grantee = person("oscar" if second else "frank")
    held = sorted(membership.roles_held(grantee))
    row = services.user_roles_change(
        actor=person("bob"), user=grantee, roles=[*held, "council"], reason="on call"
    ).grant
    return Filed(
        kinds().get("role-grant"),
        str(row.id),
        f"request {row.id}",
        "bob",
        [("carol", "council"), ("dave", "council")],
        row,
        {"grantee": grantee, "held": held},
    )


def _halt_clear(*, second: bool = False) -> Filed:
    from governance.selectors import halts_active

    target = ("c" if second else "a") * 32
    # sam (admin and council) declares the incident: the halt it sets is his, and four eyes
    # keep him from signing its clear (tests/governance/test_incidents.py: a halt a failed
    # replay set has no declarer)
    services.security_incident_record(
        actor=person("sam"), targets=[("trace", target)], reason="leaked key"
    )
    row = halts_active().get(payload__target_id=target)
    return Filed(
        kinds().get("halt-clear"),
        str(row.seq),
        f"halt {row.seq}",
        "sam",
        [("carol", "council"), ("dave", "council")],
        row,
    )


def _legal(purpose: str) -> Callable[..., Filed]:
    def filed(*, second: bool = False) -> Filed:
        identifiers = ("other@example.com",) if second else ("Jane.Doe@Example.com",)
        row = dsr_factories.verified(dsr_factories.opened(identifiers=identifiers))
        return Filed(
            kinds().get(f"legal-{purpose}"),
            str(row.id),
            f"legal request {row.id}",
            "lena",
            [("bob", signing.ROLE_ADMIN)],  # DSR_APPROVAL_BY's default: one admin
            row,
            {"purpose": purpose},
        )

    return filed


FILE: dict[str, Callable[..., Filed]] = {
    "force-continue": _force_continue,
    "production-replay": _production_replay,
    "role-grant": _role_grant,
    "halt-clear": _halt_clear,
    "legal-release": _legal(signing.DSR_RELEASE),
    "legal-erasure": _legal(signing.DSR_ERASURE),
}


def _refused(filed: Filed, user: Any, document: Any) -> tuple[str, str] | Vote:
    """The refusal's (code, message), or the Vote when it was recorded; a refusal appends no
    event and no row."""
    before = (GovernanceEvent.objects.count(), Vote.objects.count())
    try:
        return filed.record(user, document)
    except codes.GovernanceError as refused:
        assert (GovernanceEvent.objects.count(), Vote.objects.count()) == before
        return refused.code, refused.message


def _check(outcome: Any, expected: Any) -> None:
    if isinstance(expected, Accepted):
        assert isinstance(outcome, Vote), outcome
    else:
        assert outcome == expected


def test_the_registry_holds_exactly_the_kinds_this_module_covers():
    assert sorted(kinds().names()) == sorted(KINDS)


# --- file, vote, tally, approve --------------------------------------------------------------

#: the ledger event each kind's approval appends (None: the approval is the quorum of signed
#: votes itself, read when the release or erasure happens)
DECISION_CODE = {
    "force-continue": codes.FORCE_CONTINUE_APPROVED,
    "production-replay": codes.PRODUCTION_REPLAY_APPROVED,
    "role-grant": codes.ROLE_GRANT_APPROVED,
    "halt-clear": codes.FORCE_HALT_CLEAR,
    "legal-release": None,
    "legal-erasure": None,
}
#: what ``state_of`` says once approved
APPROVED_STATE = dict.fromkeys(KINDS, "approved") | {"halt-clear": "cleared"}


def _decision_payload(name: str, filed: Filed, seqs: list[int]) -> dict[str, Any] | None:
    row = filed.row
    if name == "force-continue":
        return {
            "request_id": str(row.id),
            "run_id": str(row.run_id),
            "trace_id": row.run.trace.trace_id,
            "step": 3,
            "divergence_digest": row.divergence_digest,
            "approval_seqs": seqs,
            "admins": 1,
            "council": 2,
            "denials": 0,
        }
    if name == "production-replay":
        return {
            "request_id": str(row.id),
            "trace_id": row.trace.trace_id,
            "trace_sha256": row.trace.blob.sha256,
            "approval_seqs": seqs,
            "council": 2,
            "denials": 0,
        }
    if name == "role-grant":
        held = filed.extra["held"]
        return {
            "request_id": str(row.id),
            "user_id": filed.extra["grantee"].pk,
            "username": "frank",
            "roles_before": held,
            "roles_after": sorted({*held, "council"}),
            "grant": ["council"],
            "requested_by": "bob",
            "approval_seqs": seqs,
            "council": 2,
            "denials": 0,
        }
    if name == "halt-clear":
        return {
            "halt_seq": row.seq,
            "target_kind": "trace",
            "target_id": "a" * 32,
            "approval_seqs": seqs,
        }
    return None


def _took_effect(name: str, filed: Filed) -> bool:
    """What the approval did, read back: the resumed or production run queued, the roles
    held, the halt gone, the release or erasure allowed per the signed ledger."""
    from governance.selectors import halts_active

    row = filed.fresh()
    if name == "force-continue":
        return row.resumed_run is not None and row.resumed_run.continue_past == [3]
    if name == "production-replay":
        return row.run is not None and row.run.mode == "production"
    if name == "role-grant":
        grantee = filed.extra["grantee"]
        membership.forget(grantee)
        return "council" in membership.roles_held(grantee)
    if name == "halt-clear":
        return not halts_active().filter(seq=row.seq).exists()
    found = dsr_services.require_approved(request=row, purpose=filed.extra["purpose"])
    return len(found.counted) == 1


@pytest.mark.parametrize("name", KINDS)
def test_it_is_filed_voted_tallied_and_approved(name):
    filed = FILE[name]()
    assert filed.kind.state_of(filed.fresh()) == "pending"
    seqs = []
    for count, (who, role) in enumerate(filed.signers, start=1):
        signer = enrol(who)
        document = signer.sign(filed.payload(role))
        vote = filed.record(signer.user, document)

        # the vote event carries exactly the signed bytes, under the kind's vote code
        assert vote.event.type == filed.kind.codes.vote
        assert jcs(vote.event.payload) == jcs(document["payload"]) == jcs(vote.payload)
        assert (vote.event.actor_key_id, vote.event.actor_signature) == (
            signer.key.key_id,
            document["signature"],
        )
        seqs.append(vote.event_id)
        votes = filed.kind.votes(filed.fresh())
        assert [(v.seq, v.approver, v.role, v.decision, v.reason) for v in votes] == [
            (seq, name_, role_, signing.APPROVE, REASON)
            for seq, (name_, role_) in zip(seqs, filed.signers[:count], strict=False)
        ]
        done = count == len(filed.signers)
        assert filed.kind.state_of(filed.fresh()) == (APPROVED_STATE[name] if done else "pending")

    code = DECISION_CODE[name]
    decided = GovernanceEvent.objects.filter(seq__gt=seqs[-1]).order_by("seq").first()
    if code is None:
        assert decided is None  # nothing but the signed votes
    else:
        assert (decided.type, decided.payload) == (code, _decision_payload(name, filed, seqs))
        once = f"halt-clear:{filed.key}" if name == "halt-clear" else f"{name}-decision:{filed.key}"
        assert decided.idempotency_key == once
    assert _took_effect(name, filed)
    from tests.governance.test_ledger_tables import _verify

    assert _verify()[0] == 0


# --- refusals --------------------------------------------------------------------------------


def _self_expected(name: str, filed: Filed) -> Any:
    if name == "halt-clear":
        return (
            codes.APPROVAL_SELF,
            services.HALT_CLEAR_SELF_MESSAGE.format(user=filed.filer, halt=filed.key),
        )
    if name.startswith("legal-"):
        return (
            codes.DSR_SELF_APPROVAL,
            dsr_services.SELF_APPROVAL_MESSAGE.format(
                user=filed.filer, request=filed.key, purpose=filed.extra["purpose"]
            ),
        )
    return (
        codes.APPROVAL_SELF,
        services.APPROVAL_SELF_MESSAGE.format(user=filed.filer, request=filed.key),
    )


@pytest.mark.parametrize("name", KINDS)
def test_who_filed_it_cannot_approve_it(name):
    filed = FILE[name]()
    me = enrol(filed.filer)
    role = filed.signers[-1][1]  # one the filer holds (sam, the declarer, sits on the council)

    outcome = _refused(filed, me.user, me.sign(filed.payload(role)))

    assert outcome == _self_expected(name, filed)


def test_the_person_a_grant_gives_roles_cannot_sign_it():
    filed = FILE["role-grant"]()
    frank = enrol("frank")

    outcome = _refused(filed, frank.user, frank.sign(filed.payload("council")))

    assert outcome == (
        codes.APPROVAL_SELF,
        user_roles.ROLE_GRANT_SUBJECT_MESSAGE.format(user="frank"),
    )


@pytest.mark.parametrize("name", KINDS)
def test_someone_without_the_role_cannot_sign(name):
    filed = FILE[name]()
    oscar = enrol("oscar")  # the operator: neither admin nor council
    role = filed.signers[-1][1]

    outcome = _refused(filed, oscar.user, oscar.sign(filed.payload(role)))

    assert outcome == (
        codes.APPROVAL_ROLE,
        services.APPROVAL_ROLE_MESSAGE.format(user="oscar", role=role),
    )


#: the kinds whose requests expire; the others take signatures until decided
NEVER_EXPIRES = {
    "halt-clear": ACCEPTED("a halt holds until a quorum clears it"),
    "legal-release": ACCEPTED("a legal request has a due date, not an expiry"),
    "legal-erasure": ACCEPTED("a legal request has a due date, not an expiry"),
}


@pytest.mark.parametrize("name", KINDS)
def test_a_vote_after_the_expiry_is_refused(name, monkeypatch):
    filed = FILE[name]()
    who, role = filed.signers[-1]
    signer = enrol(who)
    document = signer.sign(filed.payload(role))
    expires_at = getattr(filed.row, "expires_at", None)
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(days=365))

    outcome = _refused(filed, signer.user, document)

    expected = NEVER_EXPIRES.get(name) or (
        codes.APPROVAL_EXPIRED,
        services.APPROVAL_EXPIRED_MESSAGE.format(
            request=filed.key, expires_at=signing.format_time(expires_at)
        ),
    )
    _check(outcome, expected)


def _twice_expected(name: str, filed: Filed, who: str, code: str, message: str) -> Any:
    """Every kind checks the key before the person (``votes._not_twice``); a legal approval
    answers a second signature of the same person with another key with the code the legal
    requests name (its four-eyes check, before any signature is looked at)."""
    if name.startswith("legal-") and code == codes.APPROVAL_DUPLICATE_PERSON:
        return (
            codes.DSR_ALREADY_APPROVED,
            dsr_services.ALREADY_APPROVED_MESSAGE.format(
                user=who, request=filed.key, purpose=filed.extra["purpose"]
            ),
        )
    return code, message


@pytest.mark.parametrize("name", KINDS)
def test_one_person_signs_once_even_with_another_key(name):
    filed = FILE[name]()
    who, role = filed.signers[0]
    first = enrol(who)
    filed.record(first.user, first.sign(filed.payload(role)))
    second = enrol(who)  # another confirmed key of the same person

    outcome = _refused(filed, second.user, second.sign(filed.payload(role, reason="again")))

    assert outcome == _twice_expected(
        name,
        filed,
        who,
        codes.APPROVAL_DUPLICATE_PERSON,
        services.APPROVAL_DUPLICATE_PERSON_MESSAGE.format(user=who, subject=filed.subject),
    )


@pytest.mark.parametrize("name", KINDS)
def test_one_key_signs_once(name):
    filed = FILE[name]()
    who, role = filed.signers[0]
    signer = enrol(who)
    filed.record(signer.user, signer.sign(filed.payload(role)))

    outcome = _refused(filed, signer.user, signer.sign(filed.payload(role, reason="again")))

    assert outcome == _twice_expected(
        name,
        filed,
        who,
        codes.APPROVAL_DUPLICATE_KEY,
        services.APPROVAL_DUPLICATE_KEY_MESSAGE.format(
            key_id=signer.key.key_id, subject=filed.subject
        ),
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_revoked_key_cannot_sign(name):
    filed = FILE[name]()
    who, role = filed.signers[-1]
    signer = enrol(who)
    document = signer.sign(filed.payload(role))
    services.member_key_revoke(key=signer.key, actor=signer.user, reason="laptop stolen")
    revoked = GovernanceEvent.objects.filter(code=codes.code_of(codes.KEY_REVOKED)).get()

    outcome = _refused(filed, signer.user, document)

    assert outcome == (
        codes.APPROVAL_KEY_REVOKED,
        services.APPROVAL_KEY_REVOKED_MESSAGE.format(
            key_id=signer.key.key_id, revoked_at=signing.format_time(revoked.created_at)
        ),
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_payload_edited_after_signing_does_not_verify(name):
    filed = FILE[name]()
    who, role = filed.signers[-1]
    signer = enrol(who)
    document = signer.sign(filed.payload(role))
    document["payload"]["reason"] = "something else"

    outcome = _refused(filed, signer.user, document)

    assert outcome == (
        codes.APPROVAL_BAD_SIGNATURE,
        services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=signer.key.key_id),
    )


#: per kind, a field of what is asked that the signer edits before signing, and its new value
EDITED = {
    "force-continue": ("step", 4),
    "production-replay": ("trace_sha256", "0" * 64),
    "role-grant": ("grant", ["admin", "council"]),
    "halt-clear": ("target_id", "b" * 32),
    "legal-release": ("kind", "access"),
    "legal-erasure": ("kind", "access"),
}


@pytest.mark.parametrize("name", KINDS)
def test_a_signed_payload_that_is_not_what_is_asked_is_refused(name):
    filed = FILE[name]()
    who, role = filed.signers[-1]
    signer = enrol(who)
    payload = filed.payload(role)
    name_, value = EDITED[name]
    asked = payload[name_]
    payload[name_] = value

    outcome = _refused(filed, signer.user, signer.sign(payload))

    assert outcome == (
        codes.APPROVAL_PAYLOAD_MISMATCH,
        services.APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
            field=name_,
            signed=jcs(value).decode(),
            subject=filed.subject,
            expected=jcs(asked).decode(),
        ),
    )


#: the type each kind's signed vote payload carries
VOTE_TYPE = {
    "force-continue": signing.FORCE_CONTINUE_APPROVAL_TYPE,
    "production-replay": signing.PRODUCTION_REPLAY_APPROVAL_TYPE,
    "role-grant": signing.ROLE_GRANT_APPROVAL_TYPE,
    "halt-clear": signing.HALT_CLEAR_APPROVAL_TYPE,
    "legal-release": signing.DSR_APPROVAL_TYPE,
    "legal-erasure": signing.DSR_APPROVAL_TYPE,
}
#: per kind, the kind whose signature is submitted for it
OTHER_KIND = {
    "force-continue": "production-replay",
    "production-replay": "role-grant",
    "role-grant": "halt-clear",
    "halt-clear": "legal-release",
    "legal-release": "legal-erasure",
    "legal-erasure": "legal-release",
}


@pytest.mark.parametrize("name", KINDS)
def test_a_signature_made_for_another_kind_is_refused(name):
    """This request's own payload relabelled as another kind's (the type alone differs); a
    real vote of another kind is replayed in the test after the next."""
    filed = FILE[name]()
    who, role = filed.signers[-1]
    signer = enrol(who)
    other = OTHER_KIND[name]
    if name.startswith("legal-"):
        # the sibling approval of the same legal request: same type and request, other purpose
        sibling = kinds().get(other)
        payload = sibling.payload_for(filed.fresh(), decision="approve", role=role, reason="")
        mine = filed.payload(role, reason="")
        expected = (
            codes.APPROVAL_PAYLOAD_MISMATCH,
            services.APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
                field="plan",
                signed=jcs(payload.get("plan")).decode(),
                subject=filed.subject,
                expected=jcs(mine.get("plan")).decode(),
            ),
        )
    else:
        # this request's payload, relabelled as the other kind's vote
        payload = {**filed.payload(role), "type": VOTE_TYPE[other]}
        expected = (
            codes.APPROVAL_OTHER_REQUEST,
            services.APPROVAL_OTHER_REQUEST_MESSAGE.format(
                signed=f"a {payload['type']} payload", subject=filed.subject
            ),
        )

    outcome = _refused(filed, signer.user, signer.sign(payload))

    assert outcome == expected


@pytest.mark.parametrize("name", KINDS)
def test_a_signature_made_for_another_request_of_the_kind_is_refused(name):
    filed = FILE[name]()
    other = FILE[name](second=True)
    who, role = filed.signers[-1]
    signer = enrol(who)

    outcome = _refused(filed, signer.user, signer.sign(other.payload(role)))

    assert outcome == (
        codes.APPROVAL_OTHER_REQUEST,
        services.APPROVAL_OTHER_REQUEST_MESSAGE.format(signed=other.subject, subject=filed.subject),
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_vote_signed_for_a_request_of_another_kind_is_refused(name):
    """A real vote: signed by one of its signers for a request of ``OTHER_KIND[name]``, then
    replayed by that signer against a request of this kind."""
    filed = FILE[name]()
    other = FILE[OTHER_KIND[name]](second=True)
    who, role = other.signers[-1]
    signer = enrol(who)
    payload = other.payload(role)
    assert payload["type"] == VOTE_TYPE[OTHER_KIND[name]]

    outcome = _refused(filed, signer.user, signer.sign(payload))

    # a legal request's other approval has the same type: the request it names differs
    same_type = VOTE_TYPE[name] == payload["type"]
    signed = other.subject if same_type else f"a {payload['type']} payload"
    assert outcome == (
        codes.APPROVAL_OTHER_REQUEST,
        services.APPROVAL_OTHER_REQUEST_MESSAGE.format(signed=signed, subject=filed.subject),
    )
