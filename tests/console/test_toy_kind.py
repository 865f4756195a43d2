"""A toy kind of governed request (tests/toykind), installed through the entry-point group
``replay_console.request_kinds`` as a package would be, goes through the shared approval page,
the API and the inbox with no change to the console: filed, listed, refused, voted, approved.

It touches three files: its kind module (tests/toykind/kind.py), its body partial
(tests/toykind/templates/toykind/body.html) and this test. Its notices live in memory, not in
the ledger (see tests/toykind/kind.py), so reconciling with the ledger is not shown here."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from governance import codes, signing
from governance.requests import builtin
from governance.requests.protocol import ENTRY_POINT_GROUP, KindRegistry, load_entry_points
from replay.canonical import jcs
from tests.console.personas import EVERYONE, persona

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
    kind.KIND.notices.clear()
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
    assert notice.votes == []
    mine = toy.file(actor=persona("cora"), text="mine")
    page = cora.get(f"/requests/toy-notice/{mine.id}/").content.decode()
    assert '<p class="notice" id="sign-blocker">APPROVAL_SELF: you filed this notice</p>' in page
    refused = cora.post(f"/requests/toy-notice/{mine.id}/", signed(mine, toy, key, private))
    assert (refused.status_code, mine.votes) == (403, [])


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
