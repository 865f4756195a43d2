"""governance 0010 and dsr 0003 carry today's rows over: every council request keeps its id
(now a ``governance_request`` row plus its detail row), every approval becomes a vote with its
id, a halt with votes gets a ``halt-clear`` request, a legal request's approvals become votes on
its ``legal-<purpose>`` request; and the vote table refuses UPDATE and DELETE afterwards."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from replay.dbguards import drop_append_only_sql

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

BEFORE = [("governance", "0009_witness_cosignatures"), ("dsr", "0002_approval_release_append_only")]
AFTER = [("governance", "0010_governed_request_and_vote"), ("dsr", "0003_approvals_are_votes")]
GUARDED = (
    "governance_vote",
    "governance_request",
    "governance_forcecontinuerequest",
    "governance_productionreplayrequest",
    "governance_rolegrantrequest",
)
WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _event(apps, seq: int, code: int, type_: str, payload: dict, *, actor=None):
    return apps.get_model("governance", "GovernanceEvent").objects.create(
        seq=seq,
        code=code,
        type=type_,
        created_at=WHEN,
        actor=actor,
        actor_label=actor.username if actor else "system",
        payload=payload,
        server_key_id="server-1",
        actor_key_id="k" if actor else None,
        actor_signature="ab" * 64 if actor else None,
        prev_hash="",
        hash=f"sha256:{seq:064x}",
        server_signature="cd" * 64,
    )


@pytest.fixture
def old_rows():
    from core.ledger import codes

    apps = _migrate(BEFORE)
    User = apps.get_model("auth", "User")
    adam, carol, lena = (User.objects.create(username=n) for n in ("adam", "carol", "lena"))
    key = apps.get_model("governance", "MemberKey").objects.create(
        key_id="k", user=carol, public_key="00" * 32, fingerprint="sha256:k", registered_at=WHEN
    )
    filed = _event(apps, 1, codes.code_of(codes.ROLE_GRANT_REQUEST), "ROLE_GRANT_REQUEST", {})
    grant_id = uuid.uuid4()
    apps.get_model("governance", "RoleGrantRequest").objects.create(
        id=grant_id,
        reason="on call",
        requested_by=adam,
        expires_at=WHEN,
        state="pending",
        created_at=WHEN,
        request_event=filed,
        user=lena,
        roles=["council"],
    )
    halt = _event(
        apps, 2, codes.code_of(codes.FORCE_HALT_REPLAY), "FORCE_HALT_REPLAY", {"reason": "bad"}
    )
    opened = _event(apps, 3, codes.code_of(codes.DSR_OPENED), "DSR_OPENED", {"kind": "erasure"})
    legal = apps.get_model("dsr", "LegalRequest").objects.create(
        kind="erasure",
        legal_basis="Art. 17",
        due_date=WHEN.date(),
        requested_by=lena,
        opened_event=opened,
    )
    Approval = apps.get_model("governance", "Approval")
    votes = {
        "grant": Approval.objects.create(
            role_grant_id=grant_id,
            approver=carol,
            role="council",
            key=key,
            decision="approve",
            payload={"request_id": str(grant_id)},
            signature="ef" * 64,
            event=_event(apps, 4, 1, "ROLE_GRANT_APPROVAL", {}, actor=carol),
            created_at=WHEN,
        ).id,
        "halt": Approval.objects.create(
            halt=halt,
            approver=carol,
            role="council",
            key=key,
            decision="approve",
            payload={"halt_seq": 2},
            signature="ef" * 64,
            event=_event(apps, 5, 1, "HALT_CLEAR_APPROVAL", {}, actor=carol),
            created_at=WHEN,
        ).id,
    }
    apps.get_model("dsr", "DsrApproval").objects.create(
        request=legal,
        purpose="erasure",
        approver=adam,
        role="admin",
        key=key,
        payload={"purpose": "erasure", "reason": "ok"},
        signature="12" * 64,
        event=_event(apps, 6, 1, "DSR_APPROVAL", {}, actor=adam),
        created_at=WHEN,
    )
    yield grant_id, legal.id, votes
    _migrate(AFTER)
    with connection.cursor() as cur:  # the migration put the guards back: lift them to flush
        for table in GUARDED:
            for sql in drop_append_only_sql(connection.vendor, table):
                cur.execute(sql)


def test_every_request_and_vote_is_carried_over(old_rows):
    grant_id, legal_id, votes = old_rows

    apps = _migrate(AFTER)

    Request = apps.get_model("governance", "GovernedRequest")
    rows = {
        r.kind: (r.subject, r.request_event_id, r.state, r.reason) for r in Request.objects.all()
    }
    lena = apps.get_model("auth", "User").objects.get(username="lena")
    assert rows == {
        "role-grant": (str(lena.pk), 1, "pending", "on call"),
        "halt-clear": ("2", 2, "pending", "bad"),
        "legal-erasure": (str(legal_id), 3, "pending", "Art. 17"),
    }
    assert Request.objects.get(kind="role-grant").id == grant_id
    grant = apps.get_model("governance", "RoleGrantRequest").objects.get()
    assert (grant.pk, grant.roles, grant.user_id) == (grant_id, ["council"], lena.pk)
    Vote = apps.get_model("governance", "Vote")
    by_kind = {v.request.kind: (v.id, v.event_id) for v in Vote.objects.all()}
    assert by_kind["role-grant"] == (votes["grant"], 4)
    assert by_kind["halt-clear"] == (votes["halt"], 5)
    assert by_kind["legal-erasure"][1] == 6
    assert Vote.objects.get(event_id=6).reason == "ok"
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Vote.objects.filter(event_id=6).update(reason="forged")
