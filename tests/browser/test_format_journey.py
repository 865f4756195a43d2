"""Two formats in one drop, in a real browser: an auditor drops an AHD sidecar with its token
and brief, and a ContextOS trace with its pinned pack and KG snapshot, on the upload page;
opens both; replays the ContextOS one and reads the seven-field DecisionRecord diff.
Screenshots are kept under test-artifacts/browser/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in
from tests.replay.helpers import register_golden_key

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "contextos"


def test_an_auditor_uploads_an_ahd_run_and_a_contextos_trace_and_reads_the_record_diff(
    new_context, shots, tmp_path, settings
):
    register_golden_key()  # the key the pack and KG snapshot are signed with
    settings.REPLAY_AHD_ROOT = ""  # the sidecar's inputs come with it
    demo_ahd = Path(settings.BASE_DIR) / "replay" / "demo_ahd"
    sidecar = tmp_path / "2026-04-21-swiss.replay.json"
    sidecar.write_bytes((demo_ahd / "docs" / "evals" / sidecar.name).read_bytes())
    token = tmp_path / "swiss-editorial.yml"
    token.write_bytes((demo_ahd / "tokens" / token.name).read_bytes())
    brief = tmp_path / "landing.yml"
    brief.write_bytes((demo_ahd / "briefs" / brief.name).read_bytes())
    trace = tmp_path / "refund.contextos.json"
    trace.write_bytes((FIXTURES / "diverged_resealed.trace.json").read_bytes())
    pack = tmp_path / "refund-triage@1.4.0.pack.json"
    pack.write_bytes((FIXTURES / pack.name).read_bytes())
    kg = tmp_path / "kg-snapshot.kg.json"
    kg.write_bytes((FIXTURES / kg.name).read_bytes())

    alice = sign_in(new_context, "alice")
    alice.click("nav >> text=Upload")
    alice.wait_for_selector("form.enhanced")
    alice.set_input_files(
        "#upload-input", [str(p) for p in (sidecar, token, brief, trace, pack, kg)]
    )
    alice.locator(".upload-file.done").nth(1).wait_for()
    rows = alice.locator(".upload-file")
    assert rows.count() == 2  # each trace goes with its own inputs, none alone
    ahd_row = alice.locator(".upload-file.done", has_text="landing.yml").inner_text()
    assert "Stored as 2026-04-21-swiss · ahd-replay" in ahd_row
    assert "Verified on upload: ok" in ahd_row
    cx_row = alice.locator(".upload-file.done", has_text="refund-triage@1.4.0.pack.json")
    assert "Stored as 4bf92f3577b34da6a3ce929d0e0e4736 · contextos-trace" in cx_row.inner_text()
    assert "kg-snapshot.kg.json" in cx_row.inner_text()
    shots(alice, "two-formats-uploaded")
    ahd_href = (
        alice.locator(".upload-file.done", has_text="landing.yml")
        .locator("a[href^='/traces/']")
        .first.get_attribute("href")
    )
    cx_href = cx_row.locator("a[href^='/traces/']").first.get_attribute("href")

    # the AHD run opens with its panel and its stored inputs
    alice.goto(ahd_href)
    alice.wait_for_selector("#format-panel")
    assert alice.inner_text("#format-panel h2") == "An AHD replay sidecar"
    shots(alice, "ahd-run-opened")

    # the ContextOS trace opens with its panel and its pinned inputs in the store
    alice.goto(cx_href)
    alice.wait_for_selector("#format-panel")
    panel = alice.inner_text("#format-panel")
    assert alice.inner_text("#format-panel h2") == "A ContextOS trace"
    assert "refund:ord-1042" in panel
    assert "refund-triage@1.4.0" in panel
    shots(alice, "contextos-trace-opened")

    alice.check("input[name=mode][value=audit]")
    alice.click("#replay-submit")
    alice.wait_for_selector("#verdict-status")
    assert alice.inner_text("#verdict-status") == "diverged"
    assert alice.inner_text("#verdict-code") == "RESULT_MISMATCH"
    assert alice.inner_text("#contextos-status") == "diverged"
    assert alice.inner_text("#contextos-diverged-at") == "outputs"
    assert "diverged fields: outputs, status" in alice.inner_text("#contextos-verdict")
    paths = alice.locator("#divergences td.path code").all_inner_texts()
    assert paths == ["/outputs", "/status"]
    table = alice.inner_text("#divergences")
    assert "needs_approval" in table
    assert "completed" in table
    shots(alice, "contextos-record-diff")
    no_console_errors(alice)
