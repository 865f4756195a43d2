"""The tables the council's decisions depend on, reconciled with the ledger: votes, member
keys, every kind of governed request and its detail row, apps' own table checks, and event
types no installed kind declares. The rules are the pure ``core.ledger.reconcile``; this module
streams the rows in."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from django.db.models import Count, Min, Q

from core.ledger import codes, reconcile, signing
from governance.ledger.verify import member_key_states, verify
from governance.models import (
    KIND_FORCE_CONTINUE,
    KIND_HALT_CLEAR,
    KIND_PRODUCTION_REPLAY,
    KIND_ROLE_GRANT,
    ForceContinueRequest,
    GovernanceEvent,
    GovernedRequest,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
    Vote,
)


def _uuid_text(value: Any) -> str | None:
    return str(value) if value is not None else None


#: the column of ``reconcile.ApprovalRow`` a vote's request goes in, per kind
_VOTE_LINK = {
    KIND_FORCE_CONTINUE: "request_id",
    KIND_PRODUCTION_REPLAY: "production_id",
    KIND_ROLE_GRANT: "role_grant_id",
}


#: a kind of an app's whose votes name their subject as another request (a legal request's
#: approvals, ``legal-<purpose>``): the prefix before the purpose
_LEGAL_PREFIX = "legal-"


def _vote_row(r: tuple[Any, ...]) -> reconcile.ApprovalRow:
    request_id, kind, subject = _uuid_text(r[2]), r[3], r[4]
    links: dict[str, Any] = {"request_id": None, "production_id": None, "role_grant_id": None}
    halt_id = legal_request_id = purpose = None
    installed = installed_subject = None
    if kind in _VOTE_LINK:
        links[_VOTE_LINK[kind]] = request_id
    elif kind.startswith(_LEGAL_PREFIX):
        legal_request_id, purpose = subject, kind.removeprefix(_LEGAL_PREFIX)
    elif kind == KIND_HALT_CLEAR:
        halt_id = int(subject) if subject.isdigit() else subject
    else:  # an installed kind's (``installed_kinds``)
        installed, installed_subject = kind, subject
    return reconcile.ApprovalRow(
        id=r[0],
        event_id=r[1],
        halt_id=halt_id,
        approver_id=r[5],
        role=r[6],
        key_id=r[7],
        decision=r[8],
        payload=r[9],
        signature=r[10],
        legal_request_id=legal_request_id,
        purpose=purpose,
        kind=installed,
        subject=installed_subject,
        **links,
    )


def vote_rows(kinds: Iterable[str]) -> Iterator[reconcile.ApprovalRow]:
    """The votes on requests of these kinds, streamed in ``event_id`` order, as the table
    checks read them."""
    return (
        _vote_row(r)
        for r in Vote.objects.filter(request__kind__in=list(kinds))
        .order_by("event_id")
        .values_list(
            "id",
            "event_id",
            "request_id",
            "request__kind",
            "request__subject",
            "approver_id",
            "role",
            "key__key_id",
            "decision",
            "payload",
            "signature",
        )
        .iterator(chunk_size=2000)
    )


def installed_kinds() -> list[Any]:
    """The registered kinds of governed request that bring their own event types (an
    installed package's, ``KindCodes.event_types``): their filings, votes and approvals are
    events of those types, and their rows are checked here the one way every such kind is:

    - the filing (``codes.filed``) opens its ``governance_request`` row, whose subject is the
      filing payload's ``request_id`` and whose payload is the filing's;
    - each vote (``codes.vote``) has its ``governance_vote`` row, and names its request by
      its payload's ``request_id`` (with its ``decision`` and ``role``);
    - the row is approved exactly when an approval event (``codes.approved``, naming the
      request by ``request_id``) says so, with that event as its decision; else pending."""
    from governance.requests.builtin import kinds  # the kinds import the services

    return [kind for kind in kinds() if kind.codes.event_types]


def _approval_mismatches() -> Iterator[reconcile.Mismatch]:
    """The votes of every kind but the legal ones (which ``dsr`` checks) against the signed
    vote events."""
    installed = {codes.code_of(k.codes.vote): k.name for k in installed_kinds()}
    rows = vote_rows([*_VOTE_LINK, KIND_HALT_CLEAR, *installed.values()])
    events = vote_events([*reconcile.VOTE_CODES, *installed])
    yield from reconcile.approvals(rows, events, event_type_of, installed=installed)


def vote_events(codes_: Iterable[int]) -> Iterator[reconcile.VoteEvent]:
    """The events of these codes, streamed in seq order, as the table checks read them."""
    return (
        reconcile.VoteEvent(*e)
        for e in GovernanceEvent.objects.filter(code__in=list(codes_))
        .order_by("seq")
        .values_list(
            "seq", "code", "type", "actor_id", "actor_key_id", "actor_signature", "payload"
        )
        .iterator(chunk_size=2000)
    )


def event_type_of(seq: int) -> str | None:
    """The type of event ``seq``, or None when there is none."""
    return GovernanceEvent.objects.filter(seq=seq).values_list("type", flat=True).first()


def _member_key_mismatches() -> Iterator[reconcile.Mismatch]:
    rows = (
        reconcile.KeyRow(*r)
        for r in MemberKey.objects.order_by("id").values_list(
            "key_id",
            "user_id",
            "public_key",
            "fingerprint",
            "confirmed_at",
            "confirmed_by_id",
            "revoked_at",
            "revoked_by_id",
        )
    )
    yield from reconcile.member_keys(rows, member_key_states())


def _time_text(value: Any) -> str:
    return signing.format_time(value) if isinstance(value, datetime) else str(value)


def _as_text(value: Any) -> str:
    return str(value)


def _sorted(value: Any) -> Any:
    return sorted(value) if isinstance(value, list) else value


def _same(value: Any) -> Any:
    return value


#: per kind of council request, the terms its filing event signs besides expiry, reason and
#: requester: term (its payload key) -> (the row's column, how the row's value is spelled)
_RequestTerms = Mapping[str, tuple[str, Callable[[Any], Any]]]

_REQUEST_KINDS: Final[tuple[tuple[str, Any, _RequestTerms, str, str, str], ...]] = (
    (
        "force-continue",
        ForceContinueRequest,
        {
            "run_id": ("run_id", _as_text),
            "step": ("step", _same),
            "divergence_digest": ("divergence_digest", _same),
        },
        codes.FORCE_CONTINUE_REQUEST,
        codes.FORCE_CONTINUE_APPROVED,
        codes.FORCE_CONTINUE_REJECTED,
    ),
    (
        "production replay",
        ProductionReplayRequest,
        {"trace_sha256": ("trace__blob__sha256", _same)},
        codes.PRODUCTION_REPLAY_REQUEST,
        codes.PRODUCTION_REPLAY_APPROVED,
        codes.PRODUCTION_REPLAY_REJECTED,
    ),
    (
        "role grant",
        RoleGrantRequest,
        {"user_id": ("user_id", _same), "grant": ("roles", _sorted)},
        codes.ROLE_GRANT_REQUEST,
        codes.ROLE_GRANT_APPROVED,
        codes.ROLE_GRANT_REJECTED,
    ),
)


def _filed_terms(extra: _RequestTerms, actor_id: Any, payload: Any) -> dict[str, Any]:
    """What a filing event signed, in the shape of :func:`_request_rows`' terms."""
    p = payload if isinstance(payload, dict) else {}
    terms = {
        "expires_at": p.get("expires_at"),
        "reason": p.get("reason"),
        "requested_by": f"user {actor_id}",
        "payload": payload,
    }
    terms.update({term: p.get(term) for term in extra})
    return terms


def _request_rows(model: Any, extra: _RequestTerms) -> Iterator[reconcile.RequestRow]:
    """A council request table's rows with the terms their filing events signed."""
    columns = [column for column, _spell in extra.values()]
    for r in model.objects.order_by("created_at").values_list(
        "id",
        "state",
        "request_event_id",
        "decision_event_id",
        "expires_at",
        "reason",
        "requested_by_id",
        "payload",
        *columns,
    ):
        terms = {
            "expires_at": _time_text(r[4]),
            "reason": r[5],
            "requested_by": f"user {r[6]}",
            "payload": r[7],
        }
        terms.update(
            {
                term: spell(value)
                for (term, (_c, spell)), value in zip(extra.items(), r[8:], strict=True)
            }
        )
        yield reconcile.RequestRow(str(r[0]), r[1], r[2], r[3], terms)


def _request_mismatches() -> Iterator[reconcile.Mismatch]:
    for label, model, extra, filing, approved, rejected in _REQUEST_KINDS:
        filed: dict[str, reconcile.Filing] = {}
        decided: dict[str, tuple[int, str]] = {}
        outcome = {codes.code_of(approved): "approved", codes.code_of(rejected): "rejected"}
        wanted = [codes.code_of(filing), *outcome]
        for seq, code, actor_id, payload in (
            GovernanceEvent.objects.filter(code__in=wanted)
            .order_by("seq")
            .values_list("seq", "code", "actor_id", "payload")
            .iterator(chunk_size=2000)
        ):
            request_id = str(payload.get("request_id")) if isinstance(payload, dict) else ""
            if code in outcome:
                decided.setdefault(request_id, (seq, outcome[code]))
            elif request_id not in filed:
                filed[request_id] = reconcile.Filing(seq, _filed_terms(extra, actor_id, payload))
        yield from reconcile.requests(
            label=label,
            table=GovernedRequest._meta.db_table,  # what the filing and decision set
            rows=_request_rows(model, extra),
            filed=filed,
            decided=decided,
        )


#: table checks other apps add (``tables_register``): each yields its rows' mismatches
_TABLE_CHECKS: list[Callable[[], Iterable[reconcile.Mismatch]]] = []

#: the kinds of governed request whose row an event of another kind opens (no filing of their
#: own): kind -> the event type that opens it (other apps add theirs: ``opened_by_register``)
_OPENED_BY: dict[str, str] = {KIND_HALT_CLEAR: codes.FORCE_HALT_REPLAY}
_FILED_KINDS = (KIND_FORCE_CONTINUE, KIND_PRODUCTION_REPLAY, KIND_ROLE_GRANT)


def opened_by_register(kind: str, event_type: str) -> None:
    """An app's kind of governed request whose row ``event_type`` opens (a legal request's
    approvals: its ``DSR_OPENED``), so ``governance verify`` checks those rows too."""
    _OPENED_BY[kind] = event_type


#: the filed kinds' detail tables, joined 1:1 to ``governance_request``
_DETAIL_MODELS = {
    KIND_FORCE_CONTINUE: ForceContinueRequest,
    KIND_PRODUCTION_REPLAY: ProductionReplayRequest,
    KIND_ROLE_GRANT: RoleGrantRequest,
}


def _detail_mismatches() -> Iterator[reconcile.Mismatch]:
    """A filed kind's ``governance_request`` row with no row in its detail table: invisible
    to the filing check, which reads the two joined. One query for every kind."""
    table = GovernedRequest._meta.db_table
    orphaned = Q(pk__in=[])
    for kind, model in _DETAIL_MODELS.items():
        orphaned |= Q(kind=kind) & ~Q(pk__in=model.objects.values("pk"))
    for request_id, kind in (
        GovernedRequest.objects.filter(orphaned)
        .order_by("created_at", "id")
        .values_list("id", "kind")
    ):
        yield reconcile.Mismatch(
            codes.TABLE_REQUEST,
            table,
            str(request_id),
            f"{kind} request {request_id} is in the table but has no "
            f"{_DETAIL_MODELS[kind]._meta.db_table} row",
        )


#: vote event type -> how its payload names the governed request it votes on (kind, subject),
#: for the kinds whose row the first vote makes (no filing of their own)
_VOTED_ON: dict[str, Callable[[Mapping[str, Any]], tuple[str, str]]] = {
    codes.HALT_CLEAR_APPROVAL: lambda p: (KIND_HALT_CLEAR, str(p.get("halt_seq"))),
    codes.DSR_APPROVAL: lambda p: (f"legal-{p.get('purpose')}", str(p.get("request_id"))),
}


def _unrowed_votes(
    rows: Sequence[reconcile.GovernedRow],
    voted_on: Mapping[str, Callable[[Mapping[str, Any]], tuple[str, str]]],
) -> Iterator[reconcile.Mismatch]:
    """A signed vote on a halt clear, a legal approval or an installed kind's request whose
    request row is gone (``voted_on``: vote type -> how its payload names the request)."""
    have = {(r.kind, r.subject) for r in rows}
    named: set[tuple[str, str]] = set()
    for seq, type_, payload in (
        GovernanceEvent.objects.filter(code__in=[codes.code_of(t) for t in voted_on])
        .order_by("seq")
        .values_list("seq", "type", "payload")
        .iterator(chunk_size=2000)
    ):
        kind, subject = voted_on[type_](payload if isinstance(payload, dict) else {})
        if (kind, subject) in have or (kind, subject) in named:
            continue
        named.add((kind, subject))
        yield reconcile.Mismatch(
            codes.TABLE_REQUEST,
            GovernedRequest._meta.db_table,
            str(seq),
            f"ledger event {seq} ({type_}) is a vote on {kind} request {subject}, which is not "
            "in the table",
        )


def _unrowed_filings(
    rows: Sequence[reconcile.GovernedRow], installed: Sequence[Any]
) -> Iterator[reconcile.Mismatch]:
    """An installed kind's filing event whose request row is gone."""
    have = {(r.kind, r.subject) for r in rows}
    filed = {codes.code_of(k.codes.filed): k.name for k in installed}
    for seq, code, request_id in (
        GovernanceEvent.objects.filter(code__in=list(filed))
        .order_by("seq")
        .values_list("seq", "code", "payload__request_id")
        .iterator(chunk_size=2000)
    ):
        if (filed[code], str(request_id)) not in have:
            yield reconcile.Mismatch(
                codes.TABLE_REQUEST,
                GovernedRequest._meta.db_table,
                str(request_id),
                f"ledger event {seq} filed {filed[code]} request {request_id}, which is not in "
                "the table",
            )


def _voted_on_installed(name: str) -> Callable[[Mapping[str, Any]], tuple[str, str]]:
    return lambda p: (name, str(p.get("request_id")))


def _governed_mismatches() -> Iterator[reconcile.Mismatch]:
    """Every governed request row not filed by a request event of its own (halt clears, an
    app's kinds, an installed kind's, or a kind nothing files) against the event it names;
    every vote on such a request has its row; every filed kind's row has its detail row."""
    installed = installed_kinds()
    opened_by = {**_OPENED_BY, **{k.name: k.codes.filed for k in installed}}
    voted_on = {**_VOTED_ON, **{k.codes.vote: _voted_on_installed(k.name) for k in installed}}
    yield from _detail_mismatches()
    rows = [
        reconcile.GovernedRow(str(r[0]), *r[1:])
        for r in GovernedRequest.objects.exclude(kind__in=_FILED_KINDS)
        .order_by("created_at", "id")
        .values_list(
            "id", "kind", "subject", "payload", "state", "request_event_id", "decision_event_id"
        )
    ]
    yield from _unrowed_votes(rows, voted_on)
    yield from _unrowed_filings(rows, installed)
    if not rows:
        return
    openings = {
        seq: reconcile.Opening(seq, type_, payload)
        for seq, type_, payload in GovernanceEvent.objects.filter(
            seq__in={r.request_event_id for r in rows}
        ).values_list("seq", "type", "payload")
    }
    decided: dict[str, int] = {}
    for seq, halt_seq in (
        GovernanceEvent.objects.filter(code=codes.code_of(codes.FORCE_HALT_CLEAR))
        .order_by("seq")
        .values_list("seq", "payload__halt_seq")
    ):
        decided.setdefault(f"{KIND_HALT_CLEAR} {halt_seq}", seq)
    approvals = {codes.code_of(k.codes.approved): k.name for k in installed if k.codes.approved}
    for seq, code, request_id in (
        GovernanceEvent.objects.filter(code__in=list(approvals))
        .order_by("seq")
        .values_list("seq", "code", "payload__request_id")
    ):
        decided.setdefault(f"{approvals[code]} {request_id}", seq)
    yield from reconcile.governed_requests(
        rows=rows,
        openings=openings,
        opened_by=opened_by,
        decided=decided,
        table=GovernedRequest._meta.db_table,
    )


def tables_register(check: Callable[[], Iterable[reconcile.Mismatch]]) -> None:
    """Add an app's table check (its ``AppConfig.ready``): ``governance verify``, the ledger
    page's mark and the checkpoint check then name its rows too. Registered once."""
    if check not in _TABLE_CHECKS:
        _TABLE_CHECKS.append(check)


def _unknown_type_mismatches() -> Iterator[reconcile.Mismatch]:
    """One finding per event code neither this console nor an installed kind declares (the
    kind that appended them is not installed here): the chain verifies without knowing what
    an event means, but the rows such events decide cannot be reconciled, so it is named
    (its type, first seq and count) and the verdict is not ok. One query, on the code index."""
    for code, type_, first, count in (
        GovernanceEvent.objects.exclude(code__in=list(codes.BY_CODE))
        .values("code", "type")
        .annotate(first=Min("seq"), count=Count("seq"))
        .order_by("first")
        .values_list("code", "type", "first", "count")
    ):
        yield reconcile.Mismatch(
            codes.TABLE_EVENT_TYPE_UNKNOWN,
            GovernanceEvent._meta.db_table,
            str(first),
            f"{count} ledger event(s) from seq {first} are of type {type_} (code {code}), which "
            "neither this console nor an installed kind of governed request declares: the rows "
            "they decide are not reconciled",
        )


def tables_check() -> list[reconcile.Mismatch]:
    """Every row of the tables the decisions depend on that disagrees with the ledger, and
    every event type no installed kind declares."""
    found = [
        *_unknown_type_mismatches(),
        *_approval_mismatches(),
        *_member_key_mismatches(),
        *_request_mismatches(),
        *_governed_mismatches(),
    ]
    for check in _TABLE_CHECKS:
        found.extend(check())
    return found


def verify_all(*, workers: int | None = None) -> reconcile.Verdict:
    """The chain (:func:`verify`), then the tables checked against it."""
    return reconcile.Verdict(verify(workers=workers), tuple(tables_check()))
