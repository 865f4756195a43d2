"""In Chromium: two native runs compared from the trace page's "compare with…" form, reading
the step that diverged with both recorded values; an AHD run uploaded as one archive
(run.tar.gz: the sidecar with its token and brief) is stored and opened."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from replay.models import Trace
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona
from tests.published import shared_or_skip

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")
SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
CHECKOUT = SHARED / "ahd" / "checkout"
SWISS = "2026-04-21-swiss.replay.json"


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def store(name: str) -> Trace:
    from replay.services import trace_ingest

    return trace_ingest(source=io.BytesIO(trace_bytes(name)), filename=f"{name}.trace.json").trace


def test_two_native_runs_compared_from_the_trace_page(new_context, shots, trace_key):
    ok, diverged = store("ok"), store("diverged")
    page = sign_in(new_context, "vera")
    page.goto(f"/traces/{ok.blob.sha256}/")
    choice = page.locator("#compare-other option")
    assert choice.count() == 1
    assert choice.first.inner_text().startswith("diverged.trace.json — same job")
    shots(page, "trace-page-compare-with")
    page.click("#compare-submit")
    page.wait_for_url(re.compile(rf"/traces/{ok.blob.sha256}/compare/{diverged.blob.sha256}/$"))
    sections = page.locator(".compare-section h3").all_inner_texts()
    assert sections == ["Step 3 (seq 3, route-1, router.decide@1) /steps/3", "Seal /seal"]
    step = page.locator(".compare-step tbody tr").first.locator("td").all_inner_texts()
    assert step == ["/steps/3/output/route", "changed", '"search"', '"write"']
    headers = page.locator(".compare-step thead th").all_text_contents()
    assert headers[2:] == ["ok.trace.json", "diverged.trace.json"]
    shots(page, "the-step-that-diverged")
    no_console_errors(page)


def test_a_trace_typed_by_id_is_compared_without_javascript(new_context, shots, trace_key):
    ok, diverged = store("ok"), store("diverged")
    persona("vera")
    from tests.console.personas import PASSWORD

    context = new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/traces/"))
    page.goto(f"/traces/{diverged.blob.sha256}/")
    page.fill("#compare-other-id", ok.blob.sha256)
    page.click("#compare-submit")
    page.wait_for_url(re.compile(rf"/compare/{ok.blob.sha256}/$"))
    step = page.locator(".compare-step tbody tr").first.locator("td").all_inner_texts()
    assert step == ["/steps/3/output/route", "changed", '"write"', '"search"']
    shots(page, "compared-without-javascript")


def run_tgz() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in (f"docs/evals/{SWISS}", "tokens/swiss-editorial.yml", "briefs/landing.yml"):
            tar.add(str(CHECKOUT / path), arcname=path)
    return buf.getvalue()


def test_an_ahd_run_uploaded_as_one_archive_is_stored_and_opened(
    new_context, shots, tmp_path, settings
):
    shared_or_skip()  # the AHD checkout is read from ../shared (a clone alone skips; CI has it)
    settings.REPLAY_AHD_ROOT = ""  # the inputs can only come from the archive
    archive = tmp_path / "run.tar.gz"
    archive.write_bytes(run_tgz())
    page = sign_in(new_context, "alice")
    page.goto("/traces/upload/")
    page.wait_for_selector("form.enhanced")
    page.set_input_files("#upload-input", [str(archive)])
    done = page.locator(".upload-file.done")
    done.wait_for()
    stored = done.inner_text()
    assert "Stored as 2026-04-21-swiss · ahd-replay" in stored
    assert "Verified on upload: ok" in stored
    shots(page, "run-archive-uploaded")
    trace = Trace.objects.get()
    assert (trace.filename, trace.last_status) == (SWISS, "ok")
    page.goto(f"/traces/{trace.blob.sha256}/")
    inputs = page.locator("#format-inputs tbody tr").all_inner_texts()
    assert len(inputs) == 2
    assert all(row.endswith("in the store") for row in inputs)
    assert page.locator("#format-verdict").inner_text().startswith("ok")
    shots(page, "run-archive-opened")
    no_console_errors(page)
