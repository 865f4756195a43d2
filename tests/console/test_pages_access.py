"""Every page, for every role, with and without HX-Request: allowed or a 403 that says
nothing about whether the object exists; a missing object is 404 only to those allowed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from console import roles
from tests.console.personas import BY_ROLE, EVERYONE, PERSONAS

pytestmark = pytest.mark.django_db

V, AU, OP, AD, CO, LE = "viewer", "auditor", "operator", "admin", "council", "legal"
ANYONE = {V, AU, OP, AD, CO, LE}


@dataclass
class World:
    sha: str
    run: str
    fc: str
    halt: int
    ok_sha: str
    production: str
    role_grant: str


@pytest.fixture
def world(replayed):
    from governance.models import Halt
    from governance.services import (
        force_continue_request_file,
        production_replay_request_file,
        user_roles_change,
    )
    from tests.console.personas import persona

    ok = replayed("ok").trace
    production = production_replay_request_file(
        trace=ok, actor=persona("alice"), reason="recovery drill"
    )
    diverged = replayed("diverged")
    replayed("broken_chain")  # an integrity failure halts that file
    fc = force_continue_request_file(run=diverged, actor=persona("alice"), reason="known drift")
    grant = user_roles_change(
        actor=persona("adam"), user=persona("lena"), roles=["legal", "council"], reason="elected"
    ).grant
    return World(
        sha=diverged.trace.blob.sha256,
        run=str(diverged.id),
        fc=str(fc.id),
        halt=Halt.objects.order_by("seq").first().seq,
        ok_sha=ok.blob.sha256,
        production=str(production.id),
        role_grant=str(grant.id),
    )


#: pages with no htmx partial: htmx gets the whole page (a JSON file, a form page)
FULL_PAGES = {
    "upload",
    "force-continue form",
    "force-continue list",
    "production form",
    "production list",
    "halts",
    "keys",
    "users",
    "role grants",
    "operations",
    "api docs",
    "api tokens",
    "report json",
    "report tree",
    "inbox",
}

MISSING_SHA = "f" * 64
MISSING_UUID = "7b0b7a0e-0000-4000-8000-000000000000"

# (name, url given the world, url of a missing object or None, roles allowed)
PAGES = [
    ("trace list", lambda w: "/traces/", None, ANYONE),
    ("upload", lambda w: "/traces/upload/", None, {AU, OP, AD}),
    ("trace", lambda w: f"/traces/{w.sha}/", f"/traces/{MISSING_SHA}/", ANYONE),
    (
        "event",
        lambda w: f"/traces/{w.sha}/events/0/",
        f"/traces/{MISSING_SHA}/events/0/",
        ANYONE,
    ),
    (
        "compare",
        lambda w: f"/traces/{w.sha}/compare/{w.ok_sha}/",
        f"/traces/{MISSING_SHA}/compare/{MISSING_SHA}/",
        ANYONE,
    ),
    ("run", lambda w: f"/runs/{w.run}/", f"/runs/{MISSING_UUID}/", ANYONE),
    ("run status", lambda w: f"/runs/{w.run}/status/", f"/runs/{MISSING_UUID}/status/", ANYONE),
    (
        "run value",
        lambda w: f"/runs/{w.run}/value/?pointer=/status",
        f"/runs/{MISSING_UUID}/value/?pointer=/status",
        ANYONE,
    ),
    (
        "report json",
        lambda w: f"/runs/{w.run}/report.json",
        f"/runs/{MISSING_UUID}/report.json",
        ANYONE,
    ),
    (
        "report tree",
        lambda w: f"/runs/{w.run}/report/",
        f"/runs/{MISSING_UUID}/report/",
        ANYONE,
    ),
    (
        "force-continue form",
        lambda w: f"/runs/{w.run}/force-continue/",
        f"/runs/{MISSING_UUID}/force-continue/",
        {AU, AD},
    ),
    ("force-continue list", lambda w: "/requests/force-continue/", None, ANYONE),
    (
        "force-continue request",
        lambda w: f"/requests/force-continue/{w.fc}/",
        f"/requests/force-continue/{MISSING_UUID}/",
        ANYONE,
    ),
    (
        "production form",
        lambda w: f"/traces/{w.ok_sha}/production/",
        f"/traces/{MISSING_SHA}/production/",
        {AU, AD},
    ),
    ("production list", lambda w: "/requests/production-replay/", None, ANYONE),
    (
        "production request",
        lambda w: f"/requests/production-replay/{w.production}/",
        f"/requests/production-replay/{MISSING_UUID}/",
        ANYONE,
    ),
    ("ledger", lambda w: "/governance/", None, ANYONE),
    ("ledger verification", lambda w: "/governance/verification/", None, ANYONE),
    ("halts", lambda w: "/governance/halts/", None, ANYONE),
    ("halt", lambda w: f"/requests/halt-clear/{w.halt}/", "/requests/halt-clear/999999/", ANYONE),
    ("keys", lambda w: "/governance/keys/", None, ANYONE),
    ("users", lambda w: "/governance/users/", None, {AD}),
    ("role grants", lambda w: "/requests/role-grant/", None, {AD, CO}),
    (
        "role grant",
        lambda w: f"/requests/role-grant/{w.role_grant}/",
        f"/requests/role-grant/{MISSING_UUID}/",
        {AD, CO},
    ),
    ("operations", lambda w: "/ops/", None, ANYONE),
    ("api docs", lambda w: "/api/docs/", None, ANYONE),
    ("api tokens", lambda w: "/tokens/", None, ANYONE),
    ("inbox", lambda w: "/inbox/", None, ANYONE),
]


@pytest.mark.parametrize("name", [*BY_ROLE.values(), "nora"])
def test_each_page_for_each_role_with_and_without_htmx(world, as_persona, name):
    """One client per persona walks every page; each answer is checked and named."""
    client = as_persona(name)
    held = set(PERSONAS[name])
    for page, url, missing, allowed_roles in PAGES:
        allowed = bool(held & allowed_roles)
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            where = f"{page} as {name}{' (htmx)' if headers else ''}"
            response = client.get(url(world), **headers)
            assert response.status_code == (200 if allowed else 403), where
            if headers and allowed:
                assert "<html" not in response.content.decode() or page in FULL_PAGES, where
            if missing is None:
                continue
            gone = client.get(missing, **headers)
            assert gone.status_code == (404 if allowed else 403), f"missing {where}"
            if not allowed:  # the refusal of a missing object reads like that of a real one
                assert _refusal(gone) == _refusal(response) != "", where


def _refusal(response) -> str:
    body = response.content.decode()
    start = body.find('role="alert"')
    return body[start : body.find("</p>", start)]


def test_the_matrix_above_covers_every_page_route():
    from django.urls import get_resolver

    names = {
        p.name
        for p in get_resolver().url_patterns
        if getattr(p, "name", None) and p.pattern.regex.pattern.startswith("^")
    }
    gets = {
        "trace-list",
        "trace-upload",
        "trace-detail",
        "trace-event",
        "trace-compare",
        "run-detail",
        "run-status",
        "run-value",
        "run-report-json",
        "run-report-tree",
        "force-continue-request",
        "production-request",
        "request-list",  # once per council kind in PAGES
        "request-detail",
        "ledger",
        "ledger-verification",
        "halt-list",
        "key-list",
        "user-list",
        "ops-dashboard",
        "api-docs",
        "api-token-list",
        "inbox",
    }
    posts_tested_elsewhere = {
        "api-token-revoke",
        "run-start",
        "incident-declare",  # tests/console/test_incidents.py
        "checkpoint-check",
        "ledger-verify",  # tests/console/test_governance_pages.py
        "ledger-witness-push",  # tests/console/test_witnessing.py
        "ledger-witness-ack",
        "run-requeue",  # tests/console/test_background.py
        "key-register",
        "key-confirm",
        "key-revoke",
        "verification-key-add",  # tests/console/test_verification_keys_page.py
        "verification-key-revoke",
        "server-key-rotate",
        "logout",
        "login",
        "otp-setup",
        "otp-verify",
        "checkpoint-export",
        "schema",
        "trace-compare-pick",  # a redirect: tests/console/test_trace_compare.py
        "trace-notes",  # GET and POST, every role: tests/console/test_trace_notes.py
        "otlp-traces",  # token only, every role: tests/otel/test_receiver.py
        # open OpenTelemetry traces, every role: tests/otel/test_open_pages.py
        "otel-open-list",
        "otel-open-detail",
        "otel-seal",
        # a record of a trace of another format than native, each role:
        # tests/otel/test_records_page.py and tests/console/test_records_pages.py
        "trace-record",
    }
    public_tested_elsewhere = {"healthz"}  # tests/console/test_production.py
    # old approval pages, now 301 to /requests/<kind>/<key>/: test_request_pages_moved.py
    public_tested_elsewhere |= {"halt-detail"}
    # streamed files, every role: tests/console/test_trace_export.py
    posts_tested_elsewhere |= {"trace-export-csv", "trace-export-json"}
    assert names - gets - posts_tested_elsewhere - public_tested_elsewhere == set()
    # request-list and request-detail are walked once per council kind (three kinds), and
    # request-detail once more for a halt clear
    assert len(PAGES) == len(gets) + 2 * 2 + 1


@pytest.mark.parametrize("name", EVERYONE)
def test_strong_roles_unverified_are_sent_to_the_second_factor_on_every_page(world, name):
    from django.test import Client

    from tests.console.personas import persona, sign_in

    user = persona(name)
    client = sign_in(Client(), user, verified=False)
    response = client.get(f"/traces/{world.sha}/")
    if roles.held_roles(user) & roles.STRONG_ROLES:
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/2fa/verify/")
    else:
        assert response.status_code == (403 if name == "nora" else 200)
