"""Governance reads: halts, requests and their tallies, ledger verification and checkpoints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from governance import chain, codes, conf, council, ledger, signing
from governance.models import (
    Approval,
    CouncilRequest,
    ForceContinueRequest,
    GovernanceEvent,
    Halt,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
)
from replay.canonical import jcs

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
CHECKPOINT_OK_MESSAGE = "the ledger ({ledger} events) extends the checkpoint ({size} events)"


# --- halts ------------------------------------------------------------------------------------


def halts_active() -> QuerySet[Halt]:
    return Halt.objects.active().order_by("seq")


def halts_active_map() -> dict[str, str]:
    """Halted trace ids and snapshot ids -> why (what ``replay_run_execute`` takes)."""
    halted: dict[str, str] = {}
    for halt in halts_active():
        halted.setdefault(halt.target_id, f"halt {halt.seq}: {halt.reason}")
    return halted


def halt_approvals(*, halt_seq: int) -> QuerySet[Approval]:
    return Approval.objects.filter(halt_id=halt_seq).select_related("approver", "key")


# --- force-continue ---------------------------------------------------------------------------


def force_continue_requests(*, run_id: Any = None) -> QuerySet[ForceContinueRequest]:
    requests = ForceContinueRequest.objects.select_related(
        "run__trace", "requested_by", "resumed_run"
    )
    if run_id is not None:
        requests = requests.filter(run_id=run_id)
    return requests


def _tally(request: CouncilRequest, admins: int) -> council.Tally:
    votes = [
        council.Vote(person=a.approver_id, key_id=a.key.key_id, role=a.role, decision=a.decision)
        for a in request.approvals.select_related("key")
    ]
    return council.tally(
        votes,
        admins_required=admins,
        council_required=conf.council_quorum(),
        deny_threshold=conf.deny_threshold(),
    )


def force_continue_tally(*, request: ForceContinueRequest) -> council.Tally:
    """One admin and a council quorum."""
    return _tally(request, admins=1)


def request_is_expired(*, request: CouncilRequest) -> bool:
    """A pending request (force-continue or production replay) past its expiry."""
    return request.state == CouncilRequest.State.PENDING and timezone.now() >= request.expires_at


# --- production replay approved by the council ------------------------------------------------


def production_requests(*, trace: Any = None) -> QuerySet[ProductionReplayRequest]:
    found = ProductionReplayRequest.objects.select_related("trace__blob", "requested_by", "run")
    if trace is not None:
        found = found.filter(trace=trace)
    return found


def production_request_for_run(*, run_id: Any) -> ProductionReplayRequest | None:
    """The council approval a production run was started under, if any."""
    return production_requests().filter(run_id=run_id).first()


def production_signers(*, requests: Any) -> QuerySet[Any]:
    """(request id, approver id) of every signature on these production replay requests."""
    return Approval.objects.filter(production__in=requests).values_list(
        "production_id", "approver_id"
    )


def production_tally(*, request: ProductionReplayRequest) -> council.Tally:
    """A council quorum, no admin signature."""
    return _tally(request, admins=0)


# --- role grants approved by the council -----------------------------------------------------


def role_grants(*, user: Any = None) -> QuerySet[RoleGrantRequest]:
    found = RoleGrantRequest.objects.select_related("user", "requested_by")
    if user is not None:
        found = found.filter(user=user)
    return found


def role_grant_tally(*, request: RoleGrantRequest) -> council.Tally:
    """A council quorum, no admin signature."""
    return _tally(request, admins=0)


# --- keys and events --------------------------------------------------------------------------


def member_keys(*, user: Any = None, usable: bool = False) -> QuerySet[MemberKey]:
    keys = MemberKey.objects.select_related("user", "confirmed_by")
    if user is not None:
        keys = keys.filter(user=user)
    if usable:
        keys = keys.filter(confirmed_at__isnull=False, revoked_at__isnull=True)
    return keys


def events(*, code_range: int | None = None) -> QuerySet[GovernanceEvent]:
    """Ledger events, newest first; ``code_range`` 1..6 keeps one range (1 -> 100..199)."""
    found = GovernanceEvent.objects.order_by("-seq")
    if code_range is not None:
        found = found.filter(code__gte=code_range * 100, code__lt=(code_range + 1) * 100)
    return found


# --- verification and checkpoints ---------------------------------------------------------------


def ledger_verify(*, workers: int | None = None) -> chain.ChainResult:
    """Walk the whole ledger with the real verifier; names the first broken seq."""
    return ledger.verify(workers=workers)


def checkpoint_export(*, workers: int | None = None) -> dict[str, Any]:
    """A signed head of a verified ledger: ``{"checkpoint": body, "alg", "signature"}``."""
    result = ledger.verify(workers=workers)
    if not result.ok:
        assert result.broken is not None
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN, CHECKPOINT_BROKEN_MESSAGE.format(seq=result.broken.seq)
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


def checkpoint_check(*, document: Any, workers: int | None = None) -> ledger.CheckpointVerdict:
    """Does the current ledger extend this checkpoint? Checks, in order: the checkpoint's own
    signature, the ledger's length (truncation/rollback), the first and the checkpoint's last
    event hashes (a rewritten or replaced past), then the whole current ledger."""
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
    result = ledger.verify(workers=workers)
    if not result.ok:
        assert result.broken is not None
        return ledger.CheckpointVerdict(
            False,
            codes.CHECKPOINT_LEDGER_BROKEN,
            CHECKPOINT_BROKEN_LEDGER_MESSAGE.format(
                seq=result.broken.seq, reason=result.broken.reason
            ),
            size,
            ledger_size,
        )
    return ledger.CheckpointVerdict(
        True,
        None,
        CHECKPOINT_OK_MESSAGE.format(ledger=result.size, size=size),
        size,
        result.size,
    )
