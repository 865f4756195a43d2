"""What each council request's list and approval page says, pinned before the pages became one
pair parameterised by kind (issue 19): the payload to sign, the tally, who may still sign, the
summary facts, the refusals and the ids sign.js and the browser tests use. The old URLs are
followed, so the same assertions hold on the new ``/requests/<kind>/`` pages."""

from __future__ import annotations

import html

import pytest

from core.canonical import jcs
from governance import services as gov_services
from tests.console.personas import persona
from tests.governance.factories import lift_request_guard

pytestmark = pytest.mark.django_db


def get(client, url):
    response = client.get(url, follow=True)
    assert response.status_code == 200, url
    return response.content.decode()


def shown(payload) -> str:
    return f'<pre class="payload" id="payload-text">{html.escape(jcs(payload).decode())}</pre>'


SIGN_IDS = (
    'id="payload-choices"',
    'id="signing-payload"',
    'id="sign-form"',
    'id="sign-key"',
    'id="sign-button"',
    'id="sign-status"',
    'id="offline-sign"',
    'name="signature" value=""',
)


@pytest.fixture
def fc(replayed, signers):
    run = replayed("diverged", by="alice")
    return gov_services.force_continue_request_file(
        run=run, actor=persona("alice"), reason="drift in the router is known"
    )


@pytest.fixture
def asked(ingest, signers):
    return gov_services.production_replay_request_file(
        trace=ingest("ok"), actor=persona("alice"), reason="disaster recovery drill"
    )


@pytest.fixture
def grant(signers):
    return gov_services.user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["legal", "council"], reason="elected"
    ).grant


class TestForceContinue:
    def test_the_approval_page(self, as_persona, fc):
        body = get(as_persona("cora"), f"/force-continue/{fc.id}/")
        assert "<h1>Force-continue request</h1>" in body
        assert f"<dt>Continue past</dt><dd>step {fc.step}" in body
        assert f"<dt>Divergence digest</dt><dd><code>{fc.divergence_digest}</code></dd>" in body
        assert "<dt>Reason</dt><dd>drift in the router is known</dd>" in body
        assert '<span class="badge" id="fc-state">pending</span>' in body
        assert (
            '<p id="remaining">Still needed: <strong>1 admin approval(s) and 2 council'
            " approval(s)</strong> (0/1 admin, 0/2 council)</p>"
        ) in body
        assert '<li class="hint">No signature yet.</li>' in body
        assert '<option value="council" selected>council</option>' in body
        payload = gov_services.force_continue_payload_for(
            request=fc, decision="approve", role="council", reason=""
        )
        assert shown(payload) in body
        for fragment in (*SIGN_IDS, "data-payload-choices"):
            assert fragment in body, fragment

    def test_the_filer_is_told_why_she_may_not_sign(self, as_persona, fc):
        body = get(as_persona("sam"), f"/force-continue/{fc.id}/")
        assert 'id="sign-blocker"' not in body  # sam did not file it
        lift_request_guard()  # a row rewritten by hand: the page still refuses the filer
        fc.requested_by = persona("sam")
        fc.save(update_fields=["requested_by"])
        body = get(as_persona("sam"), f"/force-continue/{fc.id}/")
        assert (
            '<p class="notice" id="sign-blocker">You filed this request: someone else must'
            " approve it.</p>"
        ) in body
        assert 'id="sign-form"' not in body

    def test_a_viewer_sees_no_signing(self, as_persona, fc):
        body = get(as_persona("vera"), f"/force-continue/{fc.id}/")
        assert 'id="sign"' not in body
        assert 'id="remaining"' in body

    def test_the_list(self, as_persona, fc):
        body = get(as_persona("cora"), "/force-continue/")
        assert "<h1>Force-continue requests</h1>" in body
        assert '<tr class="awaits-me">' in body
        assert "1 admin approval(s) and 2 council approval(s)" in body
        assert "Awaits your signature" in body


class TestProductionReplay:
    def test_the_approval_page(self, as_persona, asked):
        body = get(as_persona("cora"), f"/production/{asked.id}/")
        assert "<h1>Production replay request</h1>" in body
        assert f"<dt>Exact file</dt><dd><code>sha256:{asked.trace.blob.sha256}</code></dd>" in body
        assert "<dt>Reason</dt><dd>disaster recovery drill</dd>" in body
        assert '<span class="badge" id="production-state">pending</span>' in body
        assert (
            '<p id="remaining">Still needed: <strong>2 council approval(s)</strong>'
            " (0/2 council)</p>"
        ) in body
        payload = gov_services.production_replay_payload_for(request=asked, decision="approve")
        assert shown(payload) in body
        for fragment in (*SIGN_IDS, "data-payload-choices"):
            assert fragment in body, fragment

    def test_the_filer_and_a_viewer_see_no_signing(self, as_persona, asked):
        for name in ("alice", "vera"):
            body = get(as_persona(name), f"/production/{asked.id}/")
            assert 'id="sign"' not in body, name
            assert "2 council approval(s)" in body, name

    def test_the_list(self, as_persona, asked):
        body = get(as_persona("cora"), "/production/")
        assert "<h1>Production replay approvals</h1>" in body
        assert '<tr class="awaits-me">' in body
        assert "Awaits your signature" in body


class TestRoleGrant:
    def test_the_approval_page(self, as_persona, grant):
        body = get(as_persona("cora"), f"/governance/role-grants/{grant.id}/")
        assert "<h1>Role grant</h1>" in body
        assert "<dt>For</dt><dd>lena</dd>" in body
        assert "<dt>Roles to add</dt><dd>council</dd>" in body
        assert '<span class="badge" id="grant-state">pending</span>' in body
        assert (
            '<p id="remaining">Still needed: <strong>2 council approval(s)</strong>'
            " (0/2 council)</p>"
        ) in body
        payload = gov_services.role_grant_payload_for(request=grant, decision="approve")
        assert shown(payload) in body
        for fragment in SIGN_IDS:
            assert fragment in body, fragment

    def test_the_admin_who_asked_sees_no_signing(self, as_persona, grant):
        body = get(as_persona("adam"), f"/governance/role-grants/{grant.id}/")
        assert 'id="sign"' not in body
        assert "<dt>Roles to add</dt><dd>council</dd>" in body

    def test_the_list(self, as_persona, grant):
        body = get(as_persona("cora"), "/governance/role-grants/")
        assert "<h1>Role grants</h1>" in body
        assert str(grant.id) in body
        assert "lena" in body


class TestTheOldUrls:
    """The old per-kind URLs move permanently to ``/requests/<kind>/``; a POST there (a form
    or script that still posts to it) is still taken: tests/console/test_*_pages.py post
    their signatures there."""

    def test_each_get_moves_permanently(self, as_persona, fc, asked, grant):
        client = as_persona("cora")
        for old, new in (
            ("/force-continue/", "/requests/force-continue/"),
            (f"/force-continue/{fc.id}/", f"/requests/force-continue/{fc.id}/"),
            ("/production/", "/requests/production-replay/"),
            (f"/production/{asked.id}/", f"/requests/production-replay/{asked.id}/"),
            ("/governance/role-grants/", "/requests/role-grant/"),
            (f"/governance/role-grants/{grant.id}/", f"/requests/role-grant/{grant.id}/"),
            (
                f"/force-continue/{fc.id}/?decision=deny&role=council",
                f"/requests/force-continue/{fc.id}/?decision=deny&role=council",
            ),
        ):
            response = client.get(old)
            assert (response.status_code, response["Location"]) == (301, new), old

    def test_a_kind_without_these_pages_is_not_found(self, as_persona):
        client = as_persona("cora")
        for url in ("/requests/legal-release/1/", "/requests/nope/", "/requests/nope/1/"):
            assert client.get(url).status_code == 404, url

    def test_the_inbox_links_to_the_new_pages(self, as_persona, fc, asked, grant):
        body = get(as_persona("cora"), "/inbox/")
        assert f'href="/requests/force-continue/{fc.id}/"' in body
        assert f'href="/requests/production-replay/{asked.id}/"' in body
        assert f'href="/requests/role-grant/{grant.id}/"' in body

    def test_the_navigation_marks_the_kinds_section(self, as_persona, fc, asked, grant):
        client = as_persona("cora")
        for url, link in (
            (f"/requests/force-continue/{fc.id}/", "Force-continue"),
            ("/requests/production-replay/", "Production"),
            (f"/requests/role-grant/{grant.id}/", "Role grants"),
        ):
            assert f' aria-current="page">{link}</a>' in get(client, url), url


def test_the_list_reads_the_ledger_in_a_fixed_number_of_queries(as_persona, grant):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = as_persona("cora")
    with CaptureQueriesContext(connection) as one:
        assert client.get("/requests/role-grant/").status_code == 200
    gov_services.user_roles_change(
        actor=persona("adam"), user=persona("vera"), roles=["council"], reason="elected too"
    )
    with CaptureQueriesContext(connection) as two:
        body = client.get("/requests/role-grant/").content.decode()
    assert body.count('<tr class="awaits-me">') == 2
    assert len(two.captured_queries) == len(one.captured_queries)
