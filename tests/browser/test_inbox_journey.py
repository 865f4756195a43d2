"""One inbox in a real browser: a council member sees how many requests wait for her
signature on every page, opens requests of different kinds from her inbox and signs one."""

from __future__ import annotations

import pytest

from governance.models import Vote
from tests.browser.test_journeys import no_console_errors
from tests.browser.test_signing import browser_key_for, replayed
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def trace_key():
    from replay.keys import key_add_hmac
    from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def test_a_council_member_works_through_her_inbox(new_context, shots, trace_key):
    from governance.models import Halt
    from governance.services import force_continue_request_file, production_replay_request_file

    for name in ("alice", "adam", "cora", "colin"):
        persona(name)  # roles in the ledger before anything is filed
    cora = browser_key_for(new_context, "cora")
    assert cora.inner_text("#nav-inbox") == "Inbox (0)"

    production = production_replay_request_file(
        trace=replayed("ok").trace, actor=persona("alice"), reason="recovery drill"
    )
    force_continue_request_file(
        run=replayed("diverged"), actor=persona("alice"), reason="known drift"
    )
    replayed("broken_chain")  # a tampered file: its replay halts that file
    halt = Halt.objects.active().get(payload__target_kind="blob")

    cora.goto("/traces/")
    assert cora.inner_text("#nav-inbox") == "Inbox (3)"
    cora.click("#nav-inbox")
    cora.wait_for_selector("#inbox")
    kinds = cora.locator("#inbox tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds == ["production-replay", "force-continue", "halt-clear"]
    assert "2 more council signatures" in cora.inner_text("#inbox tr[data-kind=production-replay]")
    shots(cora, "inbox-of-three")

    cora.click("#inbox tr[data-kind=halt-clear] a")
    cora.wait_for_url(f"**/requests/halt-clear/{halt.seq}/")
    cora.wait_for_selector("#sign-button:visible")
    shots(cora, "halt-opened-from-the-inbox")

    cora.goto("/inbox/")
    cora.click("#inbox tr[data-kind=production-replay] a")
    cora.wait_for_url(f"**/requests/production-replay/{production.id}/")
    assert f'"request_id":"{production.id}"' in cora.inner_text("#payload-text")
    cora.click("#sign-button")
    cora.wait_for_selector("text=Your signed decision is recorded in the ledger.")
    shots(cora, "production-signed")

    assert cora.inner_text("#nav-inbox") == "Inbox (2)"
    cora.click("#nav-inbox")
    cora.wait_for_selector("#inbox")
    kinds = cora.locator("#inbox tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds == ["force-continue", "halt-clear"]
    shots(cora, "inbox-of-two")
    no_console_errors(cora)
    vote = Vote.objects.get(request=production)
    assert vote.approver.username == "cora"
