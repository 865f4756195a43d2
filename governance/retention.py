"""Retention: expire stored traces by the policy of ``REPLAY_RETENTION``
(``core.replay.retention``), never one the governance ledger or a hold still needs, each
expiry a ``TRACE_EXPIRED`` event.

Protected, whatever the rule says (:func:`traces_protected`):

* a trace a governance event names: its trace id, its stored file's sha256, one of its runs or
  one of its snapshots under one of ``governance.evidence.REFERENCE_KEYS`` of an event's
  payload (replays, halts and incidents, force-continues, production approvals, personal-data
  accesses ...);
* a trace a registered *hold* names: :func:`hold_register` (or the dotted paths in
  ``REPLAY_RETENTION_HOLDS``) takes a function ``traces -> {trace pk: reason}``; the ``dsr``
  app registers one for traces under an open legal request.

Expiring one trace is one durable transaction (:func:`trace_expire`): the row is locked, its
protection checked again (an event may have been appended since the plan), the tombstone
written (``replay.expiry``) and the event appended; the file's bytes go once it commits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string

from core.ledger import chain, codes
from core.replay import retention
from governance import conf, ledger
from governance.evidence import CHUNK, events_naming
from governance.models import GovernanceEvent
from replay.expiry import Tombstone, trace_tombstone
from replay.models import Trace

_SEQ, _TYPE = chain.FIELDS.index("seq"), chain.FIELDS.index("type")

#: the operations page reads each verdict and format's oldest live traces in pages of this
#: many, at most this many pages, looking for the next to expire
UPCOMING_SCAN: Final = 200
UPCOMING_PAGES: Final = 5

Hold = Callable[[Sequence[Trace]], Mapping[int, str]]
_HOLDS: list[Hold] = []


def hold_register(hold: Hold) -> Hold:
    """Register a hold: ``hold(traces) -> {trace pk: why it is kept}`` (usable as a decorator)."""
    if hold not in _HOLDS:
        _HOLDS.append(hold)
    return hold


def hold_unregister(hold: Hold) -> None:
    if hold in _HOLDS:
        _HOLDS.remove(hold)


def _holds() -> list[Hold]:
    configured = [import_string(path) for path in conf.retention_holds()]
    return [*_HOLDS, *(h for h in configured if h not in _HOLDS)]


def retention_policy() -> retention.Policy:
    return retention.policy_from_setting(conf.retention())


# --- protection -----------------------------------------------------------------------------


def traces_protected(traces: Sequence[Trace], *, after_seq: int = 0) -> dict[int, str]:
    """The traces among ``traces`` that must not expire -> why (the first reason found);
    ``after_seq``: only events after it are read (the earlier ones were checked already)."""
    found: dict[int, str] = {}
    for row, pks in events_naming(traces, after_seq=after_seq):
        for pk in pks:
            found.setdefault(pk, f"named by governance event {row[_SEQ]} ({row[_TYPE]})")
    for start in range(0, len(traces), CHUNK):
        for hold in _holds():
            for pk, why in hold(traces[start : start + CHUNK]).items():
                found.setdefault(pk, why)
    return found


# --- plan -----------------------------------------------------------------------------------


def _facts(trace: Trace) -> retention.TraceFacts:
    return retention.TraceFacts(
        pk=trace.pk,
        trace_id=trace.trace_id,
        format=trace.format,
        verdict=trace.last_status,
        started_at=trace.started_at,
        uploaded_at=trace.created_at,
        sha256=trace.blob.sha256,
    )


def _live() -> Any:
    return (
        Trace.objects.filter(expired_at__isnull=True)
        .select_related("blob")
        .annotate(start=Coalesce("started_at", "created_at"))
    )


@dataclass(frozen=True, slots=True)
class Plan:
    decisions: list[retention.Decision]
    traces: dict[int, Trace]
    #: the ledger's head when the plan read it: an expiry re-reads only the events after it
    head_seq: int = 0

    def due(self, now: datetime) -> list[retention.Decision]:
        return retention.due(self.decisions, now)


def retention_plan(*, now: datetime | None = None) -> Plan:
    """Every live trace some rule could expire by ``now``, with its protection."""
    now = now or timezone.now()
    policy = retention_policy()
    cutoff = retention.cutoff(policy, now)
    if cutoff is None:
        return Plan([], {})
    head = ledger.head()
    traces = list(_live().filter(start__lte=cutoff).order_by("start", "pk"))
    protected = traces_protected(traces)
    decisions = retention.decide(policy, (_facts(t) for t in traces), protected)
    return Plan(decisions, {t.pk: t for t in traces}, head.seq if head else 0)


def retention_upcoming(*, limit: int = 20) -> list[retention.Decision]:
    """What expires next: the first ``limit`` unprotected traces by the time they expire
    (what the operations page shows). Within one verdict and format the rule is the same,
    so the oldest live traces of each pair expire first: each pair's oldest ``UPCOMING_SCAN``
    live traces are read, then, when they gave fewer than ``limit`` unprotected traces, the
    next ones up to ``UPCOMING_PAGES`` × ``UPCOMING_SCAN``, so the page costs the same
    whatever the number of traces. The ledger is asked once per round, whatever the number of
    pairs (:func:`traces_protected`, through the reference indexes): at most twice."""
    policy = retention_policy()
    if policy.empty:
        return []
    pairs = []
    groups = Trace.objects.filter(expired_at__isnull=True).values_list("last_status", "format")
    for verdict, fmt in sorted(set(groups.distinct())):
        probe = retention.TraceFacts(0, "", fmt, verdict, None, timezone.now())
        if retention.rule_for(policy, probe).days is not None:
            pairs.append((verdict, fmt))
    oldest = {
        (verdict, fmt): _live()
        .filter(last_status=verdict, format=fmt)
        .defer("ingest_report")  # the widest column, which nothing here reads
        .order_by("start", "pk")
        for verdict, fmt in pairs
    }
    kept: dict[tuple[str, str], list[retention.Decision]] = {pair: [] for pair in pairs}
    # two rounds at most, one ledger lookup each: every pair's first page, then the further
    # pages of the pairs whose first page gave fewer than `limit` unprotected traces
    reading = dict.fromkeys(pairs, (0, UPCOMING_SCAN))
    for _round in range(2):
        pages = {pair: list(oldest[pair][start:stop]) for pair, (start, stop) in reading.items()}
        pages = {pair: traces for pair, traces in pages.items() if traces}
        if not pages:
            break
        protected = traces_protected([t for traces in pages.values() for t in traces])
        for pair, traces in pages.items():
            decisions = retention.decide(policy, (_facts(t) for t in traces), protected)
            kept[pair] += [d for d in decisions if d.protected_by is None]
        reading = {
            pair: (UPCOMING_SCAN, UPCOMING_PAGES * UPCOMING_SCAN)
            for pair, traces in pages.items()
            if len(kept[pair]) < limit and len(traces) == UPCOMING_SCAN
        }
    found = [d for pair in pairs for d in kept[pair][:limit]]
    found.sort(key=lambda d: (d.expires_at, d.facts.pk))
    return found[:limit]


# --- expire ---------------------------------------------------------------------------------


def _snapshot_users() -> Counter[str]:
    """How many live traces need each snapshot id."""
    users: Counter[str] = Counter()
    refs = Trace.objects.filter(expired_at__isnull=True).values_list(
        "required_snapshot_ids", flat=True
    )
    for trace_refs in refs.iterator(chunk_size=2000):
        for ref in trace_refs or []:
            if isinstance(ref, dict) and ref.get("snapshot_id"):
                users[str(ref["snapshot_id"])] += 1
    return users


def _snapshot_ids(trace: Trace) -> set[str]:
    return {
        str(ref["snapshot_id"])
        for ref in trace.required_snapshot_ids or []
        if isinstance(ref, dict) and ref.get("snapshot_id")
    }


@dataclass(frozen=True, slots=True)
class Expired:
    tombstone: Tombstone
    event: GovernanceEvent
    rule: str


@transaction.atomic(durable=True)
def trace_expire(
    *,
    trace_pk: int,
    rule: str,
    expires_at: datetime,
    now: datetime,
    snapshot_users: Counter[str] | None = None,
    checked_through: int = 0,
) -> Expired | str:
    """Expire one trace and append its ``TRACE_EXPIRED`` event, or say why it was skipped
    (already expired, protected since the plan). ``snapshot_users``: live traces per snapshot
    id (:func:`_snapshot_users`; kept up to date by the caller across a run);
    ``checked_through``: the events up to this seq were found not to name it (the plan's)."""
    trace = (
        Trace.objects.select_for_update(of=("self",))
        .select_related("blob")
        .filter(pk=trace_pk)
        .first()
    )
    if trace is None:
        return "no such trace"
    if trace.expired_at is not None:
        return f"already expired at {trace.expired_at.isoformat()}"
    ledger.lock()  # no event naming it can be appended between this check and the expiry
    why = traces_protected([trace], after_seq=checked_through).get(trace.pk)
    if why is not None:
        return f"protected: {why}"
    users = snapshot_users if snapshot_users is not None else _snapshot_users()
    needed = _snapshot_ids(trace)
    unneeded = [sid for sid in needed if users.get(sid, 0) <= 1]
    tombstone = trace_tombstone(trace=trace, at=now, rule=rule, snapshots_unneeded=unneeded)
    for sid in needed:
        users[sid] -= 1
    event = ledger.append(
        event_type=codes.TRACE_EXPIRED,
        payload={
            **tombstone.as_dict(),
            "format": trace.format,
            "rule": rule,
            "expires_at": expires_at.isoformat(),
        },
        actor_label="system:retention",
        idempotency_key=f"trace-expired:{trace.blob.sha256}",
    )
    return Expired(tombstone, event, rule)


@dataclass(slots=True)
class RetentionOutcome:
    dry_run: bool
    due: list[retention.Decision] = field(default_factory=list)
    expired: list[Expired] = field(default_factory=list)
    skipped: list[tuple[retention.Decision, str]] = field(default_factory=list)
    protected: int = 0
    swept: int = 0


def retention_run(
    *, dry_run: bool = False, now: datetime | None = None, limit: int | None = None
) -> RetentionOutcome:
    """Expire every trace that is due (``limit`` at most), or only list them (``dry_run``)."""
    from replay.expiry import expired_content_sweep

    now = now or timezone.now()
    plan = retention_plan(now=now)
    outcome = RetentionOutcome(dry_run=dry_run)
    outcome.due = plan.due(now)[:limit] if limit is not None else plan.due(now)
    outcome.protected = sum(
        1 for d in plan.decisions if d.protected_by is not None and d.expires_at <= now
    )
    if dry_run:
        return outcome
    users = _snapshot_users()
    for decision in outcome.due:
        result = trace_expire(
            trace_pk=decision.facts.pk,
            rule=decision.rule.label,
            expires_at=decision.expires_at,
            now=now,
            snapshot_users=users,
            checked_through=plan.head_seq,
        )
        if isinstance(result, Expired):
            outcome.expired.append(result)
        else:
            outcome.skipped.append((decision, result))
    outcome.swept = expired_content_sweep()
    return outcome
