"""The shared approval page in a real browser (issue 19): a council member opens a halt clear
and a legal erasure approval from her inbox, each on /requests/<kind>/<key>/, and signs both
with the key held in her browser, as the other kinds are signed."""

from __future__ import annotations

import pytest

from tests.browser.test_journeys import no_console_errors
from tests.browser.test_signing import browser_key_for, replayed
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac
    from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def test_a_council_member_signs_a_halt_clear_and_a_legal_approval_from_her_inbox(
    new_context, shots, trace_key, settings
):
    from dsr import services as dsr_services
    from governance.models import Halt, Vote

    settings.DSR_APPROVAL_BY = "council"  # this deployment has the council sign legal approvals
    for name in ("alice", "adam", "cora", "colin", "lena"):
        persona(name)  # roles in the ledger before anything is filed
    cora = browser_key_for(new_context, "cora")

    replayed("broken_chain")  # a tampered file: its replay halts that file
    halt = Halt.objects.active().get(payload__target_kind="blob")
    legal = dsr_services.legal_request_open(
        actor=persona("lena"),
        identifiers=["jane.doe@example.com"],
        kind="erasure",
        legal_basis="GDPR Art. 17",
    )
    dsr_services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )

    cora.goto("/traces/")
    assert cora.inner_text("#nav-inbox") == "Inbox (2)"
    cora.click("#nav-inbox")
    cora.wait_for_selector("#inbox")
    kinds = cora.locator("#inbox tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert sorted(kinds) == ["halt-clear", "legal-erasure"]

    cora.click("#inbox tr[data-kind=halt-clear] a")
    cora.wait_for_url(f"**/requests/halt-clear/{halt.seq}/")
    assert cora.inner_text("h1").startswith(f"Halt #{halt.seq} on blob")
    cora.wait_for_selector("#sign-button:visible")
    assert f'"halt_seq":{halt.seq}' in cora.inner_text("#payload-text")
    shots(cora, "halt-clear-on-the-shared-page")
    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signature toward clearing this halt is recorded.")
    assert "1 of 2 council signatures to clear it." in cora.content()
    assert "You have already signed toward clearing this halt." in cora.inner_text("#sign-blocker")

    cora.click("#nav-inbox")
    cora.wait_for_selector("#inbox")
    cora.click("#inbox tr[data-kind=legal-erasure] a")
    cora.wait_for_url(f"**/requests/legal-erasure/{legal.id}/")
    assert cora.inner_text("h1") == "Approve the erasure of a legal request"
    cora.wait_for_selector("#erasure-plan")
    cora.wait_for_selector("#sign-button:visible")
    assert legal.subject_refs[0] in cora.inner_text("#payload-text")
    shots(cora, "legal-erasure-on-the-shared-page")
    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signed approval is recorded in the ledger.")
    cora.wait_for_url(f"**/dsr/{legal.id}/")
    shots(cora, "legal-erasure-signed")

    assert cora.inner_text("#nav-inbox") == "Inbox (0)"
    no_console_errors(cora)
    vote = Vote.objects.get(request__kind="halt-clear", request__subject=str(halt.seq))
    assert vote.approver.username == "cora"
    approval = Vote.objects.get(request__kind__startswith="legal-")
    assert (approval.approver.username, approval.payload["purpose"], approval.role) == (
        "cora",
        "erasure",
        "council",
    )
