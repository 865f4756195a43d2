"""One inbox for every kind of governed request: the count in the navigation, the page and
``GET /api/inbox/`` list what waits for the signed-in person's signature, decided by each
kind's own refusal functions (never the filer, only the right role per the ledger, once)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from console.views.inbox import MESSAGE_NOTHING_WAITS, MESSAGE_SIGNS_NOTHING
from core.ledger import signing
from core.ledger.codes import GovernanceError
from core.ledger.requests import (
    ENTRY_POINT_GROUP,
    KindCodes,
    KindRegistry,
    OpenRequest,
    load_entry_points,
    needs_in_words,
)
from dsr import services as dsr_services
from governance import membership
from governance import services as gov
from governance.requests import builtin, inbox
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


def _signed(payload: dict[str, Any], key: Any, private: bytes) -> dict[str, Any]:
    return signing.signed_document(payload=payload, key_id=key.key_id, private_raw=private)


# --- one case per kind: how it is filed and how one signature is added ----------------------


def _fc_file(world: Any) -> Any:
    return gov.force_continue_request_file(
        run=world.replayed("diverged"), actor=persona("alice"), reason="known drift"
    )


def _fc_sign(request: Any, user: Any, key: Any, private: bytes) -> None:
    payload = gov.force_continue_payload_for(
        request=request, decision=signing.APPROVE, role=signing.ROLE_COUNCIL
    )
    gov.approval_record(request=request, approver=user, document=_signed(payload, key, private))


def _production_file(world: Any) -> Any:
    return gov.production_replay_request_file(
        trace=world.replayed("ok").trace, actor=persona("alice"), reason="recovery drill"
    )


def _production_sign(request: Any, user: Any, key: Any, private: bytes) -> None:
    payload = gov.production_replay_payload_for(request=request, decision=signing.APPROVE)
    gov.production_replay_approval_record(
        request=request, approver=user, document=_signed(payload, key, private)
    )


def _grant_file(world: Any) -> Any:
    return gov.user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["legal", "council"], reason="elected"
    ).grant


def _grant_sign(request: Any, user: Any, key: Any, private: bytes) -> None:
    payload = gov.role_grant_payload_for(request=request, decision=signing.APPROVE)
    gov.role_grant_approval_record(
        request=request, approver=user, document=_signed(payload, key, private)
    )


def _halt_file(world: Any) -> Any:
    trace = world.ingest("missing_snapshot")  # a trace id no other case replays
    _incident, halt = gov.security_incident_declare(
        actor=persona("adam"), reason="key leaked", trace=trace.blob.sha256
    )
    return halt


def _halt_sign(halt: Any, user: Any, key: Any, private: bytes) -> None:
    payload = gov.halt_clear_payload_for(halt=halt, reason="rotated")
    gov.halt_clear_approval_record(
        halt_seq=halt.seq, approver=user, document=_signed(payload, key, private)
    )


def _legal_file(kind: str) -> Callable[[Any], Any]:
    def file(world: Any) -> Any:
        legal = dsr_services.legal_request_open(
            actor=persona("lena"),
            identifiers=["Jane.Doe@Example.com"],
            kind=kind,
            legal_basis="GDPR Art. 15 and 17",
        )
        return dsr_services.legal_request_identity_verify(
            request=legal, actor=persona("lena"), method="passport checked by video call"
        )

    return file


def _legal_sign(purpose: str) -> Callable[..., None]:
    def sign(legal: Any, user: Any, key: Any, private: bytes) -> None:
        payload = dsr_services.approval_payload_for(request=legal, purpose=purpose)
        dsr_services.legal_request_approve(
            request=legal, purpose=purpose, approver=user, document=_signed(payload, key, private)
        )

    return sign


@dataclass
class Case:
    kind: str
    file: Callable[[Any], Any]
    sign: Callable[..., None]
    filer: str  # A: filed it, never sees it
    signer: str  # B: the right role
    outsider: str  # C: a role that does not sign it
    needs_before: str
    needs_after: str | None  # None: one signature decides it

    @property
    def capacity(self) -> str:
        """The role the signer signs in (the legal approvals: admin, DSR_APPROVAL_BY)."""
        return "admin" if self.kind.startswith("legal-") else "council"


CASES = [
    Case(
        "force-continue",
        _fc_file,
        _fc_sign,
        "alice",
        "cora",
        "lena",
        "1 more admin signature and 2 more council signatures",
        "1 more admin signature and 1 more council signature",
    ),
    Case(
        "production-replay",
        _production_file,
        _production_sign,
        "alice",
        "cora",
        "adam",
        "2 more council signatures",
        "1 more council signature",
    ),
    Case(
        "role-grant",
        _grant_file,
        _grant_sign,
        "adam",
        "cora",
        "vera",
        "2 more council signatures",
        "1 more council signature",
    ),
    Case(
        "halt-clear",
        _halt_file,
        _halt_sign,
        "adam",
        "cora",
        "alice",
        "2 more council signatures",
        "1 more council signature",
    ),
    Case(
        "legal-release",
        _legal_file("access"),
        _legal_sign(signing.DSR_RELEASE),
        "lena",
        "adam",
        "cora",
        "1 more admin signature",
        None,
    ),
    Case(
        "legal-erasure",
        _legal_file("erasure"),
        _legal_sign(signing.DSR_ERASURE),
        "lena",
        "adam",
        "cora",
        "1 more admin signature",
        None,
    ),
]


@pytest.fixture
def world(signers, ingest, replayed, member_key):
    """Every persona exists, roles in the ledger, before anything is filed (a signature
    counts only in a role held before its request was filed)."""
    for name in ("alice", "lena", "vera"):
        persona(name)
    return SimpleNamespace(ingest=ingest, replayed=replayed, member_key=member_key)


def listed(name: str, kind: str | None = None) -> list[dict[str, Any]]:
    from tests.console.personas import client_for

    response = client_for(name).get("/api/inbox/")
    assert response.status_code == 200, response.content
    return [item for item in response.json() if kind is None or item["kind"] == kind]


def nav_count(name: str) -> int | None:
    from tests.console.personas import client_for

    body = client_for(name).get("/inbox/").content.decode()
    found = re.search(r'id="nav-inbox"[^>]*>Inbox \((\d+)\)</a>', body)
    return int(found.group(1)) if found else None


def test_every_built_in_and_installed_kind_has_a_case():
    assert builtin.kinds().names() == [case.kind for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_a_request_waits_for_the_right_role_only_until_they_signed(world, case):
    filed = case.file(world)

    mine = listed(case.signer, case.kind)
    assert [(i["subject"], i["filed_by"], i["needs"]) for i in mine] == [
        (mine[0]["subject"], case.filer, case.needs_before)
    ]
    assert mine[0]["url"] == _approval_url(case.kind, filed)
    assert nav_count(case.signer) == 1
    assert listed(case.filer, case.kind) == []
    assert listed(case.outsider, case.kind) == []

    key, private = world.member_key(case.signer)
    case.sign(filed, persona(case.signer), key, private)
    _voted_on_one_governed_request(case, filed)

    assert listed(case.signer, case.kind) == []
    assert nav_count(case.signer) == 0
    # the inbox's reason is the signing's own: a second signature, with another key, is
    # refused with the very error the kind's refusal gives for leaving it out
    kind = builtin.kinds().get(case.kind)
    assert kind is not None
    now = timezone.now()
    (still_open,) = [o for o in kind.open_requests(now=now) if o.key == _key_of(filed)]
    signer = persona(case.signer)
    why = kind.refusal(
        still_open,
        user=signer,
        role=case.capacity,
        now=now,
        history=membership.roles_history(signer),
    )
    other_key, other_private = world.member_key(case.signer)
    with pytest.raises(GovernanceError) as refused:
        case.sign(_reread(filed), signer, other_key, other_private)
    assert isinstance(why, GovernanceError)
    assert (why.code, str(why)) == (refused.value.code, str(refused.value))
    colleague = "colin" if case.signer == "cora" else "sam"
    others = listed(colleague, case.kind)
    if case.needs_after is None:
        assert others == []
    else:
        assert [i["needs"] for i in others] == [case.needs_after]


def _voted_on_one_governed_request(case: Case, filed: Any) -> None:
    """Every kind's vote is one ``Vote`` row on one ``GovernedRequest`` of that kind, whose
    payload is what its filing (or opening) event signed, and every row agrees with the
    ledger."""
    from governance import ledger
    from governance.models import GovernanceEvent, Vote

    (vote,) = Vote.objects.filter(approver=persona(case.signer)).select_related("request")
    request = vote.request
    assert request.kind == case.kind
    assert request.payload == GovernanceEvent.objects.get(seq=request.request_event_id).payload
    if hasattr(filed, "governedrequest_ptr_id"):  # a kind with its detail table: the same id
        assert request.pk == filed.pk
    else:  # a halt (its seq) or a legal request (its id)
        assert request.subject == _key_of(filed)
    assert ledger.tables_check() == []


PINNED_CODES = {
    "force-continue": (
        "FORCE_CONTINUE_REQUEST",
        "FORCE_CONTINUE_APPROVAL",
        "FORCE_CONTINUE_APPROVED",
        "FORCE_CONTINUE_REJECTED",
    ),
    "production-replay": (
        "PRODUCTION_REPLAY_REQUEST",
        "PRODUCTION_REPLAY_APPROVAL",
        "PRODUCTION_REPLAY_APPROVED",
        "PRODUCTION_REPLAY_REJECTED",
    ),
    "role-grant": (
        "ROLE_GRANT_REQUEST",
        "ROLE_GRANT_APPROVAL",
        "ROLE_GRANT_APPROVED",
        "ROLE_GRANT_REJECTED",
    ),
    "halt-clear": ("FORCE_HALT_REPLAY", "HALT_CLEAR_APPROVAL", "FORCE_HALT_CLEAR", None),
    "legal-release": ("DSR_OPENED", "DSR_APPROVAL", None, None),
    "legal-erasure": ("DSR_OPENED", "DSR_APPROVAL", None, None),
}


@pytest.mark.parametrize("name", sorted(PINNED_CODES))
def test_each_kind_keeps_its_ledger_event_types(name):
    """Pinned before the one request model: the event types each kind files, votes and
    decides with (the ledger's codes never change with the tables)."""
    kind = builtin.kinds().get(name)
    assert kind is not None
    found = kind.codes
    assert (found.filed, found.vote, found.approved, found.rejected) == PINNED_CODES[name]


def _key_of(filed: Any) -> str:
    return str(getattr(filed, "id", None) or filed.seq)


def _reread(filed: Any) -> Any:
    return type(filed).objects.get(pk=filed.pk)


def _approval_url(kind: str, filed: Any) -> str:
    return {
        "force-continue": f"/requests/force-continue/{getattr(filed, 'id', '')}/",
        "production-replay": f"/requests/production-replay/{getattr(filed, 'id', '')}/",
        "role-grant": f"/requests/role-grant/{getattr(filed, 'id', '')}/",
        "halt-clear": f"/requests/halt-clear/{getattr(filed, 'seq', '')}/",
        "legal-release": f"/requests/legal-release/{getattr(filed, 'id', '')}/",
        "legal-erasure": f"/requests/legal-erasure/{getattr(filed, 'id', '')}/",
    }[kind]


def test_the_inbox_lists_every_kind_oldest_first_with_what_each_needs(world):
    from tests.console.personas import sign_in

    for case in CASES[:4]:
        case.file(world)
    page = sign_in(Client(), persona("cora")).get("/inbox/").content.decode()
    kinds = re.findall(r'<tr data-kind="([a-z-]+)">', page)
    assert kinds == ["force-continue", "production-replay", "role-grant", "halt-clear"]
    assert "Inbox (4)" in page
    assert "2 more council signatures" in page
    assert listed("cora") == sorted(listed("cora"), key=lambda i: i["filed_at"])


def test_a_force_continue_waits_for_an_admin_until_one_signed_and_for_the_council_after(world):
    """Its admin signature and its council signatures are counted apart: once an admin signed,
    another admin's signature is no longer needed, while the council's still are."""
    request = _fc_file(world)
    assert [(i["capacities"], i["needs"]) for i in listed("adam")] == [
        (["admin"], "1 more admin signature and 2 more council signatures")
    ]
    key, private = world.member_key("adam")
    payload = gov.force_continue_payload_for(
        request=request, decision=signing.APPROVE, role=signing.ROLE_ADMIN
    )
    gov.approval_record(
        request=request, approver=persona("adam"), document=_signed(payload, key, private)
    )
    sam = persona("sam")  # auditor and admin
    assert inbox.waiting_for(sam, roles=frozenset({"auditor", "admin"})) == []
    assert [i["needs"] for i in listed("cora")] == ["2 more council signatures"]


def test_a_halt_does_not_wait_for_the_admin_who_declared_it(world):
    """Four eyes on a halt clear: dora (admin and council) declares the incident, so its halt
    waits for the rest of the council, not for her, for the reason her signature is refused."""
    from tests.console.personas import make_user

    dora = make_user("dora", "admin", "council")
    trace = world.ingest("missing_snapshot")
    _incident, halt = gov.security_incident_declare(
        actor=dora, reason="key leaked", trace=trace.blob.sha256
    )

    assert listed("dora") == []
    assert nav_count("dora") == 0
    assert [i["url"] for i in listed("cora", "halt-clear")] == [_approval_url("halt-clear", halt)]
    kind = builtin.kinds().get("halt-clear")
    assert kind is not None
    now = timezone.now()
    (still_open,) = kind.open_requests(now=now)
    why = kind.refusal(
        still_open, user=dora, role="council", now=now, history=membership.roles_history(dora)
    )
    key, private = world.member_key("dora")
    with pytest.raises(GovernanceError) as refused:
        _halt_sign(halt, dora, key, private)
    assert isinstance(why, GovernanceError)
    assert (why.code, str(why)) == (refused.value.code, str(refused.value))
    assert (why.code, why.message) == (
        "APPROVAL_SELF",
        gov.HALT_CLEAR_SELF_MESSAGE.format(user="dora", halt=halt.seq),
    )


def test_legal_approvals_wait_for_the_council_where_the_setting_says_so(world, settings):
    settings.DSR_APPROVAL_BY = "council"
    _legal_file("erasure")(world)
    assert listed("adam") == []
    assert [(i["kind"], i["needs"]) for i in listed("cora")] == [
        ("legal-erasure", "2 more council signatures")
    ]


def test_someone_whose_roles_sign_nothing_sees_a_sentence_and_no_count(world):
    from tests.console.personas import client_for

    _fc_file(world)
    page = client_for("vera").get("/inbox/").content.decode()
    assert MESSAGE_SIGNS_NOTHING.format(roles="viewer") in page
    assert 'id="nav-inbox"' not in page
    assert client_for("vera").get("/api/inbox/").json() == []


def test_a_signer_with_nothing_waiting_sees_a_zero_count_and_a_sentence(world):
    from tests.console.personas import client_for

    page = client_for("cora").get("/inbox/").content.decode()
    assert "Inbox (0)" in page
    assert MESSAGE_NOTHING_WAITS in page


def test_an_expired_request_no_longer_waits(world):
    from datetime import timedelta

    from django.utils import timezone

    request = gov.production_replay_request_file(
        trace=world.replayed("ok").trace,
        actor=persona("alice"),
        reason="drill",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    assert len(listed("cora", "production-replay")) == 1
    found = inbox.waiting_for(
        persona("cora"),
        roles=frozenset({"council"}),
        now=request.expires_at + timedelta(seconds=1),
    )
    assert found == []


def test_a_council_member_granted_after_the_filing_is_not_asked(world):
    """The role must be held, per the ledger, before the request was filed."""
    from tests.console.personas import make_user

    request = _production_file(world)
    late = make_user("late", "council")
    assert inbox.waiting_for(late, roles=frozenset({"council"})) == []
    kind = builtin.kinds().get("production-replay")
    assert kind is not None
    (open_request,) = kind.open_requests(now=request.created_at)
    refusal = kind.refusal(
        open_request, user=late, role="council", now=request.created_at, history=()
    )
    assert isinstance(refusal, GovernanceError)
    assert refusal.code == "APPROVAL_ROLE"
    assert str(refusal) == (
        f"APPROVAL_ROLE: late signed as council but, per the ledger, did not hold the council "
        f"role before request {request.id} was filed (seq {request.request_event_id})"
    )


def test_anonymous_visitors_are_sent_to_sign_in_and_api_clients_get_401(client):
    page = client.get("/inbox/")
    assert page.status_code == 302
    assert page["Location"].startswith("/accounts/login/?next=/inbox/")
    api = client.get("/api/inbox/")
    assert api.status_code == 401
    assert api.json()["error_code"] == "NOT_AUTHENTICATED"


# --- cost: a handful of queries whatever the number of open requests ------------------------


class Counted:
    """Counts the SQL statements run inside it, across test-client requests too (Django
    resets ``connection.queries`` when a request starts)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)

    def __enter__(self) -> Counted:
        self._wrapped = connection.execute_wrapper(self)
        self._wrapped.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._wrapped.__exit__(*exc)


def _file_more(world: Any) -> None:
    """One more open request of each council kind, from other people and on other subjects."""
    _fc_file(world)
    gov.production_replay_request_file(
        trace=world.replayed("ok").trace, actor=persona("sam"), reason="second drill"
    )
    gov.user_roles_change(
        actor=persona("adam"), user=persona("vera"), roles=["viewer", "council"], reason="x"
    )
    gov.security_incident_declare(
        actor=persona("adam"),
        reason="second leak",
        trace=world.ingest("missing_output").blob.sha256,
    )


def test_the_council_count_costs_the_same_queries_for_one_or_many_requests(
    world, django_assert_num_queries
):
    from governance import membership

    council = frozenset({"council"})
    for case in CASES[:4]:
        case.file(world)
    cora = persona("cora")
    membership.roles_held(cora)  # as on a page: the layout has read her roles already
    assert len(inbox.waiting_for(cora, roles=council)) == 4
    # 1 role history; per council kind: its rows, their filings, their votes; halts: the
    # active halts (their clears a subquery), their votes
    with django_assert_num_queries(12):
        inbox.waiting_for(cora, roles=council)
    _file_more(world)
    assert len(inbox.waiting_for(cora, roles=council)) == 8
    with django_assert_num_queries(12):
        inbox.waiting_for(cora, roles=council)


def test_every_page_pays_the_same_for_its_count_however_many_requests_wait(world):
    from tests.console.personas import client_for

    for case in CASES[:4]:
        case.file(world)
    client = client_for("cora")
    with Counted() as four:
        body = client.get("/governance/keys/").content.decode()
    assert "Inbox (4)" in body
    _file_more(world)
    with Counted() as eight:
        body = client.get("/governance/keys/").content.decode()
    assert "Inbox (8)" in body
    assert eight.n == four.n
    with Counted() as fragment:  # an htmx fragment does not draw the layout: no count
        client.get("/governance/verification/", HTTP_HX_REQUEST="true")
    with Counted() as page:
        client.get("/governance/verification/")
    # the count's 12, and the witness alerts the layout shows council and admins
    assert page.n - fragment.n == 12 + 1


def test_the_inbox_page_lists_once_and_its_count_reads_that_list(world, monkeypatch):
    from tests.console.personas import client_for

    for case in CASES[:4]:
        case.file(world)
    calls = []
    real = inbox.waiting_for

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(inbox, "waiting_for", counted)
    client = client_for("cora")
    assert "Inbox (4)" in client.get("/inbox/").content.decode()
    assert len(calls) == 1
    assert "Inbox (4)" in client.get("/governance/keys/").content.decode()
    assert len(calls) == 2


# --- the registry: built-ins in one place, others through the entry-point group ---------------


class ToyKind:
    """A third-party kind: one open request, signable by any admin."""

    name = "toy"
    label = "Toy"
    codes = KindCodes(filed="ROLES_CHANGED", vote="ROLES_CHANGED")
    summary = "a toy"

    def signer_roles(self):
        return frozenset({"admin"})

    def quorum(self):
        return "1 admin signature"

    def capacities(self, open_request):
        return {"admin": "manage"}

    def open_requests(self, *, now):
        return [
            OpenRequest(
                kind=self.name,
                key="1",
                subject="a toy",
                filed_by="x",
                filed_at=now,
                url="/toy/1/",
                request=None,
            )
        ]

    def refusal(self, open_request, *, user, role, now, history):
        return None

    def needed(self, open_request):
        return {"admin": 1}


def test_an_installed_package_adds_a_kind_through_the_entry_point_group(world):
    registry = KindRegistry()
    builtin.register(registry)
    ep = SimpleNamespace(
        name="toy", group=ENTRY_POINT_GROUP, load=lambda: lambda r: r.register(ToyKind())
    )
    assert load_entry_points(registry, [ep]) == ["toy"]
    assert registry.names()[-1] == "toy"
    found = inbox.waiting_for(persona("adam"), roles=frozenset({"admin"}), registry=registry)
    assert [(w.kind, w.needs, w.capacities) for w in found] == [
        ("toy", "1 more admin signature", ("admin",))
    ]
    with pytest.raises(ValueError, match="request kind 'toy' is already registered"):
        registry.register(ToyKind())


def test_the_installed_dsr_kinds_come_through_the_entry_point():
    from importlib.metadata import entry_points

    assert [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)] == [
        "dsr.request_kinds:register"
    ]


def test_needs_in_words():
    assert needs_in_words({"admin": 1, "council": 2}) == (
        "1 more admin signature and 2 more council signatures"
    )
    assert needs_in_words({"admin": 0, "council": 1}) == "1 more council signature"
    assert needs_in_words({}) == "nothing more"


def test_a_legal_request_waiting_costs_the_queries_of_its_own_refusal(world):
    """The legal kinds ask dsr.services.approval_refusal and approval_status, which read one
    request at a time, and read the approvals from the signed ledger events (dsr.signed): each
    legal approval waiting for someone costs five queries more."""
    from governance import membership

    adam = persona("adam")
    membership.roles_held(adam)
    admin = frozenset({"admin"})
    _legal_file("access")(world)
    with Counted() as one:
        assert len(inbox.waiting_for(adam, roles=admin)) == 1
    _legal_file("access")(world)
    with Counted() as two:
        assert len(inbox.waiting_for(adam, roles=admin)) == 2
    # her role history, the open force-continues (none: no filings or votes to read), the
    # open legal requests of each purpose, then the five of the one waiting (its refusal's
    # checks and the quorum read from its DSR_OPENED and DSR_APPROVAL events)
    assert (one.n, two.n - one.n) == (9, 5)


@pytest.mark.parametrize("name", [case.kind for case in CASES])
def test_each_kind_names_its_ledger_codes_and_roles_from_the_one_tables(name):
    from core.ledger import codes
    from core.ledger import roles as matrix

    kind = builtin.kinds().get(name)
    assert kind is not None
    named = [kind.codes.filed, kind.codes.vote, kind.codes.approved, kind.codes.rejected]
    assert {c for c in named if c is not None} <= set(codes.BY_NAME)
    assert kind.codes.announced_by in codes.BY_NAME
    capacities = kind.capacities(None)  # type: ignore[arg-type]
    assert capacities
    for role, action in capacities.items():
        assert role in matrix.ROLES
        assert role in matrix.MATRIX[action]
    assert kind.signer_roles() == frozenset(capacities)
    assert kind.summary
    assert kind.quorum().endswith("signature(s)")
