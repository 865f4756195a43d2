"""Governance reads: halts, requests and their tallies, ledger verification and checkpoints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from core import errors
from core.canonical import jcs
from core.ledger import codes, reconcile, signing
from governance import conf, council, ledger
from governance.models import (
    HALT_BLOB,
    HALT_SNAPSHOT,
    ApiToken,
    CouncilRequest,
    ForceContinueRequest,
    GovernanceEvent,
    Halt,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
)
from replay.models import Trace
from replay.prepared import Prepared

CHECKPOINT_EMPTY_MESSAGE = "the ledger is empty: there is nothing to checkpoint"
CHECKPOINT_BROKEN_MESSAGE = "the ledger does not verify (broken at seq {seq}): no checkpoint"
CHECKPOINT_MALFORMED_MESSAGE = "not a governance checkpoint: {problem}"
CHECKPOINT_KEY_MESSAGE = "the checkpoint is signed by unknown key {key_id}"
CHECKPOINT_WINDOW_MESSAGE = "the checkpoint's key was not effective when it was made: {problem}"
CHECKPOINT_SIGNATURE_MESSAGE = "the checkpoint's signature does not verify with key {key_id}"
CHECKPOINT_TRUNCATED_MESSAGE = (
    "the ledger has {ledger} events but the checkpoint saw {size}: truncated or rolled back"
)
CHECKPOINT_GENESIS_MESSAGE = "event 1 has hash {observed}, the checkpoint's ledger began {expected}"
CHECKPOINT_FORKED_MESSAGE = (
    "event {size} has hash {observed}, the checkpoint saw {expected}: the past was rewritten"
)
CHECKPOINT_BROKEN_LEDGER_MESSAGE = "the ledger is broken at seq {seq}: {reason}"
CHECKPOINT_TABLES_MESSAGE = "a table disagrees with the ledger: {message}"
CHECKPOINT_TABLES_EXPORT_MESSAGE = "a table disagrees with the ledger ({message}): no checkpoint"
CHECKPOINT_UNVERIFIED_MESSAGE = (
    "none of the ledger's {head} events is verified yet and that is more than a request "
    "checks itself ({bound}): verification {run} is {state}; export again when it has finished"
)
CHECKPOINT_OK_MESSAGE = "the ledger ({ledger} events) extends the checkpoint ({size} events)"


# --- API tokens -------------------------------------------------------------------------------


def api_token_active(*, token: str) -> ApiToken | None:
    """The unrevoked token row of an active user whose SHA-256 matches ``token``, or None."""
    import hashlib

    digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
    return (
        ApiToken.objects.select_related("user")
        .filter(digest=digest, revoked_at__isnull=True, user__is_active=True)
        .first()
    )


def api_tokens_of(*, user: Any) -> QuerySet[ApiToken]:
    """A person's own tokens, newest first, revoked ones included."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def api_token_of(*, user: Any, token_id: Any) -> ApiToken | None:
    """One of the person's own tokens; someone else's is None, like a missing one."""
    try:
        pk = int(token_id)
    except (TypeError, ValueError):
        return None
    return ApiToken.objects.filter(user=user, pk=pk).first()


# --- halts ------------------------------------------------------------------------------------


def halts_active() -> QuerySet[Halt]:
    return Halt.objects.active().order_by("seq")


#: halts_active(), its SQL compiled once (every trace page asks)
_HALTS_ACTIVE: Prepared[Halt] = Prepared(halts_active)


def halts_active_map() -> dict[str, str]:
    """Halted file sha256s, trace ids and snapshot ids -> the halt that stops them, named by
    seq, target and reason (what ``replay_run_execute`` takes)."""
    halted: dict[str, str] = {}
    for halt in _HALTS_ACTIVE():
        halted.setdefault(halt.target_id, f"{halt.label}: {halt.reason}")
    return halted


def halts_on_trace(*, trace: Any, halted: Mapping[str, str] | None = None) -> dict[str, str]:
    """The active halts that stop a replay of this stored file: on the file itself, on its
    trace id, or on a snapshot it needs (target -> the halt, as in ``halts_active_map``;
    ``halted``: that map, when the caller has it already)."""
    concerned = [trace.blob.sha256, trace.trace_id] + [
        str(ref.get("snapshot_id")) for ref in trace.required_snapshot_ids or []
    ]
    halted = halts_active_map() if halted is None else halted
    return {target: halted[target] for target in concerned if target in halted}


def integrity_snapshot(report: Mapping[str, Any]) -> str | None:
    """The snapshot id an integrity failure is about, when the snapshots check failed (as
    the report's format reads it: ``TraceFormat.failed_snapshot``)."""
    from core.formats import failed_snapshot

    return failed_snapshot(report)


def integrity_halt_target(*, trace: Trace, report: Mapping[str, Any]) -> tuple[str, str]:
    """What an integrity failure in a replay of ``trace`` halts, as (kind, id): the snapshot,
    when its retained body no longer hashes to its own id (every trace using it is then
    unsafe); otherwise the uploaded file itself, whatever ids it claims (its events, seal,
    outputs, or a snapshot body it carries)."""
    from replay.selectors import snapshot_tampered

    snapshot_id = integrity_snapshot(report)
    if snapshot_id is not None and snapshot_tampered(snapshot_id):
        return HALT_SNAPSHOT, snapshot_id
    return HALT_BLOB, trace.blob.sha256


@dataclass(frozen=True)
class HaltPreview:
    """What a governed replay of a trace whose integrity check failed would halt."""

    target_kind: str  # HALT_BLOB (this file only) or HALT_SNAPSHOT
    target_id: str
    message: str
    traces: list[Trace]  # every stored trace the halt would stop


def replay_halt_preview(*, trace: Trace, report: Mapping[str, Any]) -> HaltPreview | None:
    """What replaying ``trace`` would halt, given a report of it whose integrity check failed
    (as ``replay_outcome_record`` decides, through :func:`integrity_halt_target`); None when
    ``report`` is no integrity failure or a halt already stops the replay (it would then be
    refused FORCE_HALT_ACTIVE and halt nothing more)."""
    if report.get("error_code") not in errors.INTEGRITY_CODES or halts_on_trace(trace=trace):
        return None
    kind, target = integrity_halt_target(trace=trace, report=report)
    if kind == HALT_SNAPSHOT:
        stored = Trace.objects.select_related("blob").order_by("created_at")
        traces = [
            t
            for t in stored.iterator()
            if any(r.get("snapshot_id") == target for r in t.required_snapshot_ids or [])
        ]
    else:
        traces = [trace]
    return HaltPreview(
        target_kind=kind,
        target_id=target,
        message=str(report.get("message", "")),
        traces=traces,
    )


# --- force-continue ---------------------------------------------------------------------------


def force_continue_requests(*, run_id: Any = None) -> QuerySet[ForceContinueRequest]:
    requests = ForceContinueRequest.objects.select_related(
        "run__trace", "requested_by", "resumed_run"
    )
    if run_id is not None:
        requests = requests.filter(run_id=run_id)
    return requests


def force_continue_standing(*, run_id: Any) -> ForceContinueRequest | None:
    """The request that stands for a run: an approved one, else one still open (pending and
    not expired). While one stands, no other may be filed for that run."""
    requests = ForceContinueRequest.objects.filter(run_id=run_id).select_related(
        "requested_by", "resumed_run"
    )
    approved = requests.filter(state=ForceContinueRequest.State.APPROVED).first()
    if approved is not None:
        return approved
    return requests.filter(
        state=ForceContinueRequest.State.PENDING, expires_at__gt=timezone.now()
    ).first()


@dataclass(frozen=True, slots=True)
class Ballot:
    """One signed vote as the ledger has it: what the pages list and the tallies count.

    Read from the vote events themselves (signer, key, signed decision and role), never from
    the Vote rows, which only mirror them (``governance verify`` checks that they do).
    """

    seq: int
    approver: Any
    approver_id: int
    key_id: str
    role: str
    decision: str
    reason: str
    created_at: datetime

    @property
    def vote(self) -> council.Vote:
        return council.Vote(
            person=self.approver_id, key_id=self.key_id, role=self.role, decision=self.decision
        )


def _ballots(*, event_type: str, field: str, value: Any, after_seq: int) -> list[Ballot]:
    # a vote is appended after the event it votes on, so the scan starts there
    events = (
        GovernanceEvent.objects.filter(
            code=codes.code_of(event_type),
            seq__gt=after_seq,
            actor_key_id__isnull=False,
            **{f"payload__{field}": value},
        )
        .select_related("actor")
        .order_by("seq")
    )
    return [_ballot_of(event) for event in events]


def _ballot_of(event: GovernanceEvent) -> Ballot:
    decision, role = reconcile.vote_of(
        reconcile.VoteEvent(
            event.seq,
            event.code,
            event.type,
            event.actor_id,
            event.actor_key_id,
            event.actor_signature,
            event.payload,
        )
    )
    reason = event.payload.get("reason") if isinstance(event.payload, dict) else ""
    return Ballot(
        seq=event.seq,
        approver=event.actor,
        approver_id=event.actor_id or 0,
        key_id=str(event.actor_key_id),
        role=role,
        decision=decision,
        reason=reason if isinstance(reason, str) else "",
        created_at=event.created_at,
    )


def ballots_by_subject(
    *, event_type: str, field: str, after: Mapping[Any, int]
) -> dict[Any, list[Ballot]]:
    """The signed votes on many subjects at once (one query), oldest first: ``after`` maps
    each subject's ``field`` value to the seq its votes come after (its filing, or the halt),
    as :func:`_ballots` reads them one subject at a time."""
    found: dict[Any, list[Ballot]] = {value: [] for value in after}
    if not after:
        return found
    events = (
        GovernanceEvent.objects.filter(
            code=codes.code_of(event_type),
            seq__gt=min(after.values()),
            actor_key_id__isnull=False,
            **{f"payload__{field}__in": list(after)},
        )
        .select_related("actor")
        .order_by("seq")
    )
    for event in events:
        value = event.payload.get(field) if isinstance(event.payload, dict) else None
        if value in found and event.seq > after[value]:
            found[value].append(_ballot_of(event))
    return found


def _filing_type(request: CouncilRequest) -> str:
    if isinstance(request, ProductionReplayRequest):
        return codes.PRODUCTION_REPLAY_REQUEST
    if isinstance(request, RoleGrantRequest):
        return codes.ROLE_GRANT_REQUEST
    return codes.FORCE_CONTINUE_REQUEST


def request_filing(*, request: CouncilRequest) -> GovernanceEvent | None:
    """The ledger event that filed ``request``: the one its row names if that event really
    filed it (the usual case, one primary-key read), else found by its payload."""
    code = codes.code_of(_filing_type(request))
    named = GovernanceEvent.objects.filter(seq=request.request_event_id).first()
    if _filed(named, request):
        return named
    return (
        GovernanceEvent.objects.filter(code=code, payload__request_id=str(request.id))
        .order_by("seq")
        .first()
    )


def request_filings(*, requests: list[CouncilRequest]) -> dict[Any, GovernanceEvent | None]:
    """:func:`request_filing` of many requests of one kind: the events their rows name in one
    query; a request whose named event did not file it is looked up on its own."""
    named = GovernanceEvent.objects.in_bulk([r.request_event_id for r in requests])
    found: dict[Any, GovernanceEvent | None] = {}
    for request in requests:
        event = named.get(request.request_event_id)
        found[request.id] = event if _filed(event, request) else request_filing(request=request)
    return found


def _filed(event: GovernanceEvent | None, request: CouncilRequest) -> bool:
    """``event`` is the one that filed ``request``."""
    return (
        event is not None
        and event.code == codes.code_of(_filing_type(request))
        and isinstance(event.payload, dict)
        and event.payload.get("request_id") == str(request.id)
    )


_UNREAD: Any = object()


def request_expiry(
    *, request: CouncilRequest, filing: GovernanceEvent | None = _UNREAD
) -> datetime:
    """When a request stops taking votes: the expiry its filing event signed, or the row's
    if that is earlier (a row can only shorten it). ``filing``: its
    :func:`request_filing`, when the caller has read it already."""
    if filing is _UNREAD:
        filing = request_filing(request=request)
    signed = filing.payload.get("expires_at") if filing is not None else None
    try:
        ledger_expiry = signing.parse_time(signed) if isinstance(signed, str) else None
    except ValueError:
        ledger_expiry = None
    if ledger_expiry is None:
        return request.expiry()
    return min(ledger_expiry, request.expiry())


def _request_ballots(request: CouncilRequest, event_type: str) -> list[Ballot]:
    filing = request_filing(request=request)
    # a vote is appended after the filing; without one in the ledger, look at every vote
    return _ballots(
        event_type=event_type,
        field="request_id",
        value=str(request.id),
        after_seq=filing.seq if filing is not None else 0,
    )


def force_continue_ballots(*, request: ForceContinueRequest) -> list[Ballot]:
    """The signed votes on a force-continue request, oldest first, from the ledger."""
    return _request_ballots(request, codes.FORCE_CONTINUE_APPROVAL)


def production_ballots(*, request: ProductionReplayRequest) -> list[Ballot]:
    """The signed votes on a production replay request, oldest first, from the ledger."""
    return _request_ballots(request, codes.PRODUCTION_REPLAY_APPROVAL)


def halt_ballots(*, halt_seq: int) -> list[Ballot]:
    """The council signatures toward clearing a halt, oldest first, from the ledger."""
    return _ballots(
        event_type=codes.HALT_CLEAR_APPROVAL, field="halt_seq", value=halt_seq, after_seq=halt_seq
    )


def halt_tally(*, ballots: list[Ballot]) -> council.Tally:
    """A council quorum clears a halt (no admin, no denials), counted from its ballots."""
    return council.tally(
        [b.vote for b in ballots],
        admins_required=0,
        council_required=conf.council_quorum(),
        deny_threshold=HALT_NO_DENIAL,
    )


#: a halt clear takes no denials: the deny threshold is out of reach
HALT_NO_DENIAL = 1_000_000


def halt_signature_counts(*, halt_seqs: list[int]) -> dict[int, int]:
    """How many council signatures toward clearing each of these halts the ledger holds."""
    wanted = set(halt_seqs)
    counts: dict[int, int] = {}
    if not wanted:
        return counts
    for halt_seq in GovernanceEvent.objects.filter(
        code=codes.code_of(codes.HALT_CLEAR_APPROVAL),
        seq__gt=min(wanted),
        actor_key_id__isnull=False,
    ).values_list("payload__halt_seq", flat=True):
        if halt_seq in wanted:
            counts[halt_seq] = counts.get(halt_seq, 0) + 1
    return counts


def _tally(ballots: list[Ballot], admins: int) -> council.Tally:
    return council.tally(
        [b.vote for b in ballots],
        admins_required=admins,
        council_required=conf.council_quorum(),
        deny_threshold=conf.deny_threshold(),
    )


def force_continue_tally(
    *, request: ForceContinueRequest, ballots: list[Ballot] | None = None
) -> council.Tally:
    """One admin and a council quorum, counted from the ledger's signed votes (``ballots``
    when the caller has already read them)."""
    if ballots is None:
        ballots = force_continue_ballots(request=request)
    return _tally(ballots, admins=1)


def request_is_expired(*, request: CouncilRequest) -> bool:
    """A pending request (force-continue or production replay) past its expiry."""
    return request.state == CouncilRequest.State.PENDING and timezone.now() >= request_expiry(
        request=request
    )


# --- production replay approved by the council ------------------------------------------------


def production_requests() -> QuerySet[ProductionReplayRequest]:
    return ProductionReplayRequest.objects.select_related("trace__blob", "requested_by", "run")


#: a trace's page lists its newest requests, reading only what the list shows (the trace is
#: known, the run is named by its id)
_PRODUCTION_REQUESTS_SHOWN: Prepared[ProductionReplayRequest] = Prepared(
    lambda pk: (
        ProductionReplayRequest.objects.filter(trace_id=pk)
        .select_related("requested_by")
        .only("id", "created_at", "state", "run_id", "requested_by__username")[:20]
    ),
    pk=int,
)


def production_requests_shown(trace: Trace) -> list[ProductionReplayRequest]:
    """The 20 newest production-replay requests of ``trace``, as its page lists them."""
    return _PRODUCTION_REQUESTS_SHOWN(pk=trace.pk)


def production_request_for_run(*, run_id: Any) -> ProductionReplayRequest | None:
    """The council approval a production run was started under, if any."""
    return production_requests().filter(run_id=run_id).first()


def production_signers(*, requests: Any) -> set[tuple[Any, int]]:
    """(request id, approver id) of every signature on these production replay requests, as
    the ledger's signed votes say."""
    return {
        (request.id, ballot.approver_id)
        for request in requests
        for ballot in production_ballots(request=request)
    }


def production_tally(
    *, request: ProductionReplayRequest, ballots: list[Ballot] | None = None
) -> council.Tally:
    """A council quorum, no admin signature, counted from the ledger's signed votes
    (``ballots`` when the caller has already read them)."""
    return _tally(production_ballots(request=request) if ballots is None else ballots, admins=0)


# --- role grants approved by the council -----------------------------------------------------


def role_grants(*, user: Any = None) -> QuerySet[RoleGrantRequest]:
    found = RoleGrantRequest.objects.select_related("user", "requested_by")
    if user is not None:
        found = found.filter(user=user)
    return found


def role_grant_ballots(*, request: RoleGrantRequest) -> list[Ballot]:
    """The council's signed votes on a grant of admin or council, oldest first, from the
    ledger."""
    return _request_ballots(request, codes.ROLE_GRANT_APPROVAL)


def role_grant_tally(
    *, request: RoleGrantRequest, ballots: list[Ballot] | None = None
) -> council.Tally:
    """A council quorum, no admin signature, counted from the ledger's signed votes."""
    return _tally(role_grant_ballots(request=request) if ballots is None else ballots, admins=0)


# --- keys and events --------------------------------------------------------------------------


def member_keys(*, user: Any = None, usable: bool = False) -> QuerySet[MemberKey]:
    keys = MemberKey.objects.select_related("user", "confirmed_by")
    if user is not None:
        keys = keys.filter(user=user)
    if usable:  # what the ledger says, not the row's columns
        states = ledger.member_key_states()
        keys = keys.filter(
            key_id__in=[
                key_id
                for key_id, state in states.items()
                if state.confirmed_seq is not None and state.revoked_seq is None
            ]
        )
    return keys


@dataclass(frozen=True, slots=True)
class KeyView:
    """A member key as pages and the API show it: who and what from its row, its state
    (confirmed, revoked, by whom and when) from the ledger's key events."""

    key_id: str
    user: Any
    user_id: int
    label: str
    public_key: str
    fingerprint: str
    registered_at: datetime
    confirmed_at: datetime | None
    confirmed_by: Any
    revoked_at: datetime | None
    revoked_by: Any


def member_key_list(*, user: Any = None) -> list[KeyView]:
    """Member keys with the state the ledger gives them (a key it never added is unconfirmed)."""
    from django.contrib.auth import get_user_model

    states = ledger.member_key_states()
    people_ids = {
        person
        for state in states.values()
        for person in (state.confirmed_by, state.revoked_by)
        if person is not None
    }
    people = get_user_model().objects.in_bulk(list(people_ids))
    found = []
    for key in member_keys(user=user):
        state = states.get(key.key_id)
        confirmed = state is not None and state.confirmed_seq is not None
        revoked = state is not None and state.revoked_seq is not None
        found.append(
            KeyView(
                key_id=key.key_id,
                user=key.user,
                user_id=key.user_id,
                label=key.label,
                public_key=key.public_key,
                fingerprint=key.fingerprint,
                registered_at=key.registered_at,
                confirmed_at=state.confirmed_at if confirmed and state else None,
                confirmed_by=people.get(state.confirmed_by) if confirmed and state else None,
                revoked_at=state.revoked_at if revoked and state else None,
                revoked_by=people.get(state.revoked_by) if revoked and state else None,
            )
        )
    return found


def events(*, code_range: int | None = None) -> QuerySet[GovernanceEvent]:
    """Ledger events, newest first; ``code_range`` 1..6 keeps one range (1 -> 100..199)."""
    found = GovernanceEvent.objects.order_by("-seq")
    if code_range is not None:
        found = found.filter(code__gte=code_range * 100, code__lt=(code_range + 1) * 100)
    return found


# --- verification and checkpoints ---------------------------------------------------------------


def ledger_verify(*, workers: int | None = None) -> reconcile.Verdict:
    """Walk the whole ledger with the real verifier (names the first broken seq), then check
    every table the decisions depend on against it (names each row that disagrees)."""
    return ledger.verify_all(workers=workers)


def tlog_checkpoint(size: int, *, catch_up: bool = True) -> dict[str, Any] | None:
    """The transparency-log side of an exported checkpoint: the C2SP signed note of the
    Merkle tree at the same size (what ``python -m tlog`` and ``python -m dsr.bundle_cli
    --older-checkpoint`` read; witness cosignatures are extra signature lines of this note)
    and the verifier keys to check it with.

    The tree grows with the chain; only events written around the service (a bulk load) leave
    it behind. ``catch_up`` (the command) then builds it up to ``size``; a request does not
    (that is O(n)) and exports no note (None) until the tree has caught up."""
    from governance import transparency, witnessing

    if transparency.tree_size() < size:
        if not catch_up:
            return None
        transparency.sync(upto_seq=size)
    note = witnessing.cosigned_note(transparency.checkpoint(size))
    return {"checkpoint": note, "vkeys": transparency.verifier_keys()}


def checkpoint_export(*, workers: int | None = None) -> dict[str, Any]:
    """A signed head of a verified ledger: ``{"checkpoint": body, "alg", "signature"}``."""
    result = ledger.verify_all(workers=workers)
    if result.broken is not None:
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN, CHECKPOINT_BROKEN_MESSAGE.format(seq=result.broken.seq)
        )
    if result.mismatches:
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN,
            CHECKPOINT_TABLES_EXPORT_MESSAGE.format(message=result.mismatches[0].message),
        )
    key = ledger.server_key_current()
    if result.size == 0 or key is None:
        raise codes.GovernanceError(codes.LEDGER_EMPTY, CHECKPOINT_EMPTY_MESSAGE)
    body = signing.checkpoint_body(
        size=result.size,
        head_hash=result.head_hash,
        genesis_hash=result.genesis_hash,
        created_at=signing.format_time(timezone.now()),
        key_id=key.key_id,
    )
    return {
        "checkpoint": body,
        "alg": signing.ALG,
        "signature": signing.sign(ledger.private_key_of(key), jcs(body)),
        "tlog": tlog_checkpoint(body["size"]),
    }


def checkpoint_export_verified(*, actor: Any) -> dict[str, Any]:
    """A signed checkpoint over the newest verified seq, without walking the chain.

    The seq is the newest believable verification mark's, or the head when at most
    ``GOVERNANCE_VERIFY_INLINE_MAX`` events follow the mark (checked here); beyond that bound
    the checkpoint covers the marked, verified prefix and the background verification of the
    rest is queued (``verification.ledger_verification_read``). ``checkpoint_export`` is the
    command's full, synchronous counterpart.
    """
    from governance.verification import ledger_verification_read

    reading = ledger_verification_read(actor=actor)
    if reading.chain.broken is not None:
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN, CHECKPOINT_BROKEN_MESSAGE.format(seq=reading.chain.broken.seq)
        )
    if reading.mismatches:
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN,
            CHECKPOINT_TABLES_EXPORT_MESSAGE.format(message=reading.mismatches[0].message),
        )
    key = ledger.server_key_current()
    if reading.head_seq == 0 or key is None:
        raise codes.GovernanceError(codes.LEDGER_EMPTY, CHECKPOINT_EMPTY_MESSAGE)
    if reading.chain.size == 0:
        run = reading.run
        raise codes.GovernanceError(
            codes.LEDGER_UNVERIFIED,
            CHECKPOINT_UNVERIFIED_MESSAGE.format(
                head=reading.head_seq,
                bound=conf.verify_inline_max(),
                run=run.id if run else "-",
                state=run.state if run else "-",
            ),
        )
    body = signing.checkpoint_body(
        size=reading.chain.size,
        head_hash=reading.chain.head_hash,
        genesis_hash=reading.chain.genesis_hash,
        created_at=signing.format_time(timezone.now()),
        key_id=key.key_id,
    )
    return {
        "checkpoint": body,
        "alg": signing.ALG,
        "signature": signing.sign(ledger.private_key_of(key), jcs(body)),
        "tlog": tlog_checkpoint(body["size"], catch_up=False),
    }


def _checkpoint_body(document: Any) -> dict[str, Any] | str:
    if not isinstance(document, Mapping):
        return "not a JSON object"
    body = document.get("checkpoint")
    if not isinstance(body, dict) or body.get("type") != signing.CHECKPOINT_TYPE:
        return f"its checkpoint.type is not {signing.CHECKPOINT_TYPE}"
    size = body.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        return "size is not a positive integer"
    for name in ("head_hash", "genesis_hash", "created_at", "key_id"):
        if not isinstance(body.get(name), str):
            return f"{name} is not a string"
    if not isinstance(document.get("signature"), str):
        return "signature is not a string"
    try:
        signing.parse_time(body["created_at"])
    except ValueError:
        return "created_at is not a time"
    return body


def checkpoint_check(
    *, document: Any, workers: int | None = None, actor: Any = None, from_mark: bool = False
) -> ledger.CheckpointVerdict:
    """Does the current ledger extend this checkpoint? Checks, in order: the checkpoint's own
    signature, the ledger's length (truncation/rollback), the first and the checkpoint's last
    event hashes (a rewritten or replaced past), then the whole current ledger.

    ``from_mark`` (a request: the checkpoint page) does not walk the chain for the last
    check: it believes the newest verification mark and checks at most
    ``GOVERNANCE_VERIFY_INLINE_MAX`` events after it (``ledger_verification_read``); more
    than that are said to be not yet verified, and their background verification is queued.
    """
    body = _checkpoint_body(document)
    if isinstance(body, str):
        return ledger.CheckpointVerdict(
            False, codes.CHECKPOINT_MALFORMED, CHECKPOINT_MALFORMED_MESSAGE.format(problem=body)
        )
    size = body["size"]
    keys = ledger.server_keys()
    key = keys.get(body["key_id"])
    if key is None:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_SIGNATURE,
            CHECKPOINT_KEY_MESSAGE.format(key_id=body["key_id"]),
            size,
        )
    problem = key.window_problem(signing.parse_time(body["created_at"]))
    if problem is not None:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_SIGNATURE,
            CHECKPOINT_WINDOW_MESSAGE.format(problem=problem),
            size,
        )
    if not signing.verify(key.public_key, jcs(body), document["signature"]):
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_SIGNATURE,
            CHECKPOINT_SIGNATURE_MESSAGE.format(key_id=key.key_id),
            size,
        )
    last = ledger.head()
    ledger_size = last.seq if last else 0
    at_size = GovernanceEvent.objects.filter(seq=size).values_list("hash", flat=True).first()
    if ledger_size < size or at_size is None:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_TRUNCATED,
            CHECKPOINT_TRUNCATED_MESSAGE.format(ledger=ledger_size, size=size),
            size,
            ledger_size,
        )
    genesis = GovernanceEvent.objects.filter(seq=1).values_list("hash", flat=True).first()
    if genesis != body["genesis_hash"]:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_FORKED,
            CHECKPOINT_GENESIS_MESSAGE.format(observed=genesis, expected=body["genesis_hash"]),
            size,
            ledger_size,
        )
    if at_size != body["head_hash"]:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_FORKED,
            CHECKPOINT_FORKED_MESSAGE.format(
                size=size, observed=at_size, expected=body["head_hash"]
            ),
            size,
            ledger_size,
        )
    if from_mark:
        return _checkpoint_check_from_mark(actor=actor, size=size, ledger_size=ledger_size)
    result = ledger.verify_all(workers=workers)
    refused = _checkpoint_ledger_broken(result.broken, result.mismatches, size, ledger_size)
    if refused is not None:
        return refused
    return ledger.CheckpointVerdict(
        True,
        None,
        CHECKPOINT_OK_MESSAGE.format(ledger=result.size, size=size),
        size,
        result.size,
    )


def _checkpoint_ledger_broken(
    broken: Any, mismatches: Any, size: int, ledger_size: int
) -> ledger.CheckpointVerdict | None:
    """The refusal when the ledger itself does not verify (a broken chain first, then a table
    that disagrees with it), whether a full walk or the signed mark said so; else None."""
    if broken is not None:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_LEDGER_BROKEN,
            CHECKPOINT_BROKEN_LEDGER_MESSAGE.format(seq=broken.seq, reason=broken.reason),
            size,
            ledger_size,
        )
    if mismatches:
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_LEDGER_BROKEN,
            CHECKPOINT_TABLES_MESSAGE.format(message=mismatches[0].message),
            size,
            ledger_size,
        )
    return None


CHECKPOINT_PENDING_MESSAGE = (
    "; the ledger is verified through seq {through}, {pending} newer event(s) not yet "
    "(verification {run} is {state})"
)


def _checkpoint_check_from_mark(
    *, actor: Any, size: int, ledger_size: int
) -> ledger.CheckpointVerdict:
    from governance.verification import ledger_verification_read

    reading = ledger_verification_read(actor=actor)
    refused = _checkpoint_ledger_broken(reading.chain.broken, reading.mismatches, size, ledger_size)
    if refused is not None:
        return refused
    message = CHECKPOINT_OK_MESSAGE.format(ledger=reading.head_seq, size=size)
    if reading.pending:
        message += CHECKPOINT_PENDING_MESSAGE.format(
            through=reading.chain.size,
            pending=reading.pending,
            run=reading.run.id if reading.run else "-",
            state=reading.run.state if reading.run else "-",
        )
    return ledger.CheckpointVerdict(True, None, message, size, reading.head_seq)


def trace_notes(trace: Trace) -> QuerySet[GovernanceEvent]:
    """The TRACE_NOTE events on ``trace``'s stored file, oldest first (the ledger's code index
    narrows the scan to notes; a note names the file by its ``file_sha256``)."""
    return GovernanceEvent.objects.filter(
        code=codes.code_of(codes.TRACE_NOTE), payload__file_sha256=trace.blob.sha256
    ).order_by("seq")
