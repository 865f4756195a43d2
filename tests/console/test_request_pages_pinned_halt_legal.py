"""What the halt-clear page and the legal approval pages say, pinned before they moved onto the
shared approval page ``/requests/<kind>/<id>/`` (issue 19): the heading, the facts, the tally,
the payload to sign, the blocker and the ids sign.js and the browser tests use. The old URLs
are followed, so the same assertions hold on the shared page."""

from __future__ import annotations

import html

import pytest

from core.canonical import jcs
from core.ledger import codes
from dsr import services as dsr_services
from governance import services as gov_services
from governance.models import Halt
from tests.console.personas import persona

pytestmark = pytest.mark.django_db

SIGN_IDS = (
    'id="payload-choices"',
    'id="signing-payload"',
    'id="sign-form"',
    'id="sign-key"',
    'id="sign-button"',
    'id="sign-status"',
    'id="offline-sign"',
    'name="signature" value=""',
    "data-payload-choices",
)


def get(client, url):
    response = client.get(url, follow=True)
    assert response.status_code == 200, url
    return response.content.decode()


def shown(payload) -> str:
    return f'<pre class="payload" id="payload-text">{html.escape(jcs(payload).decode())}</pre>'


@pytest.fixture
def halted(replayed):
    replayed("broken_chain")
    return Halt.objects.get(payload__target_kind="blob")


@pytest.fixture
def legal(signers):
    return dsr_services.legal_request_open(
        actor=persona("lena"),
        identifiers=["jane.doe@example.com"],
        kind="both",
        legal_basis="GDPR Art. 15 and 17",
    )


@pytest.fixture
def checked(legal):
    return dsr_services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )


class TestHaltClear:
    def test_the_approval_page(self, as_persona, halted):
        body = get(as_persona("cora"), f"/governance/halts/{halted.seq}/")
        assert f"<title>Halt #{halted.seq}" in body
        assert f"<h1>Halt #{halted.seq} on blob <code>{halted.target_id}</code></h1>" in body
        assert f"<p>{html.escape(halted.reason)}</p>" in body
        assert "Other copies of that trace are not halted." in body
        assert f'href="/traces/{halted.target_id}/"' in body
        assert '<span class="badge no">active</span> 0 of 2 council signatures to clear it.' in body
        assert "<h2>Sign toward clearing</h2>" in body
        assert shown(gov_services.halt_clear_payload_for(halt=halted)) in body
        for marker in SIGN_IDS:
            assert marker in body, marker
        assert 'name="decision"' not in body  # a clear has no decision to choose

    def test_the_payload_follows_the_reason(self, as_persona, halted):
        body = get(as_persona("cora"), f"/governance/halts/{halted.seq}/?reason=checked+it")
        assert shown(gov_services.halt_clear_payload_for(halt=halted, reason="checked it")) in body
        assert '<input name="reason" value="checked it">' in body

    def test_a_viewer_sees_it_but_no_signing(self, as_persona, halted):
        body = get(as_persona("vera"), f"/governance/halts/{halted.seq}/")
        assert "0 of 2 council signatures to clear it." in body
        assert 'id="sign-form"' not in body

    def test_after_one_signature(self, as_persona, halted, member_key):
        key, private = member_key("cora")
        text = jcs(gov_services.halt_clear_payload_for(halt=halted)).decode()
        from core.ledger.signing import sign

        response = as_persona("cora").post(
            f"/governance/halts/{halted.seq}/",
            {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
        )
        assert response.status_code == 303
        body = get(as_persona("colin"), response["Location"])
        assert "1 of 2 council signatures to clear it." in body
        assert f"<li>cora with key <code>{key.key_id}</code></li>" in body
        assert 'id="sign-form"' in body
        mine = get(as_persona("cora"), f"/governance/halts/{halted.seq}/")
        assert 'id="sign-form"' not in mine  # she has signed


class TestLegalApproval:
    @pytest.mark.parametrize("purpose", ["release", "erasure"])
    def test_the_approval_page(self, as_persona, checked, purpose):
        body = get(as_persona("adam"), f"/dsr/{checked.id}/approve/{purpose}/")
        assert f"<title>Approve a legal request's {purpose} · " in body
        assert f"<h1>Approve the {purpose} of a legal request</h1>" in body
        assert (
            f'<dt>Request</dt><dd><a href="/dsr/{checked.id}/"><code>{checked.id}</code></a>'
            " (both, opened by lena)</dd>"
        ) in body
        assert "<dt>Identity</dt><dd>verified by lena: passport seen on a video call</dd>" in body
        assert '<dd id="approval-status">0 of 1 admin</dd>' in body
        payload = dsr_services.approval_payload_for(request=checked, purpose=purpose)
        assert shown(payload) in body
        for marker in SIGN_IDS:
            assert marker in body, marker
        assert 'name="decision"' not in body
        section = "release-values" if purpose == "release" else "erasure-plan"
        assert f'id="{section}"' in body

    def test_the_blocker_before_the_identity_check(self, as_persona, legal):
        body = html.unescape(get(as_persona("adam"), f"/dsr/{legal.id}/approve/erasure/"))
        assert '<p class="notice" id="sign-blocker">DSR_IDENTITY_UNVERIFIED: ' in body
        assert "<dt>Identity</dt><dd><strong>not verified</strong></dd>" in body
        assert 'id="sign-form"' not in body

    def test_a_council_member_is_told_the_deployment_wants_an_admin(self, as_persona, checked):
        body = html.unescape(get(as_persona("cora"), f"/dsr/{checked.id}/approve/release/"))
        assert f"{codes.APPROVAL_ROLE}: cora signed as admin but does not hold the admin role" in (
            body
        )

    def test_the_payload_follows_the_reason(self, as_persona, checked):
        body = get(as_persona("adam"), f"/dsr/{checked.id}/approve/erasure/?reason=ok+by+me")
        payload = dsr_services.approval_payload_for(
            request=checked, purpose="erasure", reason="ok by me"
        )
        assert shown(payload) in body

    def test_an_approval_it_does_not_have_is_not_found(self, as_persona, signers):
        only = dsr_services.legal_request_open(
            actor=persona("lena"), identifiers=["x@example.com"], kind="erasure", legal_basis="b"
        )
        client = as_persona("adam")
        assert client.get(f"/dsr/{only.id}/approve/release/", follow=True).status_code == 404
        assert client.get(f"/dsr/{only.id}/approve/nope/", follow=True).status_code == 404
