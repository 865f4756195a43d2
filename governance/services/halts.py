"""Halts: set by an integrity failure or a security incident an admin declares, cleared only by
a council quorum's signed votes (FORCE_HALT_REPLAY, SECURITY_INCIDENT, FORCE_HALT_CLEAR)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ledger import codes, signing
from governance import council, ledger, selectors
from governance.membership import user_has_role
from governance.models import (
    HALT_BLOB,
    HALT_SNAPSHOT,
    HALT_TARGET_KINDS,
    HALT_TRACE,
    KIND_HALT_CLEAR,
    GovernanceEvent,
    GovernedRequest,
    Halt,
    Vote,
)
from governance.services.votes import (
    _not_signed_by,
    _require_role,
    _signed_vote,
    _vote_matches,
    kind_named,
    vote_append,
)
from replay.models import Trace

# --- messages (asserted verbatim in tests) ----------------------------------------------------
HALT_NOT_ACTIVE_MESSAGE = "halt {halt} is not active"
#: four eyes (APPROVAL_SELF, worded as votes.APPROVAL_SELF_MESSAGE is): whoever's ledger event
#: set a halt (the admin who declared the incident) does not sign its clear
HALT_CLEAR_SELF_MESSAGE = "{user} declared halt {halt} and cannot approve clearing it"
INCIDENT_ROLE_MESSAGE = "{user} is not an admin: only an admin may declare a security incident"
INCIDENT_REASON_MESSAGE = "a security incident needs a reason"
INCIDENT_TARGET_MESSAGE = (
    "a security incident names one target: a trace (its trace id, or the sha256 of a stored "
    "file) or a snapshot id"
)
INCIDENT_TARGET_UNKNOWN_MESSAGE = "no stored {what}"


def _halt_set(
    *,
    target_kind: str,
    target_id: str,
    reason: str,
    cause: GovernanceEvent,
    actor: Any = None,
    trace_id: str | None = None,
) -> GovernanceEvent:
    if target_kind not in HALT_TARGET_KINDS:
        raise ValueError(f"a halt names a {', '.join(HALT_TARGET_KINDS)}, not {target_kind!r}")
    existing = Halt.objects.active().filter(
        payload__target_kind=target_kind, payload__target_id=target_id
    )
    found = existing.first()
    if found is not None:
        return found
    payload: dict[str, Any] = {"target_kind": target_kind, "target_id": target_id}
    if trace_id is not None:  # a file: the trace id it carries, for the reader
        payload["trace_id"] = trace_id
    payload |= {"reason": reason, "cause_seq": cause.seq, "cause_type": cause.type}
    return ledger.append(
        event_type=codes.FORCE_HALT_REPLAY,
        payload=payload,
        actor=actor,
        idempotency_key=f"halt:{target_kind}:{target_id}:{cause.seq}",
    )


def _incident_append(
    *, actor: Any, targets: Sequence[tuple[str, str]], reason: str, trace_id: str | None = None
) -> tuple[GovernanceEvent, list[GovernanceEvent]]:
    incident = ledger.append(
        event_type=codes.SECURITY_INCIDENT,
        payload={"targets": [list(t) for t in targets], "reason": reason},
        actor=actor,
    )
    why = f"SECURITY_INCIDENT {incident.seq} declared by {incident.actor_label}: {reason}"
    halts = [
        _halt_set(
            target_kind=kind,
            target_id=target_id,
            reason=why,
            cause=incident,
            actor=actor,
            trace_id=trace_id if kind == HALT_BLOB else None,
        )
        for kind, target_id in targets
    ]
    return incident, halts


@transaction.atomic(durable=True)
def security_incident_record(
    *, actor: Any, targets: Sequence[tuple[str, str]], reason: str
) -> GovernanceEvent:
    """Record a security incident on targets already resolved to (kind, id) pairs (kinds as in
    ``HALT_TARGET_KINDS``) and halt each; :func:`security_incident_declare` is what people
    call."""
    incident, _halts = _incident_append(actor=actor, targets=targets, reason=reason)
    return incident


def _incident_target(trace: str | None, snapshot: str | None) -> tuple[str, str, str | None]:
    """(kind, id, trace id of a file) of what an incident names; refused if not stored."""
    from replay.selectors import snapshot_referenced

    if (trace is None) == (snapshot is None):
        raise codes.GovernanceError(codes.REQUEST_INVALID, INCIDENT_TARGET_MESSAGE)
    if snapshot is not None:
        snapshot_id = snapshot.strip()
        if not snapshot_referenced(snapshot_id):
            raise codes.GovernanceError(
                codes.INCIDENT_TARGET_UNKNOWN,
                INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"snapshot {snapshot_id}"),
            )
        return HALT_SNAPSHOT, snapshot_id, None
    assert trace is not None
    ref = trace.strip().lower()
    if len(ref) == 64:
        found = Trace.objects.filter(blob__sha256=ref).values_list("trace_id", flat=True).first()
        if found is None:
            raise codes.GovernanceError(
                codes.INCIDENT_TARGET_UNKNOWN,
                INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"file {ref}"),
            )
        return HALT_BLOB, ref, found
    if not Trace.objects.filter(trace_id=ref).exists():
        raise codes.GovernanceError(
            codes.INCIDENT_TARGET_UNKNOWN,
            INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"trace {ref}"),
        )
    return HALT_TRACE, ref, None


@transaction.atomic(durable=True)
def security_incident_declare(
    *, actor: Any, reason: str, trace: str | None = None, snapshot: str | None = None
) -> tuple[GovernanceEvent, GovernanceEvent]:
    """An admin declares a security incident (seed 003 §10) against one target: ``trace`` (a
    trace id halts every stored copy; a stored file's sha256 halts that file) or ``snapshot``
    (a snapshot id halts every trace using it). Appends the signed SECURITY_INCIDENT and its
    FORCE_HALT_REPLAY, which only a council quorum clears; returns both events (an already
    active halt on the same target is returned instead of a second one)."""
    ledger.lock()
    if not user_has_role(actor, signing.ROLE_ADMIN):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE, INCIDENT_ROLE_MESSAGE.format(user=actor.get_username())
        )
    kind, target_id, trace_id = _incident_target(trace, snapshot)
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, INCIDENT_REASON_MESSAGE)
    incident, (halt,) = _incident_append(
        actor=actor, targets=[(kind, target_id)], reason=reason.strip(), trace_id=trace_id
    )
    return incident, halt


def halt_clear_payload_for(*, halt: GovernanceEvent, reason: str = "") -> dict[str, Any]:
    """The exact payload a council member signs to clear ``halt``."""
    return signing.halt_clear_payload(
        halt_seq=halt.seq,
        halt_hash=halt.hash,
        target_kind=str(halt.payload.get("target_kind")),
        target_id=str(halt.payload.get("target_id")),
        reason=reason,
    )


def _not_declarer(halt: GovernanceEvent, approver: Any) -> None:
    """Four eyes: the person whose ledger event set ``halt`` (its actor: the admin who declared
    the incident) may not sign its clear. A halt a failed replay set has no actor, so no
    declarer (who asked for that replay is the INTEGRITY_FAILURE's actor, not the halt's)."""
    if halt.actor_id is not None and halt.actor_id == approver.pk:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF,
            HALT_CLEAR_SELF_MESSAGE.format(user=approver.get_username(), halt=halt.seq),
        )


def halt_clear_refusal(
    *, halt: GovernanceEvent, approver: Any, ballots: Sequence[selectors.Ballot]
) -> codes.GovernanceError | None:
    """Why ``approver`` may not sign toward clearing the active ``halt``, or None: the checks
    :func:`halt_clear_approval_record` makes of the signer (not its declarer, the council role
    per the ledger now, one signature per person among the ledger's ``ballots``)."""
    subject = f"halt {halt.seq}"
    try:
        _not_declarer(halt, approver)
        _require_role(approver, signing.ROLE_COUNCIL, filed_seq=None, subject=subject)
        _not_signed_by(ballots=ballots, approver=approver, subject=subject)
    except codes.GovernanceError as refused:
        return refused
    return None


@transaction.atomic(durable=True)
def halt_clear_approval_record(
    *, halt_seq: int, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """Record one council signature toward clearing a halt; on quorum, FORCE_HALT_CLEAR. As
    a council request's vote: the halt takes votes (it is active), not from its declarer,
    before any signature is looked at."""
    ledger.lock()
    halt = Halt.objects.active().filter(seq=halt_seq).first()
    if halt is None:
        raise codes.GovernanceError(
            codes.HALT_NOT_ACTIVE, HALT_NOT_ACTIVE_MESSAGE.format(halt=halt_seq)
        )
    _not_declarer(halt, approver)
    subject = f"halt {halt.seq}"
    payload, key, signature = _signed_vote(
        document,
        approver=approver,
        now=timezone.now(),
        type_=signing.HALT_CLEAR_APPROVAL_TYPE,
        field="halt_seq",
        value=halt.seq,
        label="halt",
        subject=subject,
    )
    reason = _vote_matches(
        payload,
        kind=kind_named(KIND_HALT_CLEAR),
        request=halt,
        decision=signing.APPROVE,
        chosen=("reason",),
        approver=approver,
        role=signing.ROLE_COUNCIL,
        filed_seq=None,
        subject=subject,
    )
    approval = vote_append(
        event_type=codes.HALT_CLEAR_APPROVAL,
        ballots=selectors.halt_ballots(halt_seq=halt.seq),
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=signing.ROLE_COUNCIL,
        decision=signing.APPROVE,
        reason=reason,
        label=subject,
        request=(request := _halt_request(halt)),
    )
    ballots = selectors.halt_ballots(halt_seq=halt.seq)
    result = selectors.halt_tally(ballots=ballots)
    if result.state == council.APPROVED:
        request.decision_event = ledger.append(
            event_type=codes.FORCE_HALT_CLEAR,
            payload={
                "halt_seq": halt.seq,
                "target_kind": halt.payload.get("target_kind"),
                "target_id": halt.payload.get("target_id"),
                "approval_seqs": [b.seq for b in ballots],
            },
            idempotency_key=f"halt-clear:{halt.seq}",
        )
        request.state = GovernedRequest.State.APPROVED
        request.decided_at = request.decision_event.created_at
        request.save(update_fields=["state", "decision_event", "decided_at"])
    return approval


def _halt_request(halt: GovernanceEvent) -> GovernedRequest:
    """The governed request (kind ``halt-clear``) the votes toward clearing ``halt`` are on:
    made with the first vote; the halt event filed it, nobody asked."""
    found, _made = GovernedRequest.objects.get_or_create(
        kind=KIND_HALT_CLEAR,
        request_event=halt,
        defaults={
            "subject": str(halt.seq),
            "payload": halt.payload,
            "reason": str(halt.payload.get("reason", "")),
            "created_at": halt.created_at,
        },
    )
    return found
