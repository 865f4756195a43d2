"""The halt clear and the legal approvals on the shared approval page (issue 19): the old
addresses move permanently (GET, with the query kept) and still take a POST; every role on
the new page, with and without the request existing; a signature recorded through it."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from core.canonical import jcs
from core.ledger.signing import sign
from dsr import services as dsr_services
from governance import services as gov_services
from governance.models import Halt, Vote
from tests.console.personas import EVERYONE, persona

pytestmark = pytest.mark.django_db

MISSING = uuid.UUID(int=7)


@pytest.fixture
def halted(replayed):
    replayed("broken_chain")
    return Halt.objects.get(payload__target_kind="blob")


@pytest.fixture
def checked(signers):
    legal = dsr_services.legal_request_open(
        actor=persona("lena"),
        identifiers=["jane.doe@example.com"],
        kind="both",
        legal_basis="GDPR Art. 15 and 17",
    )
    return dsr_services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )


def halt_document(halt, key, private, reason=""):
    text = jcs(gov_services.halt_clear_payload_for(halt=halt, reason=reason)).decode()
    return {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())}


def legal_document(legal, purpose, key, private):
    payload = dsr_services.approval_payload_for(request=legal, purpose=purpose)
    return {
        "payload": json.dumps(payload),
        "key_id": key.key_id,
        "signature": sign(private, jcs(payload)),
    }


class TestOldAddresses:
    def test_a_halt_moves_permanently_with_its_query(self, as_persona, halted):
        client = as_persona("cora")
        for old, new in (
            (f"/governance/halts/{halted.seq}/", f"/requests/halt-clear/{halted.seq}/"),
            (
                f"/governance/halts/{halted.seq}/?reason=seen",
                f"/requests/halt-clear/{halted.seq}/?reason=seen",
            ),
        ):
            response = client.get(old)
            assert (response.status_code, response["Location"]) == (301, new)

    @pytest.mark.parametrize("purpose", ["release", "erasure"])
    def test_a_legal_approval_moves_permanently(self, as_persona, checked, purpose):
        response = as_persona("adam").get(f"/dsr/{checked.id}/approve/{purpose}/?reason=x")
        assert response.status_code == 301
        assert response["Location"] == f"/requests/legal-{purpose}/{checked.id}/?reason=x"

    def test_an_approval_a_legal_request_cannot_have_is_not_found(self, as_persona, checked):
        assert as_persona("adam").get(f"/dsr/{checked.id}/approve/nope/").status_code == 404

    def test_a_halt_clear_posted_at_the_old_address_is_taken(self, as_persona, halted, member_key):
        key, private = member_key("cora")
        client = as_persona("cora")
        response = client.post(
            f"/governance/halts/{halted.seq}/", halt_document(halted, key, private)
        )
        assert (response.status_code, response["Location"]) == (
            303,
            f"/requests/halt-clear/{halted.seq}/",
        )
        body = client.get(response["Location"]).content.decode()
        assert "1 of 2 council signatures to clear it." in body
        assert "Your signature toward clearing this halt is recorded." in body
        assert (
            '<p class="notice" id="sign-blocker">You have already signed toward clearing this'
            " halt.</p>"
        ) in body

    def test_a_legal_approval_posted_at_the_old_address_is_taken(
        self, as_persona, checked, member_key
    ):
        key, private = member_key("adam")
        response = as_persona("adam").post(
            f"/dsr/{checked.id}/approve/erasure/",
            legal_document(checked, "erasure", key, private),
        )
        assert (response.status_code, response["Location"]) == (303, f"/dsr/{checked.id}/")
        assert Vote.objects.get().request.kind == "legal-erasure"


class TestTheSharedPage:
    def test_two_council_signatures_clear_a_halt_there(self, as_persona, halted, member_key):
        url = f"/requests/halt-clear/{halted.seq}/"
        for name in ("cora", "colin"):
            key, private = member_key(name)
            response = as_persona(name).post(url, halt_document(halted, key, private))
            assert response.status_code == 303
        assert not Halt.objects.active().filter(seq=halted.seq).exists()
        body = as_persona("cora").get(url).content.decode()
        assert '<span class="badge yes">cleared</span>' in body
        assert "This halt is cleared: it takes no more signatures." in body

    def test_the_admin_who_declared_a_halt_is_told_and_refused_there(
        self, as_persona, ingest, member_key
    ):
        from tests.console.personas import make_user

        dora = make_user("dora", "admin", "council")  # declares incidents, sits on the council
        trace = ingest("ok")
        _incident, halt = gov_services.security_incident_declare(
            actor=dora, reason="key leaked", trace=trace.trace_id
        )
        url = f"/requests/halt-clear/{halt.seq}/"
        client = as_persona("dora")
        assert (
            '<p class="notice" id="sign-blocker">You declared this halt: other council members'
            " must clear it.</p>"
        ) in client.get(url).content.decode()
        key, private = member_key("dora")

        response = client.post(url, halt_document(halt, key, private))

        message = gov_services.HALT_CLEAR_SELF_MESSAGE.format(user="dora", halt=halt.seq)
        assert response.status_code == 403
        assert f"APPROVAL_SELF</code> {message}" in response.content.decode()
        assert not Vote.objects.exists()

    def test_a_legal_approval_signed_there(self, as_persona, checked, member_key):
        key, private = member_key("adam")
        url = f"/requests/legal-release/{checked.id}/"
        response = as_persona("adam").post(url, legal_document(checked, "release", key, private))
        assert response.status_code == 303
        again = as_persona("adam").post(url, legal_document(checked, "release", key, private))
        assert again.status_code == 409
        assert "APPROVAL_DUPLICATE_KEY" in again.content.decode()  # the same key again

    def test_a_legal_request_without_that_approval_is_not_found(self, as_persona, signers):
        only = dsr_services.legal_request_open(
            actor=persona("lena"), identifiers=["x@example.com"], kind="erasure", legal_basis="b"
        )
        client = as_persona("adam")
        assert client.get(f"/requests/legal-release/{only.id}/").status_code == 404
        assert client.get(f"/requests/legal-erasure/{only.id}/").status_code == 200

    def test_the_open_list_of_a_halt_clear_and_a_legal_approval(
        self, as_persona, halted, checked, member_key
    ):
        body = as_persona("cora").get("/requests/halt-clear/").content.decode()
        assert "<h1>Halt clear: open requests</h1>" in body
        assert f'<tr class="awaits-me" data-key="{halted.seq}">' in body
        assert f'href="/requests/halt-clear/{halted.seq}/"' in body
        assert "<td>2 more council signatures</td>" in body
        viewer = as_persona("vera").get("/requests/halt-clear/").content.decode()
        assert f'<tr data-key="{halted.seq}">' in viewer  # she sees it; it waits for the council
        key, private = member_key("cora")
        as_persona("cora").post(
            f"/requests/halt-clear/{halted.seq}/", halt_document(halted, key, private)
        )
        after = as_persona("cora").get("/requests/halt-clear/").content.decode()
        assert f'<tr data-key="{halted.seq}">' in after  # signed: no longer awaits her
        assert "<td>1 more council signature</td>" in after
        legal = as_persona("adam").get("/requests/legal-erasure/").content.decode()
        assert f'<tr class="awaits-me" data-key="{checked.id}">' in legal
        assert "<td>1 more admin signature</td>" in legal

    def test_the_navigation_marks_the_kinds_section(self, as_persona, halted, checked):
        halt = as_persona("cora").get(f"/requests/halt-clear/{halted.seq}/").content.decode()
        assert ' aria-current="page">Halts</a>' in halt
        legal = as_persona("adam").get(f"/requests/legal-erasure/{checked.id}/").content.decode()
        assert ' aria-current="page">Legal requests</a>' in legal

    def test_the_halts_list_and_the_legal_request_link_the_shared_page(
        self, as_persona, halted, checked
    ):
        halts = as_persona("vera").get("/governance/halts/").content.decode()
        assert f'href="/requests/halt-clear/{halted.seq}/"' in halts
        detail = as_persona("adam").get(f"/dsr/{checked.id}/").content.decode()
        assert f'href="/requests/legal-release/{checked.id}/" id="approve-release-link"' in detail
        assert f'href="/requests/legal-erasure/{checked.id}/" id="approve-erasure-link"' in detail


# --- the roles matrix on the shared page, every role, existing or not --------------------

HALT_SEE = {"vera", "alice", "oscar", "adam", "cora", "lena"}  # BROWSE: every role
HALT_SIGN = {"cora"}  # HALT_CLEAR: the council
LEGAL_SEE = {"adam", "cora"}  # DSR_APPROVE: admin and council


@pytest.mark.parametrize("name", EVERYONE)
def test_every_role_on_a_halt_clear(as_persona, halted, name):
    client = as_persona(name)
    assert client.get("/requests/halt-clear/").status_code == (200 if name in HALT_SEE else 403)
    there = client.get(f"/requests/halt-clear/{halted.seq}/")
    missing = client.get("/requests/halt-clear/999999/")
    if name in HALT_SEE:
        assert (there.status_code, missing.status_code) == (200, 404)
        assert ('id="sign-form"' in there.content.decode()) == (name in HALT_SIGN)
    else:
        assert (there.status_code, missing.status_code) == (403, 403)
    posted = client.post(f"/requests/halt-clear/{halted.seq}/", {"payload": "{}"})
    assert posted.status_code == (400 if name in HALT_SIGN else 403)


@pytest.mark.parametrize("name", EVERYONE)
def test_every_role_on_a_legal_approval(as_persona, checked, name):
    client = as_persona(name)
    for purpose in ("release", "erasure"):
        there = client.get(f"/requests/legal-{purpose}/{checked.id}/")
        missing = client.get(f"/requests/legal-{purpose}/{MISSING}/")
        posted = client.post(f"/requests/legal-{purpose}/{MISSING}/", {})
        listed = client.get(f"/requests/legal-{purpose}/")
        assert listed.status_code == (200 if name in LEGAL_SEE else 403)
        if name in LEGAL_SEE:
            assert (there.status_code, missing.status_code, posted.status_code) == (200, 404, 404)
        else:
            assert (there.status_code, missing.status_code, posted.status_code) == (403, 403, 403)


@pytest.mark.parametrize("url", ["/requests/halt-clear/1/", f"/requests/legal-release/{MISSING}/"])
def test_anonymous_is_sent_to_sign_in(db, url):
    for response in (Client().get(url), Client().post(url, {})):
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_anonymous_is_sent_to_sign_in_from_a_list_that_takes_no_post(db):
    response = Client().get("/requests/halt-clear/")
    assert (response.status_code, response["Location"][:16]) == (302, "/accounts/login/")
    assert Client().post("/requests/halt-clear/", {}).status_code == 405
