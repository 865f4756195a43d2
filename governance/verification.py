"""Ledger verification in the background, from a signed "verified through seq N" mark.

A page never verifies the chain inside its request: it reads the newest verification mark
(:class:`~governance.models.VerificationMark`, whose server signature is checked on every
read, so an edited or hand-made row is not believed) and says at once how far the chain is
verified and how many newer events are not. Verifying is a background run
(:class:`~governance.models.LedgerVerification`, a task enqueued on commit) of one of two
scopes:

- ``new``: only the events after the newest mark, checked from the mark's hash onward with
  the key state the earlier key events set (any signed-in person may ask: it costs what the
  new events cost), then the tables the decisions depend on;
- ``full``: the whole chain from seq 1, with progress (``roles.LEDGER_VERIFY_FULL``).

One run at a time: asking while one is queued or running joins it (a database constraint
keeps a second one from being inserted by a racing request). A run queued, or running,
without progress for longer than ``GOVERNANCE_VERIFICATION_STALE_SECONDS`` (its worker died
and its task was lost) is marked ``abandoned``, with why, and a new one may start. A run that
finds the chain whole and the tables in agreement appends a new mark through the newest seq
it checked. ``manage.py governance verify`` stays a full, synchronous verification.

A request that must answer "does the ledger verify?" (the verification API, the checkpoint
export) calls :func:`ledger_verification_read`: it believes the newest mark and checks at
most ``GOVERNANCE_VERIFY_INLINE_MAX`` events after it itself; beyond that bound it says how
many events are not yet verified and queues the background run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.utils import timezone

from core.canonical import jcs
from core.ledger import chain, codes, reconcile, signing
from governance import conf, ledger
from governance.models import GovernanceEvent, LedgerVerification, SigningKey, VerificationMark

#: how many of the newest marks a read looks through for one it can believe
MARKS_LOOKED_AT = 20


@dataclass(frozen=True)
class MarkProblem:
    code: str
    message: str


@dataclass
class VerificationState:
    """What the ledger page shows without verifying anything."""

    head_seq: int
    mark: VerificationMark | None
    problems: list[MarkProblem] = field(default_factory=list)
    run: LedgerVerification | None = None  # the active run, else the newest finished one

    @property
    def through_seq(self) -> int:
        return self.mark.through_seq if self.mark is not None else 0

    @property
    def unverified(self) -> int:
        return max(0, self.head_seq - self.through_seq)


def _mark_body(mark: VerificationMark) -> dict[str, Any]:
    return signing.verification_mark_body(
        through_seq=mark.through_seq,
        head_hash=mark.head_hash,
        genesis_hash=mark.genesis_hash,
        verified_at=signing.format_time(mark.verified_at),
        key_id=mark.key_id,
    )


def mark_problem(mark: VerificationMark) -> MarkProblem | None:
    """Why ``mark`` is not to be believed, or None: its signature, then the ledger's event at
    its seq (a rewritten, truncated or rolled-back ledger no longer has the mark's hash)."""
    key = SigningKey.objects.filter(key_id=mark.key_id).first()
    if key is None or not signing.verify(
        bytes.fromhex(key.public_key), jcs(_mark_body(mark)), mark.signature
    ):
        return MarkProblem(
            codes.MARK_SIGNATURE,
            f"verification mark {mark.id} (through seq {mark.through_seq}) does not verify "
            f"with server key {mark.key_id}; it is ignored",
        )
    stored = (
        GovernanceEvent.objects.filter(seq=mark.through_seq).values_list("hash", flat=True).first()
    )
    if stored is None:
        return MarkProblem(
            codes.MARK_FORKED,
            f"the ledger has no event {mark.through_seq}, which verification mark {mark.id} "
            "vouches for (truncation or rollback)",
        )
    if stored != mark.head_hash:
        return MarkProblem(
            codes.MARK_FORKED,
            f"event {mark.through_seq} has hash {stored}, verification mark {mark.id} says "
            f"{mark.head_hash}",
        )
    return None


def _newest_break() -> LedgerVerification | None:
    """The newest finished run that found the chain broken, among the latest few."""
    for run in LedgerVerification.objects.filter(state="done").order_by("-id")[:MARKS_LOOKED_AT]:
        if run.result.get("broke_at") is not None:
            return run
    return None


def mark_latest() -> tuple[VerificationMark | None, list[MarkProblem]]:
    """The newest mark that can be believed, and what is wrong with any newer ones.

    A mark made before a later run found the chain broken at a seq it covers is not
    believed either: a break, once found, is not hidden by checking only newer events.
    """
    problems: list[MarkProblem] = []
    broken = _newest_break()
    for mark in VerificationMark.objects.order_by("-id")[:MARKS_LOOKED_AT]:
        problem = mark_problem(mark)
        if (
            problem is None
            and broken is not None
            and broken.finished_at is not None
            and broken.finished_at >= mark.verified_at
            and broken.result["broke_at"] <= mark.through_seq
        ):
            problem = MarkProblem(
                codes.MARK_SUPERSEDED,
                f"verification {broken.id} found the chain broken at seq "
                f"{broken.result['broke_at']}, which verification mark {mark.id} (through seq "
                f"{mark.through_seq}) covers; the mark is not believed",
            )
        if problem is None:
            return mark, problems
        problems.append(problem)
    return None, problems


def ledger_verification_state() -> VerificationState:
    """The newest believable mark, the head, and the active (else the newest) run; an active
    run past the stale limit is marked abandoned first (so the page shows it as such)."""
    head = ledger.head_row()
    mark, problems = mark_latest()
    run = LedgerVerification.objects.select_related("requested_by").order_by("-id").first()
    if run is not None and run.active and _abandon_if_stale(run):
        run = LedgerVerification.objects.select_related("requested_by").get(pk=run.pk)
    return VerificationState(head.seq if head else 0, mark, problems, run)


def ledger_verification_active() -> LedgerVerification | None:
    return LedgerVerification.objects.filter(finished_at__isnull=True).first()


# --- staleness: a run whose worker died ------------------------------------------------------

ABANDONED_MESSAGE = (
    "{state} without progress since {since} (more than {limit} s): its worker is gone; "
    "it is abandoned and a new verification may start"
)


def _last_sign_of_life(run: LedgerVerification) -> datetime:
    return run.progress_at or run.started_at or run.created_at


def _abandon_if_stale(run: LedgerVerification, *, now: datetime | None = None) -> bool:
    """Mark ``run`` abandoned if it is active and has shown no progress for longer than the
    stale limit. Only if nothing moved since it was read (a compare-and-set on its state,
    progress and count), so a run that just made progress is left alone."""
    now = now or timezone.now()
    limit = conf.verification_stale_seconds()
    since = _last_sign_of_life(run)
    if not run.active or now - since <= timedelta(seconds=limit):
        return False
    message = ABANDONED_MESSAGE.format(
        state=run.state, since=signing.format_time(since), limit=limit
    )
    return bool(
        LedgerVerification.objects.filter(
            pk=run.pk,
            finished_at__isnull=True,
            state=run.state,
            checked=run.checked,
            progress_at=run.progress_at,
        ).update(
            state=LedgerVerification.State.ABANDONED,
            finished_at=now,
            result={"abandoned": message, "state_was": run.state, "checked": run.checked},
        )
    )


def ledger_verification_abandon_stale(*, now: datetime | None = None) -> LedgerVerification | None:
    """The active run, marked abandoned if it is stale; None when none was."""
    active = ledger_verification_active()
    if active is None or not _abandon_if_stale(active, now=now):
        return None
    return LedgerVerification.objects.get(pk=active.pk)


def _enqueue(verification: LedgerVerification) -> None:
    """On commit, to the one runner every background job uses (replay/background.py)."""
    from governance.tasks import ledger_verification_run
    from replay.background import enqueue

    enqueue(ledger_verification_run, verification.id)


def ledger_verification_start(*, actor: Any, scope: str) -> tuple[LedgerVerification, bool]:
    """A queued verification of ``scope`` ("new" or "full"), or the active one, joined.

    Returns the run and whether this call created it. The run row exists before its task is
    queued (on commit).
    """
    if scope not in (LedgerVerification.SCOPE_NEW, LedgerVerification.SCOPE_FULL):
        raise ValueError(f"unknown verification scope {scope!r}")
    try:
        return _verification_create(actor=actor, scope=scope), True
    except IntegrityError:
        # another request inserted the one active run between our read and our insert
        active = ledger_verification_active()
        if active is None:
            raise
        return active, False


@transaction.atomic(durable=True)
def _verification_create(*, actor: Any, scope: str) -> LedgerVerification:
    ledger_verification_abandon_stale()
    active = ledger_verification_active()
    if active is not None:
        raise IntegrityError("a verification is already active")  # joined by the caller
    head = ledger.head_row()
    mark, _problems = mark_latest()
    from_seq = mark.through_seq if mark is not None and scope == "new" else 0
    verification = LedgerVerification.objects.create(
        scope=scope,
        requested_by=actor if getattr(actor, "is_authenticated", False) else None,
        from_seq=from_seq,
        total=max(0, (head.seq if head else 0) - from_seq),
    )
    _enqueue(verification)
    return verification


def _mark_append(result: Any) -> VerificationMark | None:
    key = ledger.server_key_current()
    if key is None or result.size == 0:
        return None
    verified_at = timezone.now()
    mark = VerificationMark(
        through_seq=result.size,
        head_hash=result.head_hash,
        genesis_hash=result.genesis_hash,
        verified_at=verified_at,
        key_id=key.key_id,
    )
    mark.signature = signing.sign(ledger.private_key_of(key), jcs(_mark_body(mark)))
    mark.save()
    return mark


_PROGRESS_SQL = (
    "UPDATE governance_ledgerverification SET checked = %s, progress_at = %s WHERE id = %s"
)


def _progress_writer(verification_id: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    """How a run writes its progress, and how that writer is closed.

    On PostgreSQL a large ledger is streamed inside one transaction (a server-side cursor,
    ``ledger.verify._raw_rows``): progress written on that connection would show only at the end, so
    it goes through a second connection of its own, in autocommit.
    """
    if connection.vendor != "postgresql":

        def write(checked: int) -> None:
            LedgerVerification.objects.filter(pk=verification_id).update(
                checked=checked, progress_at=timezone.now()
            )

        return write, lambda: None
    side = connections.create_connection(DEFAULT_DB_ALIAS)

    def write_aside(checked: int) -> None:
        with side.cursor() as cur:
            cur.execute(_PROGRESS_SQL, [checked, timezone.now(), verification_id])

    return write_aside, side.close


def ledger_verification_execute(*, verification_id: int) -> LedgerVerification:
    """Run a queued verification (the task's one call). Idempotent: a finished run is
    returned as it is. A run found running is run again from the start: its task is
    delivered again only when the worker that held it died (acks late, rejected on worker
    loss), and the one-run-at-a-time rule would otherwise keep it active for ever.

    Not one transaction: the progress it writes as it goes must be visible to the page
    polling it, and a chain of a million events is not checked inside one transaction.
    """
    now = timezone.now()
    claimed = LedgerVerification.objects.filter(
        pk=verification_id, finished_at__isnull=True
    ).update(state=LedgerVerification.State.RUNNING, started_at=now, progress_at=now, checked=0)
    verification = LedgerVerification.objects.get(pk=verification_id)
    if not claimed:
        return verification

    progress, progress_close = _progress_writer(verification_id)
    head = ledger.head_row()
    try:
        mark = mark_latest()[0] if verification.scope == LedgerVerification.SCOPE_NEW else None
        if mark is not None:
            from_seq = mark.through_seq
            result = ledger.verify_after(
                through_seq=mark.through_seq,
                head_hash=mark.head_hash,
                genesis_hash=mark.genesis_hash,
                progress=progress,
            )
        else:
            from_seq = 0
            result = ledger.verify(progress=progress)
        mismatches = ledger.tables_check() if result.broken is None else []
        new_mark = _mark_append(result) if result.ok and not mismatches else None
    except Exception as exc:
        progress_close()
        LedgerVerification.objects.filter(pk=verification_id, finished_at__isnull=True).update(
            state=LedgerVerification.State.FAILED,
            finished_at=timezone.now(),
            result={"error": f"{type(exc).__name__}: {exc}"},
        )
        raise
    progress_close()
    # a run marked abandoned meanwhile stays abandoned (its mark, if any, is still good)
    LedgerVerification.objects.filter(pk=verification_id, finished_at__isnull=True).update(
        state=LedgerVerification.State.DONE,
        finished_at=timezone.now(),
        from_seq=from_seq,
        checked=max(0, result.size - from_seq),
        total=max(0, (head.seq if head else 0) - from_seq),
        result={
            **result.as_dict(),
            "mismatches": [{"code": m.code, "message": m.message} for m in mismatches],
            "mark_through_seq": new_mark.through_seq if new_mark else None,
        },
    )
    return LedgerVerification.objects.get(pk=verification_id)


# --- a request's answer: the mark, and at most a bounded number of events after it ----------


@dataclass
class VerificationReading:
    """What a request can say about the ledger without walking the chain.

    ``chain`` is the verdict through ``chain.size`` (the mark's seq, or the newest seq this
    request checked after it); ``pending`` events after that were not checked (more than the
    inline bound: ``run`` is the background verification queued, or joined, for them).
    ``checked_now`` counts the events this request read to verify them.
    """

    head_seq: int
    chain: chain.ChainResult
    mismatches: tuple[reconcile.Mismatch, ...]
    mark: VerificationMark | None
    problems: list[MarkProblem]
    checked_now: int
    pending: int
    run: LedgerVerification | None = None
    known_break: LedgerVerification | None = None

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.mismatches and not self.pending

    @property
    def message(self) -> str:
        if self.chain.broken is not None:
            return f"the chain is broken at seq {self.chain.broken.seq}"
        if self.pending:
            run = f"verification {self.run.id} is {self.run.state}" if self.run else "no run"
            return (
                f"verified through seq {self.chain.size}; {self.pending} event(s) not yet "
                f"verified ({run})"
            )
        if self.mismatches:
            return f"{len(self.mismatches)} table row(s) disagree with the ledger"
        return f"verified through seq {self.chain.size}: every event"

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.chain.as_dict(),
            "ok": self.ok,
            "tables": [m.as_dict() for m in self.mismatches],
            "head_seq": self.head_seq,
            "verified_through": self.chain.size if self.chain.broken is None else None,
            "mark_through_seq": self.mark.through_seq if self.mark else None,
            "checked_now": self.checked_now,
            "unverified": self.pending,
            "verification_id": self.run.id if self.run else None,
            "verification_state": self.run.state if self.run else None,
            "message": self.message,
        }


def _known_break(after_seq: int) -> LedgerVerification | None:
    broken = _newest_break()
    if broken is not None and broken.result["broke_at"] > after_seq:
        return broken
    return None


def _from_break(run: LedgerVerification) -> chain.ChainResult:
    result = run.result
    return chain.ChainResult(
        ok=False,
        size=result.get("size", 0),
        head_hash=result.get("head_hash", ""),
        genesis_hash=result.get("genesis_hash", ""),
        broken=chain.Break(
            seq=result["broke_at"],
            code=result["code"],
            reason=result["reason"],
            expected=result.get("expected"),
            observed=result.get("observed"),
        ),
    )


def _recently_failed() -> LedgerVerification | None:
    """The newest run, if it failed less than the stale limit ago: a request does not queue
    another one behind it (a run that fails would otherwise be queued again by every poll)."""
    newest = LedgerVerification.objects.order_by("-id").first()
    if (
        newest is not None
        and newest.state == LedgerVerification.State.FAILED
        and newest.finished_at is not None
        and timezone.now() - newest.finished_at
        <= timedelta(seconds=conf.verification_stale_seconds())
    ):
        return newest
    return None


class _Counter:
    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, seen: int) -> None:
        self.seen = seen


def ledger_verification_read(*, actor: Any, inline_max: int | None = None) -> VerificationReading:
    """The ledger's verification state for a request, never walking the whole chain.

    Believes the newest mark; checks the events after it itself when there are at most
    ``inline_max`` (``GOVERNANCE_VERIFY_INLINE_MAX``) of them, and beyond that reports how many
    are not yet verified and starts (or joins) a background verification of them, unless the
    newest one failed less than ``GOVERNANCE_VERIFICATION_STALE_SECONDS`` ago (then that one
    is reported: a person asks again on the ledger page). A break a
    background run found after the mark is reported as that run found it. The tables the
    decisions depend on are checked every time (they are read by event code, not by walking
    the chain).
    """
    bound = conf.verify_inline_max() if inline_max is None else inline_max
    head = ledger.head_row()
    head_seq = head.seq if head else 0
    mark, problems = mark_latest()
    through = mark.through_seq if mark is not None else 0
    pending = head_seq - through
    checked_now = 0
    run = None
    known = _known_break(through)
    if known is not None:
        result = _from_break(known)
        pending = 0
    elif pending == 0 and mark is not None:
        result = chain.ChainResult(True, mark.through_seq, mark.head_hash, mark.genesis_hash)
    elif pending <= bound:
        counter = _Counter()
        if mark is not None:
            result = ledger.verify_after(
                through_seq=mark.through_seq,
                head_hash=mark.head_hash,
                genesis_hash=mark.genesis_hash,
                upto_seq=head_seq,
                progress=counter,
                progress_every=1,
            )
        else:
            result = ledger.verify(workers=1, upto_seq=head_seq, progress=counter, progress_every=1)
        checked_now = counter.seen
        pending = 0
    else:
        result = chain.ChainResult(
            True, through, mark.head_hash if mark else "", mark.genesis_hash if mark else ""
        )
        run = _recently_failed()
        if run is None:
            run, _created = ledger_verification_start(
                actor=actor, scope=LedgerVerification.SCOPE_NEW
            )
    mismatches = tuple(ledger.tables_check()) if result.broken is None else ()
    return VerificationReading(
        head_seq=head_seq,
        chain=result,
        mismatches=mismatches,
        mark=mark,
        problems=problems,
        checked_now=checked_now,
        pending=pending,
        run=run,
        known_break=known,
    )
