"""A MACE reflective log exactly as MACE's writer persists it, in a real browser: an auditor
drops the log MACE wrote on the upload page, sees it verified and stored as not replayable,
and opens it: the panel shows what it recorded and why it cannot be replayed. Screenshots are
kept under test-artifacts/browser/."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in
from tests.replay import mace_reference as ref

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

WRITER = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "mace" / "writer"
CLEAN_ID = "19ec5ffdbeccb82fb3b2192d20a358d77cfd97e5729dc7a013f0befd41b862e4"


def test_an_auditor_uploads_a_log_mace_wrote_and_opens_it(new_context, shots, tmp_path):
    from replay.keys import key_add_hmac

    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))
    log = tmp_path / "reflective_log.json"
    log.write_bytes((WRITER / "clean.json").read_bytes())

    alice = sign_in(new_context, "alice")
    alice.click("nav >> text=Upload")
    alice.wait_for_selector("form.enhanced")
    alice.set_input_files("#upload-input", [str(log)])
    row = alice.locator(".upload-file.done")
    row.wait_for()
    text = " ".join(row.inner_text().split())
    # no "0 events, 0 steps": a log as MACE's writer persists it has neither
    assert f"Stored as {CLEAN_ID} · mace-reflective-log · not replayable" in text
    assert "Verified on upload: ok" in text
    assert "MALFORMED_TRACE" not in text
    shots(alice, "mace-writer-log-uploaded")

    alice.goto(row.locator("a[href^='/traces/']").first.get_attribute("href"))
    alice.wait_for_selector("#format-panel")
    assert alice.inner_text("#format-panel h2") == "A MACE reflective log"
    panel = alice.inner_text("#format-panel")
    assert "Your name is Ada." in panel
    assert "no: no job seed, no snapshots (a log as MACE's writer persists it)" in panel
    assert "HMAC-SHA256 by reflective_log_key over the immutable sub-payload verifies" in panel
    assert "This trace is replayable" not in alice.inner_text("#missing-box")
    shots(alice, "mace-writer-log-opened")
    no_console_errors(alice)
