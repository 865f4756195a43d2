"""Every governed request table against the ledger, for every kind: a raw SQL INSERT, UPDATE
and DELETE on ``governance_request``, on each kind's detail table and on ``governance_vote``,
with the append-only guard dropped (SQLite) or disabled (PostgreSQL) as the database's owner
could, is named by ``governance verify`` (its table, its row, and what differs).

Builds on ``test_ledger_tables`` (its helpers, and the cases it pins for one kind) and on the
kinds as ``test_every_kind`` files them, plus the toy kind an installed package brings
(``tests/toykind``, installed here as ``tests/console/test_toy_kind.py`` installs it): its
rows are reconciled with the event types it brings, as the built-in kinds' are.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection

from core.ledger.requests import KindRegistry, load_entry_points
from governance.models import GovernanceEvent, GovernedRequest, Vote
from governance.requests import builtin
from tests.console.test_toy_kind import TOY
from tests.governance.factories import enrol, person
from tests.governance.test_every_kind import FILE as BUILTIN_FILE
from tests.governance.test_every_kind import KINDS as BUILTIN_KINDS
from tests.governance.test_every_kind import Filed, _everyone  # noqa: F401
from tests.governance.test_ledger_tables import _drop_triggers, _row_id, _sql, _verify

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("stored_traces", "toy_installed"),
]

TOY_KIND = "toy-notice"
KINDS = [*BUILTIN_KINDS, TOY_KIND]


@pytest.fixture
def toy_installed(monkeypatch):
    """The console's kinds plus the toy kind, loaded from its entry point."""
    registry = KindRegistry()
    builtin.register(registry)
    load_entry_points(registry)
    load_entry_points(registry, [TOY])
    monkeypatch.setattr(builtin, "_default", registry)


def _toy_notice(*, second: bool = False) -> Filed:
    kind = builtin.kinds().get(TOY_KIND)
    notice = kind.file(actor=person("bob"), text="the archive moves on Monday")
    return Filed(
        kind,
        notice.id,
        f"notice {notice.id}",
        "bob",
        [("carol", "council"), ("dave", "council")],
        notice,
    )


FILE = {**BUILTIN_FILE, TOY_KIND: _toy_notice}

#: the per-kind detail table each kind's rows join 1:1 (halts and legal approvals have none)
DETAIL = {
    "force-continue": "governance_forcecontinuerequest",
    "production-replay": "governance_productionreplayrequest",
    "role-grant": "governance_rolegrantrequest",
}


@contextlib.contextmanager
def unguarded(table: str) -> Iterator[None]:
    """Write to ``table`` past its append-only guard: dropped on SQLite, disabled (and enabled
    again) on PostgreSQL, as the owner of the database could."""
    if connection.vendor == "postgresql":
        _sql("SET CONSTRAINTS ALL IMMEDIATE", [])
        _sql(f"ALTER TABLE {table} DISABLE TRIGGER USER", [])
        yield
        _sql(f"ALTER TABLE {table} ENABLE TRIGGER USER", [])
    else:
        _drop_triggers(table)
        yield


def _voted(name: str) -> tuple[Filed, Vote, GovernedRequest]:
    """A request of kind ``name`` with its first signer's vote (and so its request row)."""
    filed = FILE[name]()
    who, role = filed.signers[0]
    signer = enrol(who)
    vote = filed.record(signer.user, signer.sign(filed.payload(role)))
    return filed, vote, GovernedRequest.objects.get(id=vote.request_id)


def _named() -> list[tuple[str, str, str, str]]:
    code, result = _verify()
    assert code == 1
    assert result["broke_at"] is None  # the chain itself is intact
    return [(m["code"], m["table"], m["row"], m["message"]) for m in result["tables"]]


#: how the ledger check calls a request of each kind
LABEL = {name: name for name in KINDS} | {
    "production-replay": "production replay",
    "role-grant": "role grant",
}


def _first_event() -> GovernanceEvent:
    return GovernanceEvent.objects.order_by("seq").first()


# --- governance_vote ------------------------------------------------------------------------


@pytest.mark.parametrize("name", KINDS)
def test_a_vote_row_updated_underneath_is_named(name):
    _filed, vote, _row = _voted(name)
    with unguarded("governance_vote"):
        _sql("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [vote.id])

    assert _named() == [
        (
            "TABLE_APPROVAL",
            "governance_vote",
            str(vote.id),
            f"approval row {vote.id} says decision deny, its ledger event {vote.event_id} says "
            "approve",
        )
    ]


@pytest.mark.parametrize("name", KINDS)
def test_a_vote_row_deleted_underneath_is_named(name):
    filed, vote, _row = _voted(name)
    with unguarded("governance_vote"):
        _sql("DELETE FROM governance_vote WHERE id = %s", [vote.id])

    assert _named() == [
        (
            "TABLE_APPROVAL_MISSING",
            "governance_vote",
            str(vote.event_id),
            f"ledger event {vote.event_id} ({filed.kind.codes.vote}) has no approval row",
        )
    ]


@pytest.mark.parametrize("name", KINDS)
def test_a_vote_row_inserted_underneath_is_named(name):
    _filed, vote, row = _voted(name)
    dave = enrol("dave")
    added = GovernanceEvent.objects.order_by("-seq").first()  # dave's KEY_CONFIRMED
    forged = vote.id + 1000
    with unguarded("governance_vote"):
        _sql(
            "INSERT INTO governance_vote (id, request_id, approver_id, role, key_id, decision,"
            " reason, payload, signature, event_id, created_at) SELECT %s, request_id, %s,"
            " role, %s, decision, reason, payload, signature, %s, created_at"
            " FROM governance_vote WHERE id = %s",
            [forged, dave.user.pk, dave.key.pk, added.seq, vote.id],
        )

    assert _named() == [
        (
            "TABLE_APPROVAL",
            "governance_vote",
            str(forged),
            f"approval row {forged} has no ledger event (event {added.seq} is {added.type})",
        )
    ]
    assert row.id  # the vote is on the kind's request row


# --- governance_request ---------------------------------------------------------------------


@pytest.mark.parametrize("name", KINDS)
def test_a_request_row_updated_underneath_is_named(name):
    _filed, _vote, row = _voted(name)
    state = "rejected" if row.state == "approved" else "approved"
    with unguarded("governance_request"):
        _sql(
            "UPDATE governance_request SET state = %s WHERE id = %s",
            [state, _row_id(row.id)],
        )

    assert _named() == [
        (
            "TABLE_REQUEST",
            "governance_request",
            str(row.id),
            f"{LABEL[name]} request {row.id} is {state} in the table, the ledger says {row.state}",
        )
    ]


@pytest.mark.parametrize("name", KINDS)
def test_a_request_row_deleted_underneath_is_named(name):
    filed, vote, row = _voted(name)
    with unguarded("governance_vote"):
        _sql("DELETE FROM governance_vote WHERE request_id = %s", [_row_id(row.id)])
    if name in DETAIL:
        with unguarded(DETAIL[name]):
            _sql(
                f"DELETE FROM {DETAIL[name]} WHERE governedrequest_ptr_id = %s",  # noqa: S608
                [_row_id(row.id)],
            )
    with unguarded("governance_request"):
        _sql("DELETE FROM governance_request WHERE id = %s", [_row_id(row.id)])

    if name in DETAIL:  # its filing event names it
        request = (
            str(row.id),
            f"ledger event {row.request_event_id} filed {LABEL[name]} request {row.id}, which "
            "is not in the table",
        )
    else:  # its first vote made it: the vote names it
        request = (
            str(vote.event_id),
            f"ledger event {vote.event_id} ({filed.kind.codes.vote}) is a vote on {name} "
            f"request {row.subject}, which is not in the table",
        )
    filing = []
    if name == TOY_KIND:  # its own filing event names it too
        filing = [
            (
                "TABLE_REQUEST",
                "governance_request",
                str(row.id),
                f"ledger event {row.request_event_id} filed {name} request {row.id}, which is "
                "not in the table",
            )
        ]
    assert sorted(_named()) == sorted(
        [
            (
                "TABLE_APPROVAL_MISSING",
                "governance_vote",
                str(vote.event_id),
                f"ledger event {vote.event_id} ({filed.kind.codes.vote}) has no approval row",
            ),
            ("TABLE_REQUEST", "governance_request", *request),
            *filing,
        ]
    )


@pytest.mark.parametrize("name", KINDS)
def test_a_request_row_inserted_underneath_is_named(name):
    _filed, _vote, row = _voted(name)
    forged = uuid.uuid4()
    first = _first_event()
    _sql(
        "INSERT INTO governance_request (id, kind, subject, payload, reason, state, created_at,"
        " request_event_id) SELECT %s, kind, subject, payload, reason, state, created_at, %s"
        " FROM governance_request WHERE id = %s",
        [_row_id(forged), first.seq, _row_id(row.id)],
    )

    if name in DETAIL:
        says = f"is in the table but has no {DETAIL[name]} row"
    else:
        opened_by = {"halt-clear": "FORCE_HALT_REPLAY", TOY_KIND: "TOY_NOTICE"}.get(
            name, "DSR_OPENED"
        )
        says = f"names event {first.seq} as its filing, which is {first.type}, not {opened_by}"
    assert _named() == [
        ("TABLE_REQUEST", "governance_request", str(forged), f"{name} request {forged} {says}")
    ]


# --- the detail tables ----------------------------------------------------------------------

#: per detail table, the column rewritten and what the ledger check then says differs
DETAIL_UPDATE = {
    "force-continue": ("step = 4", "has step 4 in the table, but its filing event {seq} says 3"),
    "production-replay": (
        "trace_id = %(other_trace)s",
        "has trace_sha256 {other_sha} in the table, but its filing event {seq} says {sha}",
    ),
    "role-grant": (
        "roles = '[\"admin\"]'",
        "has grant ['admin'] in the table, but its filing event {seq} says ['council']",
    ),
}


@pytest.mark.parametrize("name", sorted(DETAIL))
def test_a_detail_row_updated_underneath_is_named(name):
    filed, _vote, row = _voted(name)
    from tests.governance.factories import trace_row

    assignment, says = DETAIL_UPDATE[name]
    other = trace_row()
    with unguarded(DETAIL[name]):
        _sql(
            f"UPDATE {DETAIL[name]} SET {assignment} "  # noqa: S608
            "WHERE governedrequest_ptr_id = %(id)s",
            {"id": _row_id(row.id), "other_trace": other.pk},
        )

    trace = getattr(filed.row, "trace", None)
    says = says.format(
        seq=row.request_event_id,
        other_sha=other.blob.sha256,
        sha=trace.blob.sha256 if trace is not None else "",
    )
    assert _named() == [
        (
            "TABLE_REQUEST",
            "governance_request",
            str(row.id),
            f"{LABEL[name]} request {row.id} {says}",
        )
    ]


@pytest.mark.parametrize("name", sorted(DETAIL))
def test_a_detail_row_deleted_underneath_is_named(name):
    _filed, _vote, row = _voted(name)
    with unguarded(DETAIL[name]):
        _sql(
            f"DELETE FROM {DETAIL[name]} WHERE governedrequest_ptr_id = %s",  # noqa: S608
            [_row_id(row.id)],
        )

    assert _named() == [
        (
            "TABLE_REQUEST",
            "governance_request",
            str(row.id),
            f"ledger event {row.request_event_id} filed {LABEL[name]} request {row.id}, which "
            "is not in the table",
        ),
        (
            "TABLE_REQUEST",
            "governance_request",
            str(row.id),
            f"{name} request {row.id} is in the table but has no {DETAIL[name]} row",
        ),
    ]


@pytest.mark.parametrize("name", sorted(DETAIL))
def test_a_detail_row_inserted_underneath_is_named(name):
    _filed, _vote, row = _voted(name)
    forged = uuid.uuid4()
    first = _first_event()
    _sql(
        "INSERT INTO governance_request (id, kind, subject, payload, reason, state, created_at,"
        " request_event_id, requested_by_id, expires_at) SELECT %s, kind, subject, payload,"
        " reason, 'pending', created_at, %s, requested_by_id, expires_at"
        " FROM governance_request WHERE id = %s",
        [_row_id(forged), first.seq, _row_id(row.id)],
    )
    columns = {
        "force-continue": "run_id, step, divergence_digest",
        "production-replay": "trace_id",
        "role-grant": "user_id, roles",
    }[name]
    _sql(
        f"INSERT INTO {DETAIL[name]} (governedrequest_ptr_id, {columns}) "  # noqa: S608
        f"SELECT %s, {columns} FROM {DETAIL[name]} WHERE governedrequest_ptr_id = %s",
        [_row_id(forged), _row_id(row.id)],
    )

    assert _named() == [
        (
            "TABLE_REQUEST",
            "governance_request",
            str(forged),
            f"{LABEL[name]} request {forged} is in the table but no ledger event filed it",
        )
    ]
