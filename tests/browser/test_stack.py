"""The journeys against the production stack (`make prod`, deploy/stack.py): gunicorn
with DEBUG off, static files from WhiteNoise, replays on a Celery worker over Redis,
PostgreSQL. `.ci/run` starts the stack and runs this with REPLAY_BROWSER_BASE_URL (its URL)
and REPLAY_STACK_DIR (its state: the secret the demo passwords derive from, the demo upload
files, the monitoring token) and REPLAY_STACK_DATABASE (its database). The journeys touch
the database only through the browser and HTTP; the least-privilege checks connect with the
application role's credentials the stack made, as its processes do, and try what an
attacker with them would.

The demo users sign in with the credentials the stack wrote (`manage.py demo --credentials`,
REPLAY_STACK_DIR/secrets/demo-users.json, owner-only), the council and admins with the
current code of their TOTP secret.

Without REPLAY_BROWSER_BASE_URL these tests skip (there is no stack to drive); with
REPLAY_REQUIRE_STACK=1 (CI) a missing stack is a failure instead."""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.test_journeys import DROP, EXPECTED, uploads_settled

BASE_URL = os.environ.get("REPLAY_BROWSER_BASE_URL", "").rstrip("/")
STACK_DIR = Path(os.environ.get("REPLAY_STACK_DIR", "var/prod"))
STACK_DATABASE = os.environ.get("REPLAY_STACK_DATABASE", "replay_prod")
STACK_PG = os.environ.get("REPLAY_STACK_PG_HOST", "127.0.0.1:5432")
NO_STACK = "no production stack: set REPLAY_BROWSER_BASE_URL (and REPLAY_STACK_DIR); see .ci/run"


@pytest.fixture
def stack():
    if not BASE_URL:
        if os.environ.get("REPLAY_REQUIRE_STACK") == "1":
            pytest.fail(f"REPLAY_REQUIRE_STACK=1 but {NO_STACK}")
        pytest.skip(NO_STACK)
    return BASE_URL


def current_code(base32_secret: str) -> str:
    from django_otp.oath import totp

    return f"{totp(base64.b32decode(base32_secret)):06d}"


def second_factor(page, secret: str) -> None:
    """Enter the current TOTP code; a code already used in this 30-second step (the same
    person signed in by an earlier test) is refused as used, so wait for the next step."""
    logged = len(page.errors)
    for _ in range(3):
        page.fill("#id_token", current_code(secret))
        page.click("main button[type=submit]")
        try:
            page.wait_for_url(re.compile(r"/traces/"), timeout=10_000)
            return
        except PlaywrightTimeout:
            assert "already used" in page.inner_text("main"), page.inner_text("main")
            del page.errors[logged:]  # the refused code's 400 answer, logged by the browser
            time.sleep(30 - time.time() % 30 + 1)


@pytest.fixture
def stack_page(chromium, stack):
    """`stack_page("alice")`: a page in a fresh context on the stack (its own cookies and
    IndexedDB), signed in as that demo user, with the second factor where the role needs it."""
    credentials = json.loads((STACK_DIR / "secrets" / "demo-users.json").read_text())
    contexts = []

    def make(name: str, **options):
        context = chromium.new_context(
            base_url=stack, viewport={"width": 1280, "height": 900}, **options
        )
        contexts.append(context)
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.errors = errors  # type: ignore[attr-defined]
        page.goto("/accounts/login/")
        page.fill("#id_username", name)
        page.fill("#id_password", credentials[name]["password"])
        page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r"/(traces|accounts/2fa/verify)/"))
        if "/accounts/2fa/verify/" in page.url:
            second_factor(page, credentials[name]["totp_secret"])
        page.wait_for_url(re.compile(r"/traces/"))
        return page

    yield make
    for context in contexts:
        context.close()


def monitoring_token() -> str:
    return (STACK_DIR / "secrets" / "monitoring_token").read_text().strip()


def test_the_stack_is_healthy_on_postgresql_with_a_celery_broker(stack):
    with urllib.request.urlopen(f"{stack}/healthz", timeout=10) as response:  # noqa: S310
        assert response.status == 200
        assert response.read() == b'{"status": "ok"}'  # anyone: the status alone
    monitor = urllib.request.Request(  # noqa: S310
        f"{stack}/healthz", headers={"Authorization": f"Bearer {monitoring_token()}"}
    )
    with urllib.request.urlopen(monitor, timeout=10) as response:  # noqa: S310
        assert response.status == 200
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-ID"])
        body = json.load(response)
    assert (body["status"], body["failed"]) == ("ok", [])
    checks = body["checks"]
    assert checks["database"]["vendor"] == "postgresql"
    assert (checks["broker"]["runner"], checks["broker"]["broker"]) == ("celery", "redis")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", checks["ledger"]["hash"])
    # .ci/run starts the stack with --seaweed: the blobs are on SeaweedFS's S3
    expected = os.environ.get("REPLAY_STACK_BLOB_BACKEND", "FileSystemStorage")
    assert checks["blobs"]["backend"] == expected


def test_every_file_the_stack_wrote_is_owner_only(stack):
    written = [STACK_DIR, *STACK_DIR.rglob("*")]
    assert any(p.name.startswith("celerybeat-schedule") for p in written)  # beat ran
    assert (STACK_DIR / "staticfiles").is_dir()  # collectstatic ran
    loose = {str(p): oct(p.stat().st_mode & 0o777) for p in written if p.stat().st_mode & 0o077}
    assert loose == {}


@pytest.fixture
def as_the_app(stack):
    """A connection with the credentials the stack's processes use (the application role)."""
    import psycopg

    role = f"{STACK_DATABASE}_app"
    password = (STACK_DIR / "secrets" / "database_app_password").read_text().strip()
    host, port = STACK_PG.split(":")
    with psycopg.connect(
        host=host, port=port, dbname=STACK_DATABASE, user=role, password=password
    ) as conn:
        yield conn


def test_the_stack_processes_connect_as_the_application_role(stack, as_the_app):
    urllib.request.urlopen(f"{stack}/healthz", timeout=10).close()  # noqa: S310
    users = as_the_app.execute(
        "SELECT DISTINCT usename FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    assert users == [(f"{STACK_DATABASE}_app",)]
    super_, create_role = as_the_app.execute(
        "SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    assert (super_, create_role) == (False, False)


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        (
            "SET session_replication_role = replica",
            'permission denied to set parameter "session_replication_role"',
        ),
        (
            "SET LOCAL session_replication_role = replica",
            'permission denied to set parameter "session_replication_role"',
        ),
        (
            "DROP TRIGGER governance_governanceevent_no_rewrite ON governance_governanceevent",
            "must be owner of relation governance_governanceevent",
        ),
        (
            "ALTER TABLE governance_governanceevent DISABLE TRIGGER ALL",
            "must be owner of table governance_governanceevent",
        ),
        (
            "UPDATE governance_governanceevent SET actor_label = 'x' WHERE seq = 1",
            "permission denied for table governance_governanceevent",
        ),
        (
            "DELETE FROM governance_governanceevent WHERE seq = 1",
            "permission denied for table governance_governanceevent",
        ),
    ],
)
def test_the_application_role_cannot_switch_the_guards_off(as_the_app, statement, refusal):
    import psycopg

    with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        as_the_app.execute(statement)
    as_the_app.rollback()
    assert str(refused.value).splitlines()[0] == refusal


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


def diverged_run(alice) -> None:
    """Upload the demo's diverged trace (stored once) and replay it on the worker."""
    alice.click("nav >> text=Upload")
    alice.wait_for_selector("form.enhanced")
    alice.set_input_files(
        "#upload-input", [str(STACK_DIR / "demo-uploads" / "demo-diverged.trace.json")]
    )
    uploads_settled_done(alice)
    alice.click(".upload-file.done a[href^='/traces/']")
    alice.wait_for_selector("#timeline svg")
    alice.check("input[name=mode][value=audit]")
    alice.click("#replay-submit")
    alice.wait_for_selector("#verdict-status", timeout=60_000)


def uploads_settled_done(page) -> None:
    page.locator(".upload-file.done").first.wait_for()


def test_the_council_approves_a_force_continue_on_the_stack(stack_page, shots):
    alice = stack_page("alice")
    diverged_run(alice)
    assert alice.inner_text("#verdict-code") == "REPLAY_DIVERGENCE"
    alice.click("#request-force-continue")
    alice.fill("#id_reason", "The router change is intended; continue the audit past it.")
    alice.click("#file-request")
    alice.wait_for_selector("#remaining")
    request_url = alice.url

    signers = {name: stack_page(name) for name in ("cora", "colin", "adam")}
    keys_registered_and_confirmed(stack_page, signers)

    for name, page in signers.items():
        page.goto("/force-continue/")
        page.click("text=Awaits your signature")
        assert '"type":"replay-audit-console/force-continue-approval/v1"' in page.inner_text(
            "#payload-text"
        )
        page.click("#sign-button")
        page.wait_for_selector("text=Your signed decision is recorded in the ledger.")
        shots(page, f"stack-{name}-signed")
        assert [e for e in page.errors if not e.startswith(EXPECTED)] == []

    alice.goto(request_url)
    alice.click("#resumed-run-link")
    alice.wait_for_selector("#non-authoritative", timeout=60_000)  # resumed on the worker
    assert alice.inner_text("#non-authoritative") == "non-authoritative"
    assert alice.inner_text("#force-continued") == "force-continued"
    shots(alice, "stack-resumed-non-authoritative")
    assert [e for e in alice.errors if not e.startswith(EXPECTED)] == []


def keys_registered_and_confirmed(stack_page, signers: dict) -> None:
    """Each signer makes a key in their browser; adam confirms the council's, sam adam's."""
    for page in signers.values():
        page.goto("/governance/keys/")
        page.click("#generate-key")
        page.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")

    def confirm(admin, owner: str) -> None:
        admin.goto("/governance/keys/")
        # the row whose owner cell is exactly the owner (the key's name has a column too)
        row = admin.locator("tr", has=admin.locator(f"td:text-is('{owner}')"))
        row.locator("button[id^='confirm-']").first.click()
        admin.wait_for_selector(f"text=/Key .+ of {owner} confirmed\\./")

    admin = signers.get("adam") or stack_page("adam")
    for owner in signers:
        if owner != "adam":
            confirm(admin, owner)
    if "adam" in signers:
        confirm(stack_page("sam"), "adam")


def demo_trace_url(page, filename: str) -> str:
    """The page of the demo file stored under ``filename`` (the API names each file)."""
    listed = page.request.get("/api/traces/?limit=200").json()["results"]
    return next(f"/traces/{t['sha256']}/" for t in listed if t["filename"] == filename)


def test_the_council_approves_a_production_replay_on_the_stack(stack_page, shots):
    alice = stack_page("alice")
    alice.goto(demo_trace_url(alice, "demo-ok.trace.json"))
    alice.wait_for_selector("#timeline svg")
    assert alice.locator("input[name=mode][value=production]").count() == 0
    alice.click("#ask-production a")
    alice.fill("#id_reason", "Disaster-recovery drill on the stack: replay it exactly.")
    alice.click("#file-production-request")
    alice.wait_for_selector("#remaining")
    assert "2 council approval(s)" in alice.inner_text("#remaining")
    request_url = alice.url

    council = {name: stack_page(name) for name in ("cora", "colin")}
    keys_registered_and_confirmed(stack_page, council)
    for name, page in council.items():
        page.goto("/production/")
        page.click("text=Awaits your signature")
        payload = page.inner_text("#payload-text")
        assert '"type":"replay-audit-console/production-replay-approval/v1"' in payload
        page.click("#sign-button")
        page.wait_for_selector("text=Your signed decision is recorded in the ledger.")
        shots(page, f"stack-{name}-signed-production")
        assert [e for e in page.errors if not e.startswith(EXPECTED)] == []

    alice.goto(request_url)
    alice.click("#production-run-link")
    alice.wait_for_selector("#verdict-status", timeout=60_000)  # the worker ran it
    assert alice.inner_text("#verdict-status") == "ok"
    assert alice.inner_text("h1").startswith("Production replay of")
    assert "council approval" in alice.inner_text("#council-approved")
    shots(alice, "stack-production-replay")
    assert [e for e in alice.errors if not e.startswith(EXPECTED)] == []


def test_the_pages_read_without_javascript_on_the_stack(stack_page, shots):
    alice = stack_page("alice", java_script_enabled=False)
    rows = alice.locator("table tbody tr")
    assert rows.count() >= 5  # the demo's traces, listed by the server alone
    long_url = demo_trace_url(alice, "demo-long.trace.jsonl.gz")
    assert alice.locator(f"table tbody a[href='{long_url}']").count() == 1
    shots(alice, "stack-no-js-trace-list")

    alice.click(f"table tbody a[href='{long_url}']")
    alice.wait_for_selector("#timeline svg")
    assert alice.locator("#event-list li").count() == 50  # the first window of events
    assert alice.inner_text("#event-list li >> nth=0").startswith("seq 0: ")
    alice.click("#events a[rel=next]")  # a plain link: the next keyset window
    assert alice.inner_text("#event-list li >> nth=0").startswith("seq 50: ")
    shots(alice, "stack-no-js-trace-page")

    alice.goto("/governance/")
    assert alice.inner_text("h1") == "Governance ledger"
    assert alice.locator("#ledger-table tbody tr").count() >= 1
    assert alice.inner_text("#ledger-banner").startswith(("Verified through seq", "Not verified"))
    shots(alice, "stack-no-js-ledger")


def test_files_dropped_on_the_zone_upload_on_the_stack(stack_page, shots):
    alice = stack_page("alice")
    alice.goto("/traces/upload/")
    alice.wait_for_selector("form.enhanced")
    assert alice.is_hidden("#upload-submit")  # the script took over: files go as they come
    diverged = (STACK_DIR / "demo-uploads" / "demo-diverged.trace.json").read_bytes()
    files = [["dropped-diverged.trace.json", list(diverged)], ["empty.trace.json", []]]
    alice.evaluate(DROP, [files])
    alice.wait_for_selector(".upload-file.done")
    alice.wait_for_selector(".upload-file.failed")
    names = alice.locator(".upload-file > .filename").all_inner_texts()
    assert names == ["dropped-diverged.trace.json", "empty.trace.json"]
    assert "MALFORMED_TRACE" in alice.inner_text(".upload-file.failed")
    shots(alice, "stack-dropped-files")
    alice.click(".upload-file.done a[href^='/traces/']")
    alice.wait_for_selector("#timeline svg")
    assert [e for e in alice.errors if not e.startswith(EXPECTED)] == []
