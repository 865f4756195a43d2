"""A toy kind of governed request (tests/toykind), installed through the entry-point group
``replay_console.request_kinds`` as a package would be, goes through the shared approval page,
the API and the inbox with no change to the console: filed, listed, refused, voted, approved.

It touches three files: its kind module (tests/toykind/kind.py), its body partial
(tests/toykind/templates/toykind/body.html) and this test. Its filings, votes and approvals
are ledger events of the types it brings (codes 1000-1002), which ``governance verify``
verifies and reconciles with its rows here, and with a raw SQL insert, update and delete of
them in ``tests/governance/test_every_table.py`` (which files it through this module's
``toy`` fixture)."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from core.canonical import jcs
from core.ledger import codes, signing
from core.ledger.requests import ENTRY_POINT_GROUP, KindRegistry, load_entry_points
from governance.models import GovernanceEvent
from governance.requests import builtin
from tests.console.personas import EVERYONE, persona
from tests.governance.test_ledger_tables import _verify

pytestmark = pytest.mark.django_db

TOY = EntryPoint(name="toy", value="tests.toykind.kind:register", group=ENTRY_POINT_GROUP)
TEMPLATES = Path(__file__).resolve().parents[1] / "toykind" / "templates"


@pytest.fixture
def toy(monkeypatch, settings, signers):
    """The console's kinds plus the toy, loaded from its entry point."""
    from tests.toykind import kind

    registry = KindRegistry()
    builtin.register(registry)
    load_entry_points(registry)  # what is installed: dsr's legal kinds
    assert load_entry_points(registry, [TOY]) == ["toy"]
    monkeypatch.setattr(builtin, "_default", registry)
    settings.TEMPLATES = [
        {**engine, "DIRS": [*engine.get("DIRS", []), TEMPLATES]} for engine in settings.TEMPLATES
    ]
    return kind.KIND


def signed(notice, toy, key, private, reason=""):
    payload = toy.payload_for(notice, decision="approve", role="council", reason=reason)
    return {
        "payload": json.dumps(payload),
        "key_id": key.key_id,
        "signature": signing.sign(private, jcs(payload)),
    }


def test_it_is_registered_from_its_entry_point(toy, as_persona):
    assert builtin.kinds().get("toy-notice") is toy
    names = [k["name"] for k in as_persona("vera").get("/api/requests/").json()]
    assert names[-1] == "toy-notice"


def test_filed_listed_voted_approved_through_the_page_and_the_api(toy, as_persona, member_key):
    notice = toy.file(actor=persona("adam"), text="the archive moves on Monday")
    cora = as_persona("cora")
    assert cora.get("/api/inbox/").json()[0]["kind"] == "toy-notice"
    assert [r["key"] for r in cora.get("/api/requests/toy-notice/").json()] == [notice.id]
    listed = cora.get("/requests/toy-notice/").content.decode()
    assert f'<tr class="awaits-me" data-key="{notice.id}">' in listed

    page = cora.get(f"/requests/toy-notice/{notice.id}/").content.decode()
    assert "<h1>Toy notice</h1>" in page
    assert '<dd id="toy-tally">0 of 2 council</dd>' in page
    assert 'id="sign-form"' in page
    payload = toy.payload_for(notice, decision="approve", role="council", reason="")
    assert jcs(payload).decode().replace('"', "&quot;") in page

    own = as_persona("adam").get(f"/requests/toy-notice/{notice.id}/").content.decode()
    assert 'id="sign"' not in own  # an admin sees it, but only the council signs it
    key, private = member_key("cora")
    response = cora.post(f"/requests/toy-notice/{notice.id}/", signed(notice, toy, key, private))
    assert (response.status_code, response["Location"]) == (
        303,
        f"/requests/toy-notice/{notice.id}/",
    )
    again = cora.post(f"/requests/toy-notice/{notice.id}/", signed(notice, toy, key, private))
    assert again.status_code == 409
    assert codes.APPROVAL_DUPLICATE_PERSON in again.content.decode()

    detail = cora.get(f"/api/requests/toy-notice/{notice.id}/").json()
    assert (detail["state"], detail["needed"], detail["may_sign_as"]) == (
        "pending",
        {"council": 1},
        [],
    )
    assert detail["refusals"][0]["error_code"] == codes.APPROVAL_DUPLICATE_PERSON

    colin_key, colin_private = member_key("colin")
    body = signed(notice, toy, colin_key, colin_private, reason="fine")
    voted = as_persona("colin").post(
        f"/api/requests/toy-notice/{notice.id}/votes/",
        {**body, "payload": json.loads(body["payload"])},
        content_type="application/json",
    )
    assert voted.status_code == 201
    assert voted.json()["state"] == "approved"
    assert [(v["approver"], v["reason"]) for v in voted.json()["votes"]] == [
        ("cora", ""),
        ("colin", "fine"),
    ]
    assert cora.get("/api/requests/toy-notice/").json() == []
    assert cora.get("/api/inbox/").json() == []

    # every step is a ledger event of the toy's own types, and the ledger verifies with them
    filed = GovernanceEvent.objects.get(seq=int(notice.row.request_event_id))
    events = GovernanceEvent.objects.filter(seq__gte=filed.seq, code__gte=1000)
    assert [(e.code, e.type) for e in events.order_by("seq")] == [
        (1000, "TOY_NOTICE"),
        (1001, "TOY_NOTICE_APPROVAL"),
        (1001, "TOY_NOTICE_APPROVAL"),
        (1002, "TOY_NOTICE_OK"),
    ]
    assert filed.payload == {"request_id": notice.id, "text": "the archive moves on Monday"}
    assert filed.description == "a toy notice was filed (tests/toykind)"
    code, result = _verify()
    assert (code, result["ok"], result["tables"]) == (0, True, [])


def test_a_bad_signature_and_another_payload_are_refused(toy, as_persona, member_key):
    notice = toy.file(actor=persona("adam"), text="one")
    other = toy.file(actor=persona("adam"), text="two")
    key, private = member_key("cora")
    cora = as_persona("cora")
    forged = {**signed(notice, toy, key, private), "signature": "00" * 64}
    response = cora.post(f"/requests/toy-notice/{notice.id}/", forged)
    assert (response.status_code, codes.APPROVAL_BAD_SIGNATURE in response.content.decode()) == (
        400,
        True,
    )
    crossed = cora.post(f"/requests/toy-notice/{notice.id}/", signed(other, toy, key, private))
    assert codes.APPROVAL_PAYLOAD_MISMATCH in crossed.content.decode()
    assert toy.detail(notice.id).votes == []
    mine = toy.file(actor=persona("cora"), text="mine")
    page = cora.get(f"/requests/toy-notice/{mine.id}/").content.decode()
    assert '<p class="notice" id="sign-blocker">APPROVAL_SELF: you filed this notice</p>' in page
    refused = cora.post(f"/requests/toy-notice/{mine.id}/", signed(mine, toy, key, private))
    assert (refused.status_code, toy.detail(mine.id).votes) == (403, [])


@pytest.mark.parametrize("name", EVERYONE)
def test_every_role(toy, as_persona, name):
    notice = toy.file(actor=persona("adam"), text="hello")
    client = as_persona(name)
    page = client.get(f"/requests/toy-notice/{notice.id}/")
    api = client.get(f"/api/requests/toy-notice/{notice.id}/")
    vote = client.post(
        f"/api/requests/toy-notice/{notice.id}/votes/", {}, content_type="application/json"
    )
    sees = name != "nora"
    assert (page.status_code, api.status_code) == ((200, 200) if sees else (403, 403))
    assert vote.status_code == (400 if name == "cora" else 403)


def test_its_event_types_are_known_once_it_is_registered_and_verified_without_it(toy):
    from governance.requests.builtin import kinds

    notice = toy.file(actor=persona("adam"), text="hello")
    assert codes.code_of("TOY_NOTICE") == 1000
    assert codes.BY_CODE[1002].name == "TOY_NOTICE_OK"
    assert "TOY_NOTICE" not in {t.name for t in codes.EVENT_TYPES}  # this console's own list

    # the same ledger read by a console where the toy kind is not installed: the chain
    # verifies, the unknown type is named with its first seq, and the verdict is not ok
    registry = KindRegistry()
    builtin.register(registry)
    load_entry_points(registry)
    assert "toy-notice" not in registry.names()
    forgotten = {
        n: codes.BY_NAME.pop(n) for n in ("TOY_NOTICE", "TOY_NOTICE_APPROVAL", "TOY_NOTICE_OK")
    }
    for t in forgotten.values():
        del codes.BY_CODE[t.code]
    try:
        builtin._default = registry
        assert kinds() is registry
        code, result = _verify()
    finally:
        codes.register_event_types(tuple(forgotten.values()))
    seq = notice.row.request_event_id
    assert (code, result["broke_at"], result["ok"]) == (1, None, False)
    assert [(m["code"], m["table"], m["row"], m["message"]) for m in result["tables"]] == [
        (
            "TABLE_EVENT_TYPE_UNKNOWN",
            "governance_governanceevent",
            str(seq),
            f"1 ledger event(s) from seq {seq} are of type TOY_NOTICE (code 1000), which neither "
            "this console nor an installed kind of governed request declares: the rows they "
            "decide are not reconciled",
        ),
        (
            "TABLE_REQUEST",
            "governance_request",
            notice.id,
            f"governed request {notice.id} has kind 'toy-notice', which no kind files",
        ),
    ]


def test_an_installed_kind_cannot_take_a_console_code_or_name():
    with pytest.raises(ValueError, match="codes start at 1000, not 999"):
        codes.register_event_types((codes.EventType(999, "X_OTHER", "x"),))
    with pytest.raises(ValueError, match="clashes with 'REPLAY_REQUEST'"):
        codes.register_event_types((codes.EventType(1100, "REPLAY_REQUEST", "x"),))
    codes.register_event_types((codes.EventType(1099, "X_ONE", "x"),))
    try:
        with pytest.raises(ValueError, match=r"'X_TWO' \(1099\) clashes with 'X_ONE' \(1099\)"):
            codes.register_event_types((codes.EventType(1099, "X_TWO", "x"),))
        codes.register_event_types((codes.EventType(1099, "X_ONE", "x"),))  # again: nothing
    finally:
        del codes.BY_NAME["X_ONE"], codes.BY_CODE[1099]


def test_a_kind_naming_an_event_type_nobody_declares_is_not_registered():
    from dataclasses import replace

    from tests.toykind.kind import ToyNoticeKind

    stray = ToyNoticeKind()
    stray.codes = replace(stray.codes, approved="TOY_NOTICE_NOPE")
    with pytest.raises(ValueError, match=r"names unknown event types \['TOY_NOTICE_NOPE'\]"):
        KindRegistry().register(stray)
