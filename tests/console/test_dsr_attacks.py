"""Issue 19's attacks on legal-request approvals, exactly as described, refused:

* a release approval covers exactly what is released: after an admin's release approval, a
  release of another field (event 2 ``/user/name``, "Alan Turing") is refused, and no bundle
  hands over a value the approval did not sign;
* an erasure approval signs the exact plan; a plan that changed since is refused, named;
* one raw ``INSERT INTO governance_vote`` for a request with no identity check and no
  approval, then ``manage.py dsr erase``: refused, nothing destroyed, and ``governance
  verify`` and the checkpoint check name the row;
* approval and release rows are append-only in the database, and a row rewritten with the
  guard dropped is named by ``governance verify``.

Runs on whichever database is configured (SQLite by default, PostgreSQL with DATABASE_URL).
"""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from core import bundle
from core.canonical import jcs
from core.ledger import codes, signing
from dsr import access, services
from dsr.models import DsrRelease, LegalRequest
from governance.models import GovernanceEvent, Vote
from privacy import subjects
from replay.dbguards import drop_append_only_sql
from tests.console.personas import client_for, persona

pytestmark = pytest.mark.django_db

ALAN = "alan.turing@example.org"
ALAN_NAME = "Alan Turing"


def opened(kind: str, *, verify: bool = True) -> LegalRequest:
    legal = services.legal_request_open(
        actor=persona("lena"), identifiers=[ALAN], kind=kind, legal_basis="GDPR Art. 15 and 17"
    )
    if verify:
        legal = services.legal_request_identity_verify(
            request=legal, actor=persona("lena"), method="passport seen on a video call"
        )
    return legal


def approve(legal: LegalRequest, purpose: str, member_key) -> Vote:
    key, private = member_key("adam")
    payload = services.approval_payload_for(request=legal, purpose=purpose)
    return services.legal_request_approve(
        request=legal,
        purpose=purpose,
        approver=persona("adam"),
        document={
            "payload": payload,
            "key_id": key.key_id,
            "signature": signing.sign(private, jcs(payload)),
        },
    )


def field(legal: LegalRequest, path: str, trace_pk: int) -> dict:
    hit = next(
        h
        for h in access.subjects_port.find(legal.subject_refs)
        if (h.location, h.path, h.trace_pk) == ("event 2", path, trace_pk)
    )
    return {
        "subject_ref": hit.subject_ref,
        "trace_pk": hit.trace_pk,
        "location": hit.location,
        "path": hit.path,
        "reason": "the subject asked for it",
    }


def release_api(legal: LegalRequest, body: dict):
    return client_for("adam").post(
        reverse("api-legal-request-release", args=[legal.id]), body, content_type="application/json"
    )


def built(legal: LegalRequest, capture) -> bytes:
    with capture(execute=True):
        assert client_for("lena").post(reverse("dsr-bundle", args=[legal.id])).status_code == 303
    legal.refresh_from_db()
    assert legal.bundle_state == access.DONE, legal.bundle_error
    return access.bundle_path(legal).read_bytes()


def released_values(data: bytes) -> list[dict]:
    return [
        {**v, "file": member["file_sha256"]}
        for name, member in sorted(bundle.read_members(data).items())
        if name.endswith("/data.json")
        for v in member["subject_values"]
        if v["released"]
    ]


def verify_json() -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command("governance", "verify", "--json", stdout=out)
    except SystemExit as exited:
        return int(exited.code), json.loads(out.getvalue())
    return 0, json.loads(out.getvalue())


def drop_guard(table: str) -> None:
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, table):
            cur.execute(sql)


_INSERT_REQUEST_SQL = (
    "INSERT INTO governance_request (id, kind, subject, payload, reason, requested_by_id, "
    "state, created_at, request_event_id) VALUES (%s, %s, %s, {json}, '', %s, 'pending', %s, %s)"
)
_INSERT_APPROVAL_SQL = (
    "INSERT INTO governance_vote (request_id, approver_id, role, key_id, decision, reason, "
    "payload, signature, event_id, created_at) "
    "VALUES (%s, %s, %s, %s, 'approve', '', {json}, %s, %s, %s)"
)
#: the raw inserts per vendor (PostgreSQL takes the JSON text as jsonb)
_JSON = {"sqlite": "%s", "postgresql": "CAST(%s AS jsonb)"}


def _uuid(value) -> object:
    return LegalRequest._meta.pk.get_db_prep_value(value, connection)


# --- 1. a release approval covers exactly what is released -------------------------------------


@pytest.fixture
def traces(ingest, signers):
    return [ingest("ok"), ingest("diverged")]


def test_a_release_of_a_field_the_approval_did_not_sign_is_refused_and_never_handed_over(
    traces, member_key, django_capture_on_commit_callbacks
):
    legal = opened("access")
    email = field(legal, "/user/email", traces[0].pk)
    assert release_api(legal, email).status_code == 201
    approval = approve(legal, signing.DSR_RELEASE, member_key)
    # the approval signed the one released value, by its place (no value in the payload)
    assert approval.event.payload["values"] == [
        {
            "subject": legal.subject_refs[0],
            "trace_id": traces[0].trace_id,
            "file_sha256": traces[0].blob.sha256,
            "location": "event 2",
            "path": "/user/email",
        }
    ]
    assert ALAN not in json.dumps(approval.event.payload)

    # the attack: another field, after the approval
    name = field(legal, "/user/name", traces[0].pk)
    before = GovernanceEvent.objects.count()
    refused = release_api(legal, name)

    assert refused.status_code == 409
    assert refused.json()["error_code"] == codes.DSR_RELEASE_NOT_APPROVED
    assert refused.json()["message"] == access.NOT_COVERED_MESSAGE.format(
        value=f"event 2 /user/name of {legal.subject_refs[0]} in trace {traces[0].trace_id}",
        count=1,
        request=legal.id,
        seqs=approval.event_id,
    )
    assert GovernanceEvent.objects.count() == before
    assert DsrRelease.objects.count() == 1
    # the request page offers no release any more, and refuses one posted anyway
    detail = client_for("adam").get(reverse("dsr-detail", args=[legal.id])).content.decode()
    assert 'id="release-signed"' in detail
    assert "release-form" not in detail
    page = client_for("adam").post(reverse("dsr-release", args=[legal.id]), name)
    assert page.status_code == 409
    assert codes.DSR_RELEASE_NOT_APPROVED in page.content.decode()

    # the rebuilt bundle hands over the approved value only, and the download serves it
    data = built(legal, django_capture_on_commit_callbacks)
    assert ALAN_NAME.encode() not in data
    assert [(v["path"], v["value"], v["file"]) for v in released_values(data)] == [
        ("/user/email", ALAN, "sha256:" + traces[0].blob.sha256)
    ]
    fetched = client_for("lena").get(reverse("api-legal-request-bundle-file", args=[legal.id]))
    assert fetched.status_code == 200
    assert fetched.content == data


def test_a_release_row_inserted_by_hand_reveals_nothing_and_is_named(
    traces, member_key, django_capture_on_commit_callbacks
):
    legal = opened("access")
    approve(legal, signing.DSR_RELEASE, member_key)  # approves releasing no value at all
    name = field(legal, "/user/name", traces[0].pk)
    assert release_api(legal, name).json()["error_code"] == codes.DSR_RELEASE_NOT_APPROVED
    with connection.cursor() as cur:  # inserting stays allowed by the guard
        cur.execute(
            "INSERT INTO dsr_dsrrelease (request_id, subject_ref, trace_pk, location, path, "
            "released_by_id, event_id, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                _uuid(legal.id),
                legal.subject_refs[0],
                traces[0].pk,
                "event 2",
                "/user/name",
                persona("adam").pk,
                legal.identity_event_id,
                legal.created_at,
            ],
        )
    row = DsrRelease.objects.get()

    data = built(legal, django_capture_on_commit_callbacks)
    assert ALAN_NAME.encode() not in data
    assert released_values(data) == []
    code, result = verify_json()
    assert code == 1
    assert result["tables"] == [
        {
            "code": codes.TABLE_RELEASE,
            "table": "dsr_dsrrelease",
            "row": str(row.id),
            "message": f"release row {row.id} has no ledger event (event "
            f"{legal.identity_event_id} is DSR_IDENTITY_VERIFIED)",
        }
    ]


def test_the_release_payload_is_pinned(traces, member_key):
    legal = opened("access")
    release_api(legal, field(legal, "/user/email", traces[0].pk))
    payload = services.approval_payload_for(request=legal, purpose=signing.DSR_RELEASE)
    ref = legal.subject_refs[0]
    assert jcs(payload).decode() == (
        f'{{"decision":"approve","due_date":"{legal.due_date.isoformat()}",'
        f'"identity_seq":{legal.identity_event_id},"kind":"access",'
        f'"legal_basis":"GDPR Art. 15 and 17","purpose":"release","reason":"",'
        f'"request_id":"{legal.id}","requested_by":"lena","role":"admin",'
        f'"subjects":["{ref}"],"type":"replay-audit-console/dsr-approval/v1",'
        f'"values":[{{"file_sha256":"{traces[0].blob.sha256}","location":"event 2",'
        f'"path":"/user/email","subject":"{ref}","trace_id":"{traces[0].trace_id}"}}]}}'
    )
    page = client_for("adam").get(reverse("request-detail", args=["legal-release", legal.id]))
    text = page.content.decode()
    assert 'id="release-values"' in text
    assert text.count('class="release-value"') == 1
    assert traces[0].blob.sha256 in text
    out = io.StringIO()
    call_command("dsr", "payload", str(legal.id), "--purpose", "release", stdout=out)
    assert out.getvalue().strip() == jcs(payload).decode()


# --- 2. an erasure approval signs the exact plan ------------------------------------------------


def test_an_erasure_whose_plan_changed_since_its_approval_is_refused_naming_the_change(
    ingest, signers, member_key
):
    first = ingest("ok")
    legal = opened("erasure")
    approval = approve(legal, signing.DSR_ERASURE, member_key)
    ref = legal.subject_refs[0]
    assert approval.event.payload["plan"] == {
        "subjects": [ref],
        "unknown": [],
        "already_erased": [],
        "traces": [
            {
                "trace_id": first.trace_id,
                "file_sha256": first.blob.sha256,
                "format": "replay-trace",
                "fields": ["event 2 /user/name", "event 2 /user/email"],
            }
        ],
        "fields": 2,
        "keys": 1,
    }
    later = ingest("diverged")  # the subject is in a trace stored after the approval

    before = GovernanceEvent.objects.count()
    refused = client_for("lena").post(reverse("api-legal-request-erasure", args=[legal.id]))

    assert refused.status_code == 409
    assert refused.json()["error_code"] == codes.DSR_PLAN_CHANGED
    assert refused.json()["message"] == access.PLAN_CHANGED_MESSAGE.format(
        request=legal.id,
        seq=approval.event_id,
        changes=f"trace {later.trace_id} (file {later.blob.sha256}) added with 2 field(s)",
    )
    assert GovernanceEvent.objects.count() == before
    assert subjects.identifier(ref) == ALAN  # nothing destroyed
    # the page that was signed shows the plan and its payload
    page = client_for("adam").get(reverse("request-detail", args=["legal-erasure", legal.id]))
    assert 'id="erasure-plan"' in page.content.decode()


# --- 3. approval rows are bound to the ledger ----------------------------------------------------


def _insert_approval(legal: LegalRequest, key) -> Vote:
    """One raw INSERT INTO governance_vote (and the governed request it needs): adam
    'approved' the erasure, citing the request's DSR_OPENED event."""
    request_id = uuid.uuid4()
    json_ = _JSON[connection.vendor]
    with connection.cursor() as cur:
        cur.execute(
            _INSERT_REQUEST_SQL.format(json=json_),
            [
                _uuid(request_id),
                "legal-erasure",
                str(legal.id),
                "{}",
                persona("lena").pk,
                legal.created_at,
                legal.opened_event_id,
            ],
        )
        cur.execute(
            _INSERT_APPROVAL_SQL.format(json=json_),
            [
                _uuid(request_id),
                persona("adam").pk,
                "admin",
                key.pk,
                json.dumps({"type": signing.DSR_APPROVAL_TYPE, "request_id": str(legal.id)}),
                "00" * 64,
                legal.opened_event_id,
                legal.created_at,
            ],
        )
    return Vote.objects.get()


def _erase(legal: LegalRequest) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("dsr", "erase", str(legal.id), "--user", "lena", stdout=out, stderr=err)
    except SystemExit as exited:
        return int(exited.code), err.getvalue().strip()
    return 0, out.getvalue()


def test_a_hand_inserted_approval_erases_nothing_and_verify_names_it(
    ingest, signers, member_key, tmp_path
):
    ingest("ok")
    legal = opened("erasure", verify=False)
    key, _private = member_key("adam")
    checkpoint = tmp_path / "head.json"
    call_command("governance", "checkpoint", "--out", str(checkpoint), stdout=io.StringIO())
    drop_guard("governance_vote")  # as an owner of the database could (an insert passes anyway)
    row = _insert_approval(legal, key)

    code, err = _erase(legal)

    assert (code, err) == (
        1,
        f"{codes.DSR_IDENTITY_UNVERIFIED}: "
        + services.IDENTITY_UNVERIFIED_MESSAGE.format(request=legal.id),
    )
    assert subjects.identifier(legal.subject_refs[0]) == ALAN
    assert not GovernanceEvent.objects.filter(code=codes.code_of(codes.DSR_ERASED)).exists()
    assert not services.approval_status(request=legal, purpose="erasure").complete
    named = {
        "code": codes.TABLE_APPROVAL,
        "table": "governance_vote",
        "row": str(row.id),
        "message": f"approval row {row.id} has no ledger event (event {legal.opened_event_id} "
        "is DSR_OPENED)",
    }
    # the request row the insert needed is named too: its payload is not its filing's
    request_named = {
        "code": codes.TABLE_REQUEST,
        "table": "governance_request",
        "row": str(row.request_id),
        "message": f"legal-erasure request {row.request_id}'s payload differs from its filing "
        f"event {legal.opened_event_id}'s",
    }
    status, result = verify_json()
    assert (status, result["ok"], result["broke_at"], result["tables"]) == (
        1,
        False,
        None,
        [request_named, named],
    )
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("governance", "check-checkpoint", str(checkpoint), "--json", stdout=out)
    assert exited.value.code == 1
    verdict = json.loads(out.getvalue())
    assert verdict["code"] == "CHECKPOINT_LEDGER_BROKEN"
    assert verdict["message"] == (f"a table disagrees with the ledger: {request_named['message']}")


def test_a_hand_inserted_approval_after_the_identity_check_still_counts_for_nothing(
    ingest, signers, member_key
):
    ingest("ok")
    legal = opened("erasure")
    key, _private = member_key("adam")
    _insert_approval(legal, key)

    code, err = _erase(legal)

    assert (code, err) == (
        1,
        f"{codes.DSR_STATE}: "
        + services.NOT_APPROVED_MESSAGE.format(
            purpose="erasure", request=legal.id, missing="1 admin approval(s)"
        ),
    )
    assert subjects.identifier(legal.subject_refs[0]) == ALAN


@pytest.mark.parametrize("table", ["governance_vote", "dsr_dsrrelease"])
@pytest.mark.parametrize(
    "statement", ["UPDATE {table} SET created_at = created_at", "DELETE FROM {table}"]
)
def test_approval_and_release_rows_are_append_only(table, statement, traces, member_key):
    legal = opened("both")
    release_api(legal, field(legal, "/user/email", traces[0].pk))
    approve(legal, signing.DSR_ERASURE, member_key)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute(statement.format(table=table))
    assert Vote.objects.count() == DsrRelease.objects.count() == 1


def test_a_rewritten_approval_or_release_row_is_named_by_verify(traces, member_key):
    legal = opened("both")
    release_api(legal, field(legal, "/user/email", traces[0].pk))
    approval = approve(legal, signing.DSR_ERASURE, member_key)
    release = DsrRelease.objects.get()
    assert verify_json()[0] == 0
    drop_guard("governance_vote")
    drop_guard("dsr_dsrrelease")
    with connection.cursor() as cur:
        cur.execute("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])
        cur.execute("UPDATE dsr_dsrrelease SET path = '/user/name' WHERE id = %s", [release.id])

    code, result = verify_json()

    assert code == 1
    assert result["tables"] == [
        {
            "code": codes.TABLE_APPROVAL,
            "table": "governance_vote",
            "row": str(approval.id),
            "message": f"approval row {approval.id} says decision deny, its ledger event "
            f"{approval.event_id} says approve",
        },
        {
            "code": codes.TABLE_RELEASE,
            "table": "dsr_dsrrelease",
            "row": str(release.id),
            "message": f"release row {release.id} says fields ['event 2 /user/name'], its "
            f"ledger event {release.event_id} says ['event 2 /user/email']",
        },
    ]
    # the quorum follows the ledger, not the rewritten row
    assert services.approval_status(request=legal, purpose="erasure").complete
    assert not services.approval_status(request=legal, purpose="release").complete


def test_deleted_approval_and_release_rows_are_named_missing(traces, member_key):
    legal = opened("both")
    release_api(legal, field(legal, "/user/email", traces[0].pk))
    approval = approve(legal, signing.DSR_ERASURE, member_key)
    release = DsrRelease.objects.get()
    drop_guard("governance_vote")
    drop_guard("dsr_dsrrelease")
    with connection.cursor() as cur:
        cur.execute("DELETE FROM governance_vote WHERE id = %s", [approval.id])
        cur.execute("DELETE FROM dsr_dsrrelease WHERE id = %s", [release.id])

    code, result = verify_json()

    assert code == 1
    assert result["tables"] == [
        {
            "code": codes.TABLE_APPROVAL_MISSING,
            "table": "governance_vote",
            "row": str(approval.event_id),
            "message": f"ledger event {approval.event_id} (DSR_APPROVAL) has no approval row",
        },
        {
            "code": codes.TABLE_RELEASE,
            "table": "dsr_dsrrelease",
            "row": str(release.event_id),
            "message": f"ledger event {release.event_id} (PII_REVEALED) has no release row",
        },
    ]
    # the approval still counts (the ledger says so); the release reveals nothing without a row
    assert services.approval_status(request=legal, purpose="erasure").complete
    assert access.revealable(legal) == set()


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="ALTER TABLE ... DISABLE TRIGGER")
def test_rows_rewritten_with_the_trigger_disabled_on_postgresql_are_named(traces, member_key):
    legal = opened("both")
    release_api(legal, field(legal, "/user/email", traces[0].pk))
    approval = approve(legal, signing.DSR_ERASURE, member_key)
    release = DsrRelease.objects.get()
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred foreign key checks pending
        for table in ("governance_vote", "dsr_dsrrelease"):
            cur.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        cur.execute("UPDATE governance_vote SET role = 'council' WHERE id = %s", [approval.id])
        cur.execute("DELETE FROM dsr_dsrrelease WHERE id = %s", [release.id])
        for table in ("governance_vote", "dsr_dsrrelease"):
            cur.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")

    code, result = verify_json()

    assert code == 1
    assert [(m["code"], m["table"], m["row"]) for m in result["tables"]] == [
        (codes.TABLE_APPROVAL, "governance_vote", str(approval.id)),
        (codes.TABLE_RELEASE, "dsr_dsrrelease", str(release.event_id)),
    ]
    assert services.approval_status(request=legal, purpose="erasure").complete


# --- approvals recorded before they signed what they cover --------------------------------------


def _recorded_before(legal: LegalRequest, purpose: str, member_key) -> Vote:
    """An approval as the console recorded it before approvals signed values or a plan."""
    from governance import ledger

    key, private = member_key("adam")
    payload = signing.dsr_approval_payload(
        request_id=str(legal.id),
        purpose=purpose,
        kind=legal.kind,
        subjects=list(legal.subject_refs),
        legal_basis=legal.legal_basis,
        due_date=legal.due_date.isoformat(),
        requested_by="lena",
        identity_seq=legal.identity_event_id,
        role="admin",
    )
    signature = signing.sign(private, jcs(payload))
    with transaction.atomic():
        event = ledger.append(
            event_type=codes.DSR_APPROVAL,
            payload=payload,
            actor=persona("adam"),
            actor_key_id=key.key_id,
            actor_signature=signature,
        )
        return Vote.objects.create(
            request=services._governed(legal, purpose, filed_seq=legal.opened_event_id),
            approver=persona("adam"),
            role="admin",
            decision=signing.APPROVE,
            key=key,
            payload=payload,
            signature=signature,
            event=event,
            created_at=event.created_at,
        )


def test_an_approval_recorded_before_the_lists_still_verifies_and_counts(traces, member_key):
    legal = opened("both")
    assert release_api(legal, field(legal, "/user/email", traces[0].pk)).status_code == 201
    old = _recorded_before(legal, signing.DSR_RELEASE, member_key)
    assert "values" not in old.payload

    assert verify_json()[0] == 0
    assert services.approval_status(request=legal, purpose="release").complete
    # it covers the releases the ledger held before it, and nothing after
    refused = release_api(legal, field(legal, "/user/name", traces[0].pk))
    assert refused.json()["error_code"] == codes.DSR_RELEASE_NOT_APPROVED
    erasure = _recorded_before(legal, signing.DSR_ERASURE, member_key)
    receipt = access.legal_request_erase(request=legal, actor=persona("lena"))
    assert receipt.payload["approval_seqs"] == [erasure.event_id]
    assert subjects.identifier(legal.subject_refs[0]) is None


def test_a_signed_approval_event_over_other_terms_does_not_count_and_is_named(
    ingest, signers, member_key
):
    """Even a DSR_APPROVAL in the ledger, signed by a confirmed admin key, counts only when
    its payload is the one the request's own events rebuild."""
    from governance import ledger

    ingest("ok")
    legal = opened("erasure")
    key, private = member_key("adam")
    payload = services.approval_payload_for(request=legal, purpose="erasure")
    payload["legal_basis"] = "consent"  # not what the DSR_OPENED event recorded
    with transaction.atomic():
        event = ledger.append(
            event_type=codes.DSR_APPROVAL,
            payload=payload,
            actor=persona("adam"),
            actor_key_id=key.key_id,
            actor_signature=signing.sign(private, jcs(payload)),
        )

    code, err = _erase(legal)

    assert (code, err) == (
        1,
        f"{codes.DSR_STATE}: "
        + services.NOT_APPROVED_MESSAGE.format(
            purpose="erasure", request=legal.id, missing="1 admin approval(s)"
        )
        + f"; DSR_APPROVAL seq {event.seq} does not count: its signed legal_basis differ(s) "
        "from the request's ledger events",
    )
    assert subjects.identifier(legal.subject_refs[0]) == ALAN


def test_a_requester_rewritten_in_the_request_row_still_cannot_approve(ingest, signers, member_key):
    ingest("ok")
    legal = services.legal_request_open(
        actor=persona("adam"), identifiers=[ALAN], kind="erasure", legal_basis="GDPR Art. 17"
    )
    legal = services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )
    LegalRequest.objects.filter(pk=legal.pk).update(requested_by=persona("lena"))
    legal.refresh_from_db()

    with pytest.raises(codes.GovernanceError) as refused:
        approve(legal, signing.DSR_ERASURE, member_key)

    assert refused.value.code == codes.DSR_SELF_APPROVAL
    assert refused.value.message == services.SELF_APPROVAL_MESSAGE.format(
        user="adam", request=legal.id, purpose="erasure"
    )
    assert not Vote.objects.exists()
