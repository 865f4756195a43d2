"""The auditor's journey against the production stack (`make prod`, deploy/stack.py): gunicorn
with DEBUG off, static files from WhiteNoise, replays on a Celery worker over Redis,
PostgreSQL. `.ci/run` starts the stack and runs this with REPLAY_BROWSER_BASE_URL (its URL)
and REPLAY_STACK_DIR (its state: the secret the demo passwords derive from, the demo upload
files). Nothing here touches the database: the browser and HTTP are the only way in.

Without REPLAY_BROWSER_BASE_URL these tests skip (there is no stack to drive); with
REPLAY_REQUIRE_STACK=1 (CI) a missing stack is a failure instead."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from tests.browser.test_journeys import EXPECTED, uploads_settled

BASE_URL = os.environ.get("REPLAY_BROWSER_BASE_URL", "").rstrip("/")
STACK_DIR = Path(os.environ.get("REPLAY_STACK_DIR", "var/prod"))
NO_STACK = "no production stack: set REPLAY_BROWSER_BASE_URL (and REPLAY_STACK_DIR); see .ci/run"


@pytest.fixture
def stack():
    if not BASE_URL:
        if os.environ.get("REPLAY_REQUIRE_STACK") == "1":
            pytest.fail(f"REPLAY_REQUIRE_STACK=1 but {NO_STACK}")
        pytest.skip(NO_STACK)
    return BASE_URL


@pytest.fixture
def stack_page(chromium, stack, settings):
    """`stack_page("alice")`: a page in a fresh context on the stack, signed in (a demo user
    without a second factor; the password derives from the stack's secret key)."""
    from console.demo import demo_password

    settings.SECRET_KEY = (STACK_DIR / "secrets" / "django_secret_key").read_text().strip()
    contexts = []

    def make(name: str):
        context = chromium.new_context(base_url=stack, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.errors = errors  # type: ignore[attr-defined]
        page.goto("/accounts/login/")
        page.fill("#id_username", name)
        page.fill("#id_password", demo_password(name))
        page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r"/traces/"))
        return page

    yield make
    for context in contexts:
        context.close()


def test_the_stack_is_healthy_on_postgresql_with_a_celery_broker(stack):
    with urllib.request.urlopen(f"{stack}/healthz", timeout=10) as response:  # noqa: S310
        assert response.status == 200
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-ID"])
        body = json.load(response)
    assert (body["status"], body["failed"]) == ("ok", [])
    checks = body["checks"]
    assert checks["database"]["vendor"] == "postgresql"
    assert (checks["broker"]["runner"], checks["broker"]["broker"]) == ("celery", "redis")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", checks["ledger"]["hash"])


def test_the_auditor_uploads_and_replays_on_the_stack(stack_page, shots):
    uploads = STACK_DIR / "demo-uploads"
    alice = stack_page("alice")
    css = alice.locator("link[rel=stylesheet]").get_attribute("href")
    assert re.fullmatch(r"/static/css/console\.[0-9a-f]{12}\.css", css)
    static = alice.request.get(css, headers={"Accept-Encoding": "gzip"})
    assert static.headers["content-encoding"] == "gzip"
    assert static.headers["cache-control"] == "max-age=315360000, public, immutable"
    shots(alice, "stack-trace-list")

    alice.click("nav >> text=Upload")
    alice.wait_for_selector("form.enhanced")
    alice.set_input_files(
        "#upload-input",
        [str(uploads / "demo-diverged.trace.json"), str(uploads / "corrupt.trace.json")],
    )
    uploads_settled(alice, done=1, failed=1)
    assert (
        alice.locator(".upload-file.failed .refusal")
        .inner_text()
        .startswith("Refused: MALFORMED_TRACE ")
    )
    shots(alice, "stack-upload")

    alice.click(".upload-file.done a[href^='/traces/']")
    alice.wait_for_selector("#timeline svg")
    alice.check("input[name=mode][value=audit]")
    alice.click("#replay-submit")
    alice.wait_for_url(re.compile(r"/runs/[^/]+/$"))
    alice.wait_for_selector("#verdict-status", timeout=60_000)  # the worker ran it
    assert alice.inner_text("#verdict-status") == "diverged"
    assert alice.inner_text("#verdict-code") == "REPLAY_DIVERGENCE"
    shots(alice, "stack-divergence")
    assert [e for e in alice.errors if not e.startswith(EXPECTED)] == []

    missing = alice.goto("/no/such/page/")
    assert missing.status == 404
    assert alice.inner_text("h1") == "Not found"
    shots(alice, "stack-not-found")
    not_found = "Failed to load resource: the server responded with a status of 404"
    assert [e for e in alice.errors if not e.startswith((EXPECTED, not_found))] == []
