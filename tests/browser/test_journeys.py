"""The journeys of journeys.md in a real browser: an auditor uploads, replays and reads a
divergence, asks for force-continue; two council members and an admin, each in their own
browser, register keys made in that browser and sign; the replay resumes, non-authoritative.
Screenshots of every step are kept under test-artifacts/browser/."""

from __future__ import annotations

import re

import pytest

from governance.models import ForceContinueRequest, MemberKey
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import PASSWORD, current_code, persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def sign_in(new_context, name: str):
    """A page in a new browser context (its own cookies and IndexedDB) signed in as `name`."""
    user = persona(name)
    page = new_context().new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors  # type: ignore[attr-defined]
    page.goto("/accounts/login/")
    page.fill("#id_username", name)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/(traces|accounts/2fa/verify)/"))
    if "/accounts/2fa/verify/" in page.url:
        page.fill("#id_token", current_code(user))
        page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/traces/"))
    return page


#: the refused upload's 422 is an answer the page expects, not an error of the page
EXPECTED = "Failed to load resource: the server responded with a status of 422"


def uploads_settled(page, *, done: int, failed: int) -> None:
    """Wait until the upload list shows this many verdicts and refusals; if it never does,
    fail with what the list says (the CSP forbids the eval'd waits of wait_for_function)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.locator(".upload-file.done").nth(done - 1).wait_for()
        page.locator(".upload-file.failed").nth(failed - 1).wait_for()
    except PlaywrightTimeout:
        shown = page.inner_text("#upload-progress")
        raise AssertionError(f"uploads did not settle; the page shows:\n{shown}") from None


def no_console_errors(page) -> None:
    """Nothing refused by the CSP, no script error, no missing resource."""
    assert [e for e in page.errors if not e.startswith(EXPECTED)] == []


def test_auditor_council_and_admin_journeys(new_context, shots, trace_key, tmp_path, settings):
    from pathlib import Path

    for name in ("alice", "cora", "colin", "adam", "sam"):
        persona(name)
    good = tmp_path / "diverged.trace.json"
    good.write_bytes(trace_bytes("diverged"))
    demo_ahd = Path(settings.BASE_DIR) / "replay" / "demo_ahd"
    settings.REPLAY_AHD_ROOT = ""  # the sidecar's inputs come with it
    sidecar = tmp_path / "2026-04-21-swiss.replay.json"
    sidecar.write_bytes((demo_ahd / "docs" / "evals" / sidecar.name).read_bytes())
    token = tmp_path / "swiss-editorial.yml"
    token.write_bytes((demo_ahd / "tokens" / token.name).read_bytes())
    brief = tmp_path / "landing.yml"
    brief.write_bytes((demo_ahd / "briefs" / brief.name).read_bytes())
    bad = tmp_path / "corrupt.trace.json"
    bad.write_bytes(b'{"format": "replay-trace", "schema_version": 1,')

    # --- the auditor: upload, replay, read the divergence, ask for force-continue --------------
    alice = sign_in(new_context, "alice")
    shots(alice, "auditor-trace-list")
    alice.click("nav >> text=Upload")
    alice.wait_for_selector("form.enhanced")  # upload.js listens: the files go as chosen
    alice.set_input_files(
        "#upload-input", [str(good), str(sidecar), str(token), str(brief), str(bad)]
    )
    uploads_settled(alice, done=2, failed=1)
    bars = alice.locator(".upload-file progress").evaluate_all("bars => bars.map(b => b.value)")
    assert bars == [100, 100, 100]
    refusal = alice.locator(".upload-file.failed .refusal").inner_text()
    assert refusal.startswith("Refused: MALFORMED_TRACE ")
    stored = alice.locator(".upload-file.done", has_text="landing.yml").inner_text()
    assert "Stored as 2026-04-21-swiss · ahd-replay" in stored
    assert "Verified on upload: ok" in stored
    shots(alice, "auditor-upload-verdict-and-refusal")

    alice.click(".upload-file.done a[href^='/traces/']")  # the native trace: stored
    alice.wait_for_selector("#timeline svg")
    assert alice.locator("#missing-box").inner_text().startswith("Missing for production replay")
    shots(alice, "auditor-trace-detail")

    alice.check("input[name=mode][value=audit]")
    alice.click("#replay-submit")
    alice.wait_for_selector("#verdict-status")
    assert alice.inner_text("#verdict-status") == "diverged"
    assert alice.inner_text("#verdict-code") == "REPLAY_DIVERGENCE"
    path = alice.locator("#divergences td.path code").first.inner_text()
    assert path.startswith("/")
    shots(alice, "auditor-divergence-diff")

    alice.click("#request-force-continue")
    alice.fill("#id_reason", "The router change is intended; continue the audit past it.")
    alice.click("#file-request")
    alice.wait_for_selector("#remaining")
    assert "1 admin approval(s) and 2 council approval(s)" in alice.inner_text("#remaining")
    shots(alice, "auditor-force-continue-requested")
    request_url = alice.url
    no_console_errors(alice)

    # --- council members and the admin register keys made in their own browsers -------------
    signers = {name: sign_in(new_context, name) for name in ("cora", "colin", "adam")}
    for name, page in signers.items():
        page.goto("/governance/keys/")
        page.click("#generate-key")
        page.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")
        shots(page, f"{name}-key-registered")
    keys = {k.user.username: k.key_id for k in MemberKey.objects.select_related("user")}
    assert set(keys) == {"cora", "colin", "adam"}

    adam = signers["adam"]
    adam.goto("/governance/keys/")
    for name in ("cora", "colin"):
        adam.click(f"#confirm-{keys[name]}")
        adam.wait_for_selector(f"text=Key {keys[name]} of {name} confirmed.")
    sam = sign_in(new_context, "sam")  # another admin confirms adam's own key
    sam.goto("/governance/keys/")
    sam.click(f"#confirm-{keys['adam']}")
    sam.wait_for_selector(f"text=Key {keys['adam']} of adam confirmed.")
    shots(sam, "admin-confirms-keys")

    # --- each signs the exact payload in the browser ------------------------------------------
    for name in ("cora", "colin", "adam"):
        page = signers[name]
        page.goto("/requests/force-continue/")
        page.click("text=Awaits your signature")
        payload = page.inner_text("#payload-text")
        assert '"type":"replay-audit-console/force-continue-approval/v1"' in payload
        shots(page, f"{name}-reads-the-payload")
        page.click("#sign-button")
        page.wait_for_selector("text=Your signed decision is recorded in the ledger.")
        shots(page, f"{name}-signed")
        no_console_errors(page)

    fc = ForceContinueRequest.objects.get()
    assert fc.state == "approved"
    assert fc.approvals.count() == 3

    # --- the replay resumed, and says it is not authoritative ----------------------------------
    alice.goto(request_url)
    alice.click("#resumed-run-link")
    alice.wait_for_selector("#resumed-banner")
    assert alice.inner_text("#non-authoritative") == "non-authoritative"
    assert alice.inner_text("#force-continued") == "force-continued"
    assert "non-authoritative" in alice.inner_text("#resumed-banner")
    shots(alice, "auditor-resumed-non-authoritative")
    no_console_errors(alice)


def test_a_production_replay_approved_by_the_council_in_their_browsers(
    new_context, shots, trace_key
):
    import io

    from governance.models import ProductionReplayRequest
    from replay.services import trace_ingest

    for name in ("alice", "cora", "colin", "adam"):
        persona(name)
    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace

    alice = sign_in(new_context, "alice")
    alice.goto(f"/traces/{trace.blob.sha256}/")
    assert alice.locator("input[name=mode][value=production]").count() == 0
    alice.click("#ask-production a")
    alice.fill("#id_reason", "Disaster-recovery drill: replay job 7 exactly.")
    shots(alice, "auditor-asks-the-council")
    alice.click("#file-production-request")
    alice.wait_for_selector("#remaining")
    assert "2 council approval(s)" in alice.inner_text("#remaining")
    request_url = alice.url

    council = {name: sign_in(new_context, name) for name in ("cora", "colin")}
    for page in council.values():
        page.goto("/governance/keys/")
        page.click("#generate-key")
        page.wait_for_selector("text=Key registered. An admin must confirm it before you sign.")
    adam = sign_in(new_context, "adam")
    adam.goto("/governance/keys/")
    for key in MemberKey.objects.select_related("user"):
        adam.click(f"#confirm-{key.key_id}")
        adam.wait_for_selector(f"text=Key {key.key_id} of {key.user.username} confirmed.")

    for name, page in council.items():
        page.goto("/requests/production-replay/")
        page.click("text=Awaits your signature")
        payload = page.inner_text("#payload-text")
        assert '"type":"replay-audit-console/production-replay-approval/v1"' in payload
        assert f'"trace_sha256":"{trace.blob.sha256}"' in payload
        shots(page, f"{name}-reads-the-production-payload")
        page.click("#sign-button")
        page.wait_for_selector("text=Your signed decision is recorded in the ledger.")
        no_console_errors(page)

    asked = ProductionReplayRequest.objects.get()
    assert (asked.state, asked.approvals.count()) == ("approved", 2)
    alice.goto(request_url)
    alice.click("#production-run-link")
    alice.wait_for_selector("#verdict-status")
    assert alice.inner_text("#verdict-status") == "ok"
    assert alice.inner_text("h1").startswith("Production replay of")
    assert "council approval" in alice.inner_text("#council-approved")
    shots(alice, "auditor-reads-the-production-replay")
    no_console_errors(alice)


def test_a_queued_replay_updates_in_place_until_its_report(new_context, shots, trace_key):
    import io

    from governance.services import replay_request, replay_run_govern
    from replay.services import trace_ingest

    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace
    run = replay_request(trace=trace, mode="audit", actor=persona("alice"), enqueue=False)
    page = sign_in(new_context, "alice")
    page.goto(f"/runs/{run.id}/")
    assert page.inner_text("#run-state") == "queued"
    shots(page, "progress-queued")
    replay_run_govern(run_id=run.id)
    page.wait_for_selector("#verdict-status", timeout=15_000)
    assert page.inner_text("#verdict-status") == "ok"
    shots(page, "progress-done-report")
    no_console_errors(page)


def test_the_pages_work_without_javascript(new_context, shots, trace_key, tmp_path):
    user = persona("alice")
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.goto("/traces/upload/")
    good = tmp_path / "ok.trace.json"
    good.write_bytes(trace_bytes("ok"))
    page.set_input_files("#upload-input", [str(good)])
    page.click("#upload-submit")
    page.wait_for_selector(".upload-outcome.accepted")
    shots(page, "no-js-upload")
    page.click(".upload-outcome a[href^='/traces/']")
    page.check("input[name=mode][value=audit]")
    page.click("#replay-submit")
    page.wait_for_selector("#verdict-status")
    assert page.inner_text("#verdict-status") == "ok"
    shots(page, "no-js-report")


DROP = """([files]) => {
  const dt = new DataTransfer();
  for (const [name, bytes] of files) dt.items.add(new File([new Uint8Array(bytes)], name));
  const zone = document.getElementById("dropzone");
  for (const type of ["dragenter", "dragover", "drop"]) {
    zone.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
  }
}"""


def test_files_dropped_on_the_zone_upload_each_with_its_own_bar(new_context, shots, trace_key):
    page = sign_in(new_context, "oscar")
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    assert page.is_hidden("#upload-submit")  # the script took over: files go as they come
    files = [["ok.trace.json", list(trace_bytes("ok"))], ["empty.trace.json", []]]
    page.evaluate(DROP, [files])
    page.wait_for_selector(".upload-file.done")
    page.wait_for_selector(".upload-file.failed")
    names = page.locator(".upload-file > .filename").all_inner_texts()
    assert names == ["ok.trace.json", "empty.trace.json"]
    assert "MALFORMED_TRACE" in page.inner_text(".upload-file.failed")
    shots(page, "dropped-files")
    no_console_errors(page)
