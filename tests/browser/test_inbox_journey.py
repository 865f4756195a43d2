"""One inbox in a real browser: a council member sees how many requests wait for her
signature on every page, opens a request of each kind from her inbox (force-continue,
production replay, role grant, halt clear, and, where the deployment has the council sign
them, a legal request's release and erasure approvals) and signs it; the count goes down by
one each time."""

from __future__ import annotations

import pytest

from console.views.inbox import MESSAGE_NOTHING_WAITS
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


def _legal(kind: str):
    """A legal request whose subject's identity is checked: its approvals are open."""
    from dsr import services as dsr_services

    legal = dsr_services.legal_request_open(
        actor=persona("lena"),
        identifiers=[f"{kind}.subject@example.com"],
        kind=kind,
        legal_basis="GDPR Art. 15 and 17",
    )
    return dsr_services.legal_request_identity_verify(
        request=legal, actor=persona("lena"), method="passport seen on a video call"
    )


def _file_one_of_each() -> dict[str, tuple[str, str]]:
    """One request of every kind, oldest first: {kind: (its key, what its payload names)}."""
    from governance.models import Halt
    from governance.services import (
        force_continue_request_file,
        production_replay_request_file,
        user_roles_change,
    )

    production = production_replay_request_file(
        trace=replayed("ok").trace, actor=persona("alice"), reason="recovery drill"
    )
    force = force_continue_request_file(
        run=replayed("diverged"), actor=persona("alice"), reason="known drift"
    )
    grant = user_roles_change(
        actor=persona("adam"), user=persona("vera"), roles=["viewer", "council"], reason="elected"
    ).grant
    replayed("broken_chain")  # a tampered file: its replay halts that file (nobody declared it)
    halt = Halt.objects.active().get(payload__target_kind="blob")
    release, erasure = _legal("access"), _legal("erasure")
    return {
        "production-replay": (str(production.id), f'"request_id":"{production.id}"'),
        "force-continue": (str(force.id), f'"request_id":"{force.id}"'),
        "role-grant": (str(grant.id), f'"request_id":"{grant.id}"'),
        "halt-clear": (str(halt.seq), f'"halt_seq":{halt.seq}'),
        "legal-release": (str(release.id), f'"request_id":"{release.id}"'),
        "legal-erasure": (str(erasure.id), f'"request_id":"{erasure.id}"'),
    }


#: what each kind's approval page says once the signature is recorded, and where it lands
SIGNED = {
    "production-replay": ("Your signed decision is recorded in the ledger.", "requests"),
    "force-continue": ("Your signed decision is recorded in the ledger.", "requests"),
    "role-grant": ("Your signed decision is recorded in the ledger.", "requests"),
    "halt-clear": ("Your signature toward clearing this halt is recorded.", "requests"),
    "legal-release": ("Your signed approval is recorded in the ledger.", "dsr"),
    "legal-erasure": ("Your signed approval is recorded in the ledger.", "dsr"),
}


def _kinds_listed(page) -> list[str]:
    """The kinds the inbox page lists, in its order (none: it says nothing waits)."""
    page.wait_for_url("**/inbox/")
    page.wait_for_selector("#nav-inbox")
    return page.locator("#inbox tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")


def test_a_council_member_signs_one_request_of_each_kind_from_her_inbox(
    new_context, shots, trace_key, settings
):
    settings.DSR_APPROVAL_BY = "council"  # this deployment has the council sign legal approvals
    for name in ("alice", "adam", "cora", "colin", "lena", "vera"):
        persona(name)  # roles in the ledger before anything is filed
    cora = browser_key_for(new_context, "cora")
    assert cora.inner_text("#nav-inbox") == "Inbox (0)"

    filed = _file_one_of_each()

    cora.goto("/traces/")
    assert cora.inner_text("#nav-inbox") == "Inbox (6)"
    cora.click("#nav-inbox")
    assert _kinds_listed(cora) == list(filed)  # oldest first
    assert "2 more council signatures" in cora.inner_text("#inbox tr[data-kind=production-replay]")
    shots(cora, "inbox-of-six")

    waiting = len(filed)
    for kind, (key, names) in filed.items():
        cora.click("#nav-inbox")
        cora.wait_for_selector("#inbox")
        cora.click(f"#inbox tr[data-kind={kind}] a")
        cora.wait_for_url(f"**/requests/{kind}/{key}/")
        cora.wait_for_selector("#sign-button:visible")
        assert names in cora.inner_text("#payload-text")
        cora.click("#sign-button")
        message, lands = SIGNED[kind]
        cora.wait_for_selector(f"text={message}")
        if lands == "dsr":
            cora.wait_for_url(f"**/dsr/{key}/")
        shots(cora, f"{kind}-signed-from-the-inbox")
        waiting -= 1

        assert cora.inner_text("#nav-inbox") == f"Inbox ({waiting})", kind
        assert Vote.objects.get(request__kind=kind).approver.username == "cora"
        cora.click("#nav-inbox")
        assert kind not in _kinds_listed(cora)

    assert cora.inner_text("#nav-inbox") == "Inbox (0)"
    assert MESSAGE_NOTHING_WAITS in cora.inner_text("main")
    no_console_errors(cora)
    assert sorted(Vote.objects.values_list("request__kind", "role")) == sorted(
        (kind, "council") for kind in filed
    )
